package stepwise

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// plainStore keeps no context checkpoints: an engine on it rebuilds every
// context from step 1, the reference of the checkpointed build.
type plainStore struct{ store.Store }

// ContextCheckpointPut keeps nothing.
func (plainStore) ContextCheckpointPut(context.Context, *store.ContextCheckpointPutParams) error {
	return nil
}

// ContextCheckpointList finds nothing.
func (plainStore) ContextCheckpointList(context.Context, *store.ContextCheckpointListParams) ([]*store.ContextCheckpoint, error) {
	return nil, nil
}

// echoModel answers a summarize request with a digest of what it was sent,
// so two builds that summarize different messages differ.
type echoModel struct{}

func (echoModel) Name() string { return "echo" }

func (echoModel) Generate(_ context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		var n int
		for _, m := range req.Messages {
			n += len(m.Content)
		}
		yield(&llm.Response{Content: fmt.Sprintf("summary of %d bytes", n)}, nil)
	}
}

// logGen appends random but well-formed step logs: turns, assistant
// messages with parallel tool calls answered out of order, orphan and
// duplicate results, new turns cutting open calls, context trims and
// summaries, child-run steps, approvals "always", waiting input steps.
type logGen struct {
	t       *testing.T
	st      store.Store
	rng     *rand.Rand
	n       int
	waiting []*Step // waiting input steps, answered later
	// wait allows one waiting input step in the next grow.
	wait bool
}

func (g *logGen) append(sessionID string, s *Step) *Step {
	g.t.Helper()
	g.n++
	s.ID, s.SessionID = fmt.Sprintf("%s-s%d", sessionID, g.n), sessionID
	if s.Status == "" {
		s.Status = steptype.StepCompleted
	}
	if s.RunID == "" {
		s.RunID = "run-" + sessionID
	}
	out, err := g.st.StepAppend(context.Background(), &store.StepAppendParams{Steps: []*Step{s}})
	if err != nil {
		g.t.Fatal(err)
	}
	return out[0]
}

// grow appends about n steps to a session.
func (g *logGen) grow(sessionID string, n int) {
	r := g.rng
	text := func(what string) string {
		// HTML characters and a long tail exercise the state's encoding and
		// the token estimate.
		return fmt.Sprintf("%s %d <b>&amp;</b> %s", what, g.n, strings.Repeat("w", r.IntN(60)))
	}
	var open []ToolCall // calls of the latest assistant message
	for i := 0; i < n; i++ {
		switch k := r.IntN(20); {
		case k < 5:
			g.append(sessionID, &Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: text("user")})
			open = nil
		case k < 8:
			g.append(sessionID, &Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: text("answer")})
			open = nil
		case k < 11:
			open = nil
			for j := range 1 + r.IntN(3) {
				open = append(open, ToolCall{ID: fmt.Sprintf("c%d-%d", g.n, j), Name: "tool",
					Arguments: json.RawMessage(fmt.Sprintf(`{"q": "<%d & %d>"}`, g.n, j))})
			}
			g.append(sessionID, &Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: text("calling"), ToolCalls: open})
		case k < 15 && len(open) > 0:
			// Results out of order; some calls never get one.
			for _, j := range r.Perm(len(open))[:r.IntN(len(open)+1)] {
				g.append(sessionID, &Step{Kind: steptype.KindTool, Role: steptype.RoleTool, ToolCallID: open[j].ID, ToolName: "tool", Content: text("result")})
			}
		case k < 16:
			// An orphan result, or a duplicate of an answered call.
			id := "nowhere"
			if len(open) > 0 {
				id = open[0].ID
			}
			g.append(sessionID, &Step{Kind: steptype.KindTool, Role: steptype.RoleTool, ToolCallID: id, ToolName: "tool", Content: text("stray")})
		case k < 17:
			g.trim(sessionID)
		case k < 18:
			// A child run's messages are not part of the top-level context.
			g.append(sessionID, &Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Hop: 1, RunID: "child-" + sessionID, Content: text("child")})
			g.append(sessionID, &Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Hop: 1, RunID: "child-" + sessionID, Content: text("child answer")})
		case k < 19:
			in, _ := json.Marshal(InputRequest{Prompt: "ok?", Approval: &ToolCall{ID: fmt.Sprintf("ap%d", g.n), Name: fmt.Sprintf("tool%d", r.IntN(4))}})
			out, _ := json.Marshal(ApprovalAnswer{Approved: true, Always: r.IntN(2) == 0})
			g.append(sessionID, &Step{Kind: steptype.KindInput, Inputs: in, Outputs: out})
		default:
			if g.wait && r.IntN(3) == 0 {
				g.wait = false
				s := g.append(sessionID, &Step{Kind: steptype.KindInput, Role: steptype.RoleUser, Status: steptype.StepWaiting,
					Inputs: json.RawMessage(`{"prompt":"name?"}`)})
				g.waiting = append(g.waiting, s)
			}
		}
	}
}

