package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// FillConfig sizes a synthetic database for `stepwise bench fill`.
type FillConfig struct {
	Steps    int   // total steps stored (default 1,000,000)
	Sessions int   // sessions (default 10,000; none when 0 with LongSession); about 5% are forks
	Agents   int   // agents the sessions are spread over (default 5)
	Seed     int64 // random seed (default 1)
	// Days is how far back the history reaches (default 60).
	Days int
	// Now is the end of the history (default time.Now()).
	Now time.Time
	// LongSession, when positive, adds one more session of this many
	// steps (agent-0, titled LongSessionTitle, starting at the beginning
	// of the history), written in chunks: the single-session case of
	// `bench queries`.
	LongSession int
	// Progress, when set, is called after each session (and each chunk
	// of the long session) with the steps stored so far.
	Progress func(steps int)
}

// LongSessionTitle is the title of the long session of a filled database.
const LongSessionTitle = "long session (bench fill)"

// longChunk is how many steps of the long session one import writes.
const longChunk = 5000

// FillResult describes what Fill stored.
type FillResult struct {
	Sessions int           `json:"sessions"`
	Forks    int           `json:"forks"`
	Runs     int           `json:"runs"`
	Failed   int           `json:"failed_runs"`
	Steps    int           `json:"steps"`
	Evals    int           `json:"evals"`
	Vectors  int           `json:"vectors"`
	Agents   []string      `json:"agents"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	// LongSessionID is the id of the long session, when one was made.
	LongSessionID string `json:"long_session_id,omitempty"`
	Seed          int64  `json:"seed"`
}

// AgentName is the name of the i-th agent of a filled database.
func AgentName(i int) string { return fmt.Sprintf("agent-%d", i) }

// Fill writes a realistic history through the store's Importer: sessions of
// turns (a user step, model calls asking for tools, tool results, a final
// answer), one run per turn (about 3% failed, ending in an error step),
// about 5% of sessions forked from an earlier one, session metadata,
// token and cost metrics, evals on about 10% of runs and lexical vectors
// of the user steps.
func Fill(ctx context.Context, st store.Store, c FillConfig) (*FillResult, error) {
	if c.Steps <= 0 {
		c.Steps = 1000000
	}
	switch {
	case c.Sessions == 0 && c.LongSession > 0:
		c.Steps = 0 // only the long session
	case c.Sessions <= 0:
		c.Sessions = 10000
	}
	if c.Agents <= 0 {
		c.Agents = 5
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Days <= 0 {
		c.Days = 60
	}
	if c.Now.IsZero() {
		c.Now = time.Now()
	}
	src := rand.NewPCG(uint64(c.Seed), 0x5eed)
	f := &filler{c: c, st: st, src: src, rng: rand.New(src), emb: recall.DefaultEmbedder()}
	f.res.Seed = c.Seed
	for i := range c.Agents {
		f.res.Agents = append(f.res.Agents, AgentName(i))
	}
	start := time.Now()
	span := time.Duration(c.Days) * 24 * time.Hour
	for i := range c.Sessions {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Sessions start evenly over the span, newest last; each takes
		// about its share of the remaining steps.
		n := (c.Steps - f.res.Steps) / (c.Sessions - i)
		if i < c.Sessions-1 {
			n = max(4, n/2+f.rng.IntN(n+1))
		}
		at := c.Now.Add(-span + time.Duration(float64(span)*float64(i)/float64(c.Sessions)))
		if err := f.session(ctx, i, n, at); err != nil {
			return nil, err
		}
		if c.Progress != nil {
			c.Progress(f.res.Steps)
		}
	}
	if err := f.flushVectors(ctx); err != nil {
		return nil, err
	}
	if c.LongSession > 0 {
		if err := f.longSession(ctx, c.LongSession, c.Now.Add(-span)); err != nil {
			return nil, err
		}
	}
	f.res.Elapsed = time.Since(start)
	return &f.res, nil
}

type filler struct {
	c    FillConfig
	st   store.Store
	src  *rand.PCG // rng's source, to replay a stretch of it
	rng  *rand.Rand
	emb  *recall.Lexical
	res  FillResult
	prev []forkable // recent sessions a fork may branch from
	vec  []store.StepVector
	text []string
}

type forkable struct {
	id, agent string
	steps     []*steptype.Step // visible steps, by sequence
}

// id returns a UUIDv7 carrying the time t, so ids sort like the history.
func (f *filler) id(t time.Time) string {
	var u uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	for i := 6; i < 16; i++ {
		u[i] = byte(f.rng.Uint32())
	}
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u.String()
}

var (
	words  = strings.Fields("order refund invoice shipping account password upgrade plan billing cancel delivery address warranty return exchange discount coupon subscription payment card bank transfer delay tracking package damaged missing item size colour stock restock support manager escalate ticket priority weather forecast flight hotel booking calendar meeting reminder report summary analysis chart revenue growth quarter customer churn survey feedback")
	tools  = []string{"lookup_order", "search_kb", "get_weather", "create_ticket", "send_email", "query_db", "calendar_add"}
	models = []string{"gpt-4o-mini", "claude-3-5-haiku", "gpt-4o"}
)

// text returns about n bytes of word salad.
func (f *filler) words(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[f.rng.IntN(len(words))])
	}
	return b.String()
}

// session stores one session of about n own steps starting at at.
func (f *filler) session(ctx context.Context, i, n int, at time.Time) error {
	agent := AgentName(f.rng.IntN(f.c.Agents))
	sess := &steptype.Session{ID: f.id(at), Agent: agent, CreatedAt: at}
	var lineage []*steptype.Step
	if len(f.prev) > 0 && f.rng.IntN(20) == 0 {
		p := f.prev[f.rng.IntN(len(f.prev))]
		if len(p.steps) >= 2 {
			k := 1 + f.rng.IntN(len(p.steps)-1)
			sess.Agent, sess.ParentSessionID, sess.ForkSequence = p.agent, p.id, int64(k)
			lineage = p.steps[:k]
			f.res.Forks++
		}
	}
	meta, _ := json.Marshal(map[string]any{"user": fmt.Sprintf("user-%d", f.rng.IntN(2000)), "env": []string{"prod", "staging"}[f.rng.IntN(2)], "channel": []string{"web", "api", "slack"}[f.rng.IntN(3)]})
	sess.Metadata = meta
	sess.Title = f.words(30)
	ts := &turnState{seq: sess.ForkSequence, t: at}
	var steps []*steptype.Step
	var runs []*steptype.Run
	if len(lineage) > 0 {
		ts.prevID = lineage[len(lineage)-1].ID
	}
	for len(steps) < n {
		run, rs := f.turn(sess, ts, true)
		runs, steps = append(runs, run), append(steps, rs...)
	}
	seq, t := ts.seq, ts.t
	for _, r := range runs {
		if r.Status == steptype.RunFailed {
			f.res.Failed++
		}
	}
	for _, s := range steps {
		sess.InputTokens += s.Metrics.InputTokens
		sess.OutputTokens += s.Metrics.OutputTokens
		sess.Cost += s.Metrics.Cost
	}
	sess.LastSequence, sess.UpdatedAt = seq, t
	if err := f.st.SessionImport(ctx, &store.SessionImportParams{Session: sess}); err != nil {
		return fmt.Errorf("session %d: %w", i, err)
	}
	if err := f.st.RunImport(ctx, &store.RunImportParams{Runs: runs}); err != nil {
		return fmt.Errorf("session %d runs: %w", i, err)
	}
	if err := f.st.StepImport(ctx, &store.StepImportParams{Steps: steps}); err != nil {
		return fmt.Errorf("session %d steps: %w", i, err)
	}
	f.res.Sessions++
	f.res.Runs += len(runs)
	f.res.Steps += len(steps)
	if err := f.evals(ctx, runs, t); err != nil {
		return err
	}
	if len(f.vec) >= 2000 {
		if err := f.flushVectors(ctx); err != nil {
			return err
		}
	}
	f.prev = append(f.prev, forkable{id: sess.ID, agent: sess.Agent, steps: append(lineage[:len(lineage):len(lineage)], steps...)})
	if len(f.prev) > 20 {
		f.prev = f.prev[1:]
	}
	return nil
}

// turnState is where the next turn of a session starts.
type turnState struct {
	seq    int64
	t      time.Time
	prevID string
}

// turn makes one turn of a session: its run and steps (a user step, 0–3
// model calls with a tool each, a final answer or, in ~3% of runs, an error
// step). With vectors, the user step is queued for embedding.
func (f *filler) turn(sess *steptype.Session, ts *turnState, vectors bool) (*steptype.Run, []*steptype.Step) {
	var steps []*steptype.Step
	run := &steptype.Run{ID: f.id(ts.t), SessionID: sess.ID, Agent: sess.Agent, Status: steptype.RunCompleted, Cursor: "", CreatedAt: ts.t}
	add := func(s *steptype.Step) {
		ts.seq++
		ts.t = ts.t.Add(time.Duration(50+f.rng.IntN(2000)) * time.Millisecond)
		s.ID, s.SessionID, s.RunID, s.Sequence, s.ParentID, s.CreatedAt = f.id(ts.t), sess.ID, run.ID, ts.seq, ts.prevID, ts.t
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		d := s.Metrics.Duration
		s.Metrics.FinishedAt, s.Metrics.StartedAt = ts.t, ts.t.Add(-d)
		ts.prevID = s.ID
		steps = append(steps, s)
	}
	failed := f.rng.IntN(33) == 0
	q := f.words(60 + f.rng.IntN(300))
	run.Input = q
	add(&steptype.Step{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: q})
	if vectors {
		f.vec = append(f.vec, store.StepVector{StepID: ts.prevID})
		f.text = append(f.text, q)
	}
	for range f.rng.IntN(4) {
		tool := tools[f.rng.IntN(len(tools))]
		args, _ := json.Marshal(map[string]any{"query": f.words(40 + f.rng.IntN(100))})
		callID := "call_" + f.id(ts.t)[24:]
		add(f.llm(f.words(f.rng.IntN(200)), []steptype.ToolCall{{ID: callID, Name: tool, Arguments: args}}))
		out, _ := json.Marshal(map[string]any{"result": f.words(300 + f.rng.IntN(1500))})
		add(&steptype.Step{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolName: tool, ToolCallID: callID, Inputs: args, Outputs: out,
			Metrics: steptype.Metrics{Duration: time.Duration(5+f.rng.IntN(800)) * time.Millisecond}})
	}
	if failed {
		add(&steptype.Step{Kind: steptype.KindError, Name: "llm", Status: steptype.StepFailed,
			Error:   &steptype.StepError{Message: "provider returned 503", Class: "transient", Code: "http_503", Attempt: 3},
			Metrics: steptype.Metrics{Duration: time.Duration(30000) * time.Millisecond}})
		run.Status, run.Error = steptype.RunFailed, &steptype.StepError{Message: "provider returned 503", Code: "http_503"}
	} else {
		answer := f.words(200 + f.rng.IntN(1200))
		add(f.llm(answer, nil))
		run.Output = answer
	}
	run.StepCount = int64(len(steps))
	run.UpdatedAt, run.FinishedAt = ts.t, ts.t
	return run, steps
}

// llm builds a model step with realistic metrics.
func (f *filler) llm(content string, calls []steptype.ToolCall) *steptype.Step {
	in, out := int64(500+f.rng.IntN(6000)), int64(20+len(content)/4)
	model := models[f.rng.IntN(len(models))]
	return &steptype.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: content, ToolCalls: calls,
		Fingerprint: f.id(time.Now())[24:],
		Metrics: steptype.Metrics{Duration: time.Duration(300+f.rng.IntN(4000)) * time.Millisecond, FirstTokenLatency: time.Duration(100+f.rng.IntN(600)) * time.Millisecond,
			InputTokens: in, OutputTokens: out, CachedTokens: in / 3, Cost: float64(in)*0.15e-6 + float64(out)*0.6e-6, Model: model, Provider: "openai"}}
}

// evals scores about 10% of the runs.
func (f *filler) evals(ctx context.Context, runs []*steptype.Run, now time.Time) error {
	for _, r := range runs {
		if f.rng.IntN(10) != 0 {
			continue
		}
		e := &store.Eval{ID: f.id(now), TargetKind: store.TargetRun, TargetID: r.ID, Name: "helpfulness", Source: store.SourceLLMJudge, Score: f.rng.Float64()}
		if _, err := f.st.EvalPut(ctx, &store.EvalPutParams{Eval: e, Now: now}); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		f.res.Evals++
	}
	return nil
}

// flushVectors embeds and stores the pending user steps.
func (f *filler) flushVectors(ctx context.Context) error {
	if len(f.vec) == 0 {
		f.vec, f.text = f.vec[:0], f.text[:0]
		return nil
	}
	vecs, err := f.emb.Embed(ctx, f.text)
	if err != nil {
		return err
	}
	for i := range f.vec {
		f.vec[i].Vector = vecs[i]
	}
	if _, err := f.st.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: f.emb.Name(), Vectors: f.vec}); err != nil {
		return fmt.Errorf("vectors: %w", err)
	}
	f.res.Vectors += len(f.vec)
	f.vec, f.text = f.vec[:0], f.text[:0]
	return nil
}
