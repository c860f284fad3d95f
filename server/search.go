package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// registerSearchAPI installs GET /v1/search: similarity search over past
// steps (package recall) with the built-in lexical embedder unless the
// request names another built-in one.
func (s *Server) registerSearchAPI() {
	if !s.registered(http.MethodGet, "/v1/search") {
		s.handle(http.MethodGet, "/v1/search", s.search)
	}
}

// search answers GET /v1/search?q=…[&q=…]&k=&max_distance=&agent=&session=&kind=&embedder=
// with recall's QueryWithSteps.
func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	query := recall.Query{Texts: q["q"], Agent: q.Get("agent"), K: 10}
	if len(query.Texts) == 0 {
		return badParam("q is required (the query text; repeat it for several queries)")
	}
	if v := q.Get("k"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil {
			return badParam("k %q is not an integer", v)
		}
		query.K = k
	}
	if v := q.Get("max_distance"); v != "" {
		d, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return badParam("max_distance %q is not a number", v)
		}
		query.MaxDistance = d
	}
	for _, id := range q["session"] {
		query.SessionIDs = append(query.SessionIDs, strings.Split(id, ",")...)
	}
	for _, k := range q["kind"] {
		for _, one := range strings.Split(k, ",") {
			kind, err := steptype.ParseKind(one)
			if err != nil {
				return badParam("kind: %v", err)
			}
			query.Kinds = append(query.Kinds, kind)
		}
	}
	emb := recall.Embedder(recall.DefaultEmbedder())
	if s.cfg.SearchEmbedder != nil {
		emb = s.cfg.SearchEmbedder
	}
	if name := q.Get("embedder"); name != "" && name != emb.Name() {
		var err error
		if emb, err = recall.EmbedderByName(name); err != nil {
			return badParam("embedder: %v", err)
		}
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	res, err := recall.Search(ctx, s.cfg.Engine.Store(), emb, query)
	if errors.Is(err, store.ErrNoVectors) {
		return fmt.Errorf("%w: %v", store.ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// searchOps documents the search endpoint.
func searchOps() []apiOp {
	return []apiOp{{method: "GET", path: "/v1/search", id: "searchSteps", summary: "Past steps most similar to the queries (embeddings, across sessions)",
		params: []apiParam{queryParam("q", "string", "query text (repeatable)"), queryParam("k", "integer", "how many steps, 1..1000, default 10"),
			queryParam("max_distance", "number", "drop steps farther than this cosine distance"), queryParam("agent", "string", "only this agent's sessions"),
			queryParam("session", "string", "only these sessions (comma-separated or repeated)"), queryParam("kind", "string", "only these step kinds"),
			queryParam("embedder", "string", "built-in embedder, default lexical-v1:256")},
		status: 200, resp: "SearchResult", errors: []int{400, 401, 404, 422}}}
}

// searchSchemas documents recall's QueryWithSteps.
func searchSchemas() obj {
	return obj{"SearchResult": object(false, []string{"queries", "embedder", "steps"}, obj{
		"queries":  arrayOf(str("a query text")),
		"embedder": str("embedder name, e.g. lexical-v1:256"),
		"steps": arrayOf(object(false, []string{"step", "score", "distance"}, obj{
			"step": ref("Step"), "score": number(), "distance": number(), "query": integer(),
		})),
	})}
}
