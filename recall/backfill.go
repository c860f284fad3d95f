package recall

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// WorkerConfig configures the embedding Worker and Backfill: which steps
// are embedded, and how. Store and Embedder are required.
type WorkerConfig struct {
	// Store must implement store.VectorStore. Required.
	Store store.Store
	// Embedder embeds the steps. Required.
	Embedder Embedder
	// Kinds are the step kinds embedded. Default DefaultKinds.
	Kinds []steptype.Kind
	// AgentKinds override Kinds for the sessions of an agent (by agent
	// name; a sub-agent's steps belong to its root agent's session). An
	// empty list embeds nothing of that agent.
	AgentKinds map[string][]steptype.Kind
	// Skip leaves out steps it returns true for. Default SkipSearchResults.
	Skip func(*stepwise.Step) bool
	// Text is the text embedded for a step. Default StepText.
	Text func(*stepwise.Step) string
	// BatchSize is how many steps are embedded per Embed call. Default 64.
	BatchSize int
	// QueueSize bounds the steps waiting in the Worker; when full, new
	// steps are left to the next sweep. Default 4096.
	QueueSize int
	// SweepInterval is how often the Worker scans the store for steps
	// without a vector (committed by another process, ingested, answered,
	// or missed while the queue was full or the embedder failing). It also
	// sweeps when it starts. Default 5m; negative disables the periodic
	// sweeps (not the first one).
	SweepInterval time.Duration
	// Logger receives embedding failures of the Worker. Default
	// slog.Default().
	Logger *slog.Logger
}

// SkipSearchResults skips the results of the past_steps_search tool, so
// that searches do not find earlier searches instead of the steps they
// found.
func SkipSearchResults(s *stepwise.Step) bool {
	return s.Kind == steptype.KindTool && s.ToolName == ToolName
}

func (c WorkerConfig) withDefaults() (WorkerConfig, store.VectorStore, error) {
	vs, err := vectorStore(c.Store)
	if err != nil {
		return c, nil, err
	}
	if c.Embedder == nil || c.Embedder.Name() == "" {
		return c, nil, invalid("no embedder, or an embedder without a name")
	}
	if c.BatchSize < 0 || c.QueueSize < 0 {
		return c, nil, invalid("negative BatchSize or QueueSize")
	}
	all := slices.Clone(c.Kinds)
	for _, ks := range c.AgentKinds {
		all = append(all, ks...)
	}
	for _, k := range all {
		if !k.Valid() {
			return c, nil, invalid("unknown step kind %q (want one of %v)", k, steptype.Kinds)
		}
	}
	if c.Kinds == nil {
		c.Kinds = DefaultKinds
	}
	if c.Skip == nil {
		c.Skip = SkipSearchResults
	}
	if c.Text == nil {
		c.Text = StepText
	}
	c.BatchSize = cmp.Or(c.BatchSize, 64)
	c.QueueSize = cmp.Or(c.QueueSize, 4096)
	c.SweepInterval = cmp.Or(c.SweepInterval, 5*time.Minute)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c, vs, nil
}

// BackfillStats report a backfill or a sweep.
type BackfillStats struct {
	Scanned  int           `json:"scanned"`  // steps without a vector read from the store
	Embedded int           `json:"embedded"` // vectors written
	Skipped  int           `json:"skipped"`  // steps not wanted (kind, agent, Skip)
	Elapsed  time.Duration `json:"elapsed"`
}

// Backfill embeds every stored step that the configuration wants and that
// has no vector of the embedder yet, page by page, and returns what it
// did. Run it after enabling step memory on an existing database, or after
// switching embedders; it is safe to run while the Worker runs, and
// running it again only embeds what is still missing. It stops at the
// first embedding or store error (what was written stays).
func Backfill(ctx context.Context, cfg WorkerConfig) (*BackfillStats, error) {
	p, err := newPipeline(cfg)
	if err != nil {
		return nil, err
	}
	st := &BackfillStats{}
	start := time.Now()
	err = p.sweep(ctx, st)
	st.Elapsed = time.Since(start)
	return st, err
}