// trim records a context step as an agent's window would: a trim point at
// an earlier message, and for "summarize" the summary as content.
func (g *logGen) trim(sessionID string) {
	steps, err := g.st.StepList(context.Background(), &store.StepListParams{SessionID: sessionID})
	if err != nil || len(steps) < 2 {
		return
	}
	to := steps[g.rng.IntN(len(steps)-1)].Sequence
	// What a "context" step records (see convo.Trim.Step).
	var t struct {
		Strategy     string `json:"strategy"`
		Messages     int    `json:"trimmed_messages"`
		FromSequence int64  `json:"from_sequence"`
		ToSequence   int64  `json:"to_sequence"`
		Tokens       int    `json:"trimmed_tokens"`
		Budget       int    `json:"budget"`
	}
	t.Strategy, t.ToSequence = "trim", to
	content := "trimmed"
	if g.rng.IntN(2) == 0 {
		t.Strategy, content = "summarize", fmt.Sprintf("summary up to %d", to)
	}
	out, _ := json.Marshal(t)
	g.append(sessionID, &Step{Kind: steptype.KindSystem, Name: "context", Outputs: out, Content: content})
}

// built is what a build of a context decides: the next request and its
// fingerprint, and the state later steps depend on.
type built struct {
	Messages    []llm.Message
	Fingerprint string
	Trimmed     int
	Summary     string
	Record      string // the context step the window would commit
	Summarized  []llm.Message
	Pending     []ToolCall
	Assistant   int64
	Allowed     []string
	All         []llm.Message // Scope.Messages
	LastText    string
}

// summarizer records what the window sent to the model to summarize.
type summarizer struct {
	echoModel
	got *[]llm.Message
}

func (m summarizer) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	*m.got = append(*m.got, req.Messages...)
	return m.echoModel.Generate(ctx, req)
}

func build(t *testing.T, e *Engine, a Agent, sessionID string, before int64) built {
	t.Helper()
	var b built
	a.Model = summarizer{got: &b.Summarized}
	x := e.newExec(&a, &Run{SessionID: sessionID, Agent: a.Name})
	x.Ctx, x.before = t.Context(), before
	if err := x.load(t.Context()); err != nil {
		t.Fatalf("load %s before %d: %v", sessionID, before, err)
	}
	b.Pending = x.Conv.PendingToolCalls(nil)
	if x.Conv.LastAssistant() != nil {
		b.Assistant = x.Conv.LastAssistant().Sequence
	}
	b.Allowed = slices.Sorted(func(yield func(string) bool) {
		for k := range x.allowed {
			if !yield(k) {
				return
			}
		}
	})
	x.Conv.CloseCalls()
	req := x.request()
	msgs, rec, err := x.window(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	req.Messages = msgs
	b.Messages, b.Fingerprint = msgs, x.fp.Request(x.Conv, "m", req)
	b.Trimmed, b.Summary = x.Conv.Trimmed(), x.Conv.Summary()
	if rec != nil {
		b.Record = string(rec.Outputs) + " " + rec.Content
	}
	b.LastText = x.LastAssistantText()
	b.All = x.allMessages()
	return b
}

// TestContextCheckpointExact compares, at every cut point of random step
// logs (forks of forks included), the context built from checkpoints with
// the one built from step 1: the request, its fingerprint, the trim point
// and summary, pending calls, allowed tools and Scope.Messages, without a
// budget and under budgets that trim, with "trim" and "summarize".
func TestContextCheckpointExact(t *testing.T) {
	defer func(k int) { convo.CheckpointEvery = k }(convo.CheckpointEvery)
	convo.CheckpointEvery = 3
	// Memory, SQLite and PostgreSQL, each with its own size (a build
	// costs a few queries per cut point on PostgreSQL).
	t.Run("memory", func(t *testing.T) { testCheckpointExact(t, memory.New(), 120) })
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "exact.db")})
		if err != nil {
			t.Fatal(err)
		}
		testCheckpointExact(t, st, 50)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := fmt.Sprintf("stepwise_exact_%d", time.Now().UnixNano())
		st, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c, err := pgx.Connect(context.Background(), dsn); err == nil {
				_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				c.Close(context.Background())
			}
		})
		testCheckpointExact(t, st, 30)
	})
}

