package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/wire"
)

// Search finds the past steps most similar to q's texts (GET /v1/search).
// embedder names a built-in embedder; "" means the server's default.
func (c *Client) Search(ctx context.Context, q wire.SearchQuery, embedder string) (*wire.SearchResult, error) {
	v := url.Values{"q": q.Texts}
	if q.K > 0 {
		v.Set("k", strconv.Itoa(q.K))
	}
	if q.MaxDistance > 0 {
		v.Set("max_distance", strconv.FormatFloat(q.MaxDistance, 'g', -1, 64))
	}
	if q.Agent != "" {
		v.Set("agent", q.Agent)
	}
	if len(q.SessionIDs) > 0 {
		v.Set("session", strings.Join(q.SessionIDs, ","))
	}
	for _, k := range q.Kinds {
		v.Add("kind", string(k))
	}
	if embedder != "" {
		v.Set("embedder", embedder)
	}
	var out wire.SearchResult
	if _, err := c.do(ctx, http.MethodGet, "/v1/search", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