// pipeline selects, embeds and stores steps.
type pipeline struct {
	cfg    WorkerConfig
	vs     store.VectorStore
	union  []steptype.Kind   // every kind some agent embeds
	agents map[string]string // session id → agent, when AgentKinds is set
}

func newPipeline(cfg WorkerConfig) (*pipeline, error) {
	cfg, vs, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &pipeline{cfg: cfg, vs: vs, union: slices.Clone(cfg.Kinds), agents: map[string]string{}}
	for _, ks := range cfg.AgentKinds {
		for _, k := range ks {
			if !slices.Contains(p.union, k) {
				p.union = append(p.union, k)
			}
		}
	}
	return p, nil
}

// maybe is the cheap test of Worker.Notify: the step can be wanted.
func (p *pipeline) maybe(s *stepwise.Step) bool {
	return s.Status != steptype.StepWaiting && slices.Contains(p.union, s.Kind)
}

// wants reports whether s is embedded.
func (p *pipeline) wants(ctx context.Context, s *stepwise.Step) (bool, error) {
	if !p.maybe(s) || p.cfg.Skip(s) {
		return false, nil
	}
	if len(p.cfg.AgentKinds) == 0 {
		return slices.Contains(p.cfg.Kinds, s.Kind), nil
	}
	agent, ok := p.agents[s.SessionID]
	if !ok {
		sess, err := p.cfg.Store.SessionGet(ctx, &store.SessionGetParams{ID: s.SessionID})
		if err != nil {
			return false, fmt.Errorf("session of step %s: %w", s.ID, err)
		}
		if len(p.agents) >= 4096 {
			clear(p.agents)
		}
		agent, p.agents[s.SessionID] = sess.Agent, sess.Agent
	}
	kinds, ok := p.cfg.AgentKinds[agent]
	if !ok {
		kinds = p.cfg.Kinds
	}
	return slices.Contains(kinds, s.Kind), nil
}

// embed embeds and stores the wanted steps among steps. A step that
// already carries a vector of the embedder (Step.Vector, Step.Embedder) is
// stored as is.
func (p *pipeline) embed(ctx context.Context, steps []*stepwise.Step, st *BackfillStats) error {
	emb := p.cfg.Embedder
	var vecs []store.StepVector
	var texts []string
	var todo []string
	for _, s := range steps {
		ok, err := p.wants(ctx, s)
		if err != nil {
			return err
		}
		switch {
		case !ok:
			st.Skipped++
		case s.Embedder == emb.Name() && len(s.Vector) > 0 && (emb.Dim() == 0 || len(s.Vector) == emb.Dim()):
			vecs = append(vecs, store.StepVector{StepID: s.ID, Vector: s.Vector})
		default:
			todo, texts = append(todo, s.ID), append(texts, p.cfg.Text(s))
		}
	}
	for start := 0; start < len(texts); start += p.cfg.BatchSize {
		end := min(start+p.cfg.BatchSize, len(texts))
		out, err := embed(ctx, emb, texts[start:end])
		if err != nil {
			return fmt.Errorf("embed steps with %s: %w", emb.Name(), err)
		}
		for i, v := range out {
			vecs = append(vecs, store.StepVector{StepID: todo[start+i], Vector: v})
		}
	}
	if len(vecs) == 0 {
		return nil
	}
	n, err := p.vs.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: emb.Name(), Vectors: vecs, SkipMissing: true})
	st.Embedded += n
	if err != nil {
		return fmt.Errorf("store vectors of %s: %w", emb.Name(), err)
	}
	return nil
}

// sweep embeds every wanted step without a vector, in pages.
func (p *pipeline) sweep(ctx context.Context, st *BackfillStats) error {
	after := ""
	page := max(p.cfg.BatchSize, 256)
	for {
		steps, err := p.vs.VectorMissing(ctx, &store.VectorMissingParams{
			Embedder: p.cfg.Embedder.Name(), Kinds: p.union, AfterID: after, Limit: page,
		})
		if err != nil {
			return fmt.Errorf("steps without vectors: %w", err)
		}
		st.Scanned += len(steps)
		if err := p.embed(ctx, steps, st); err != nil {
			return err
		}
		if len(steps) < page {
			return nil
		}
		after = steps[len(steps)-1].ID
	}
}