// testCheckpointExact runs TestContextCheckpointExact on st with a root
// session of about n steps (forks grow by fractions of n).
func testCheckpointExact(t *testing.T, st store.Store, n int) {
	defer st.Close()
	seed := time.Now().UnixNano()
	if v := os.Getenv("STEPWISE_TEST_SEED"); v != "" { // to replay a logged seed
		fmt.Sscan(v, &seed)
	}
	t.Logf("seed %d", seed)
	ctx := t.Context()
	g := &logGen{t: t, st: st, rng: rand.New(rand.NewPCG(uint64(seed), 17))}
	withCP, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer withCP.Close()
	plain, err := New(Config{Store: plainStore{st}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	mk := func(id string) {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	fork := func(id, parent string, at int64) {
		if _, err := st.SessionFork(ctx, &store.SessionForkParams{ID: id, ParentID: parent, Sequence: at}); err != nil {
			t.Fatal(err)
		}
	}
	last := func(id string) int64 {
		s, err := st.SessionGet(ctx, &store.SessionGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return s.LastSequence
	}
	mk("root")
	g.grow("root", n)
	fork("f1", "root", last("root")/2)
	g.grow("f1", n/2)
	f2At := last("f1") - 5
	fork("f2", "f1", f2At) // a fork of a fork, in f1's own steps
	g.wait = true
	g.grow("f2", n/3)
	if g.wait {
		g.waiting = append(g.waiting, g.append("f2", &Step{Kind: steptype.KindInput, Role: steptype.RoleUser, Status: steptype.StepWaiting,
			Inputs: json.RawMessage(`{"prompt":"name?"}`)}))
		g.grow("f2", 5)
	}
	fork("f3", "f1", last("root")/3) // in f1's inherited steps
	g.grow("f3", n/3)

	// Budgets first: a build without one replaces wrong checkpoints it
	// meets (see fullBuild), which would hide them from the others.
	agents := []Agent{
		{Name: "trim-small", Context: ContextPolicy{TokenBudget: 60}},
		{Name: "trim", Context: ContextPolicy{TokenBudget: 300}},
		{Name: "summarize", Context: ContextPolicy{TokenBudget: 200, Strategy: "summarize"}},
		{Name: "all"},
	}
	// compare builds at every cut point, from the first or (down) from the
	// last: a build that meets a wrong checkpoint replaces it, so the order
	// decides which builds meet the checkpoints a change made wrong.
	compare := func(pass string, down bool) {
		for _, sid := range []string{"root", "f1", "f2", "f3"} {
			n := last(sid)
			for i := int64(1); i <= n+1; i++ {
				at := i
				if down {
					at = n + 2 - i
				}
				before := at
				if at == n+1 {
					before = 0 // the whole session, as a new run sees it
				}
				for _, a := range agents {
					want := build(t, plain, a, sid, before)
					got := build(t, withCP, a, sid, before)
					gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
					for i := range gv.NumField() {
						if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
							t.Fatalf("%s: %s before %d, agent %s: checkpointed build differs from the full build in %s\n got %+v\nwant %+v",
								pass, sid, before, a.Name, gv.Type().Field(i).Name, gv.Field(i).Interface(), wv.Field(i).Interface())
						}
					}
				}
			}
		}
	}
	compare("first pass", false)
	saved := 0
	for _, sid := range []string{"root", "f1", "f2", "f3"} {
		cps, err := st.ContextCheckpointList(ctx, &store.ContextCheckpointListParams{SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		saved += len(cps)
	}
	if saved < n/6 {
		t.Fatalf("only %d checkpoints saved: the comparison did not exercise them", saved)
	}
	// Answering a waiting step changes the context after it: checkpoints
	// were never taken at or after it.
	for _, w := range g.waiting {
		if _, err := st.StepResolve(ctx, &store.StepResolveParams{ID: w.ID, RunID: w.RunID, Status: steptype.StepCompleted, Content: "Ada"}); err != nil {
			t.Fatal(err)
		}
	}
	compare("second pass, waiting steps answered", true)
	// A truncation removes the checkpoints after the cut; new steps there
	// are built from the ones before.
	// (In f2's own steps: the random log may have grown it by fewer than 10.)
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "f2", StartSeq: max(last("f2")-10, f2At+1)}); err != nil {
		t.Fatal(err)
	}
	g.grow("f2", n/4)
	compare("after truncating f2", true)
}
