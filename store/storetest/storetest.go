// Package storetest is the conformance suite of store.Store. Every driver
// runs it in its plain go test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return memory.New() }, storetest.Options{})
//	}
//
// Run starts one subtest per area (sessions, steps, fork, truncate, resolve,
// runs, errors, reopen), each made of parallel subtests that open their own
// store. Every area runs against every driver (the compiler holds each to
// the whole of store.Store) and fails, never skips, on a difference.
// What a driver may lack it declares in Options, and the suite checks the
// declaration: its capabilities (Notifier, Exclusive, VectorIndex, both
// answers exercised across the drivers) and durability (Reopen: the tests
// that reopen a store skip, with that reason, for the memory driver alone).
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Options declares how a driver differs from the full contract.
type Options struct {
	// Concurrency is how many goroutines the concurrency tests start.
	// Default 32.
	Concurrency int
	// PerGoroutine is how many appends each goroutine of the concurrent
	// append test makes. Default 20.
	PerGoroutine int
	// Reopen closes st and opens the same data again, for the durability
	// tests. Drivers that keep nothing across Close (memory) leave it nil,
	// and those tests report themselves skipped with that reason.
	Reopen func(t *testing.T, st store.Store) store.Store
	// Notifier declares that the driver's Notifier is not nil: changes
	// reach other processes (store.ChannelChanges).
	Notifier bool
	// Exclusive declares that the stores open returns are held by this
	// process alone.
	Exclusive bool
	// VectorIndex declares that VectorSearch is served by an index in the
	// database (SupportsVectorIndex). The vector areas expect exact
	// answers on their few vectors either way.
	VectorIndex bool
}

func (o Options) withDefaults() Options {
	if o.Concurrency == 0 {
		o.Concurrency = 32
	}
	if o.PerGoroutine == 0 {
		o.PerGoroutine = 20
	}
	return o
}

// harness is what every area receives.
type harness struct {
	open func(t *testing.T) store.Store
	opts Options
}

// Run runs the whole suite against the stores returned by open. open is
// called once per subtest and must return an empty store with its own data;
// it should register the store's Close with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) store.Store, opts Options) {
	h := &harness{open: open, opts: opts.withDefaults()}
	areas := []struct {
		name string
		fn   func(*testing.T, *harness)
	}{
		{"Sessions", testSessions},
		{"Steps", testSteps},
		{"Fork", testFork},
		{"Truncate", testTruncate},
		{"Resolve", testResolve},
		{"Runs", testRuns},
		{"Invariants", testInvariants},
		{"Capabilities", testCapabilities},
		{"Errors", testErrors},
		{"Reopen", testReopen},
		{"Observation", testObservation},
		{"Vectors", testVectors},
		{"Import", testImport},
		{"Retention", testRetention},
		{"RunCount", testRunCount},
		{"Metrics", testMetrics},
		{"Outline", testOutline},
		{"RunLatest", testRunLatest},
		{"SessionStats", testSessionStats},
		{"SessionStatsFolds", testSessionStatsFolds},
		{"Checkpoints", testCheckpoints},
		{"TotalsEveryPath", testTotalsEveryPath},
		{"Tasks", testTasks},
	}
	for _, a := range areas {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			a.fn(t, h)
		})
	}
}

// sub runs fn as a parallel subtest with a fresh store.
func (h *harness) sub(t *testing.T, name string, fn func(t *testing.T, st store.Store)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(t, h.open(t))
	})
}

func mustSession(t *testing.T, st store.Store, id string) *steptype.Session {
	t.Helper()
	s, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: id, Agent: "agent"})
	if err != nil {
		t.Fatalf("SessionCreate(%s): %v", id, err)
	}
	return s
}

func getSession(t *testing.T, st store.Store, id string) *steptype.Session {
	t.Helper()
	s, err := st.SessionGet(t.Context(), &store.SessionGetParams{ID: id})
	if err != nil {
		t.Fatalf("SessionGet(%s): %v", id, err)
	}
	return s
}

// newStep returns a completed user step with content equal to its id.
func newStep(sessionID, id string) *steptype.Step {
	return &steptype.Step{
		ID: id, SessionID: sessionID, Kind: steptype.KindUser, Status: steptype.StepCompleted,
		Role: steptype.RoleUser, Content: id,
	}
}

// mustAppend appends steps one call at a time and returns the stored rows.
func mustAppend(t *testing.T, st store.Store, steps ...*steptype.Step) []*steptype.Step {
	t.Helper()
	var out []*steptype.Step
	for _, s := range steps {
		got, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{s}})
		if err != nil {
			t.Fatalf("StepAppend(%s): %v", s.ID, err)
		}
		out = append(out, got...)
	}
	return out
}

// fill appends n steps "<prefix>-1".."<prefix>-n" to a session.
func fill(t *testing.T, st store.Store, sessionID, prefix string, n int) []*steptype.Step {
	t.Helper()
	var steps []*steptype.Step
	for i := 1; i <= n; i++ {
		steps = append(steps, newStep(sessionID, fmt.Sprintf("%s-%d", prefix, i)))
	}
	return mustAppend(t, st, steps...)
}

func list(t *testing.T, st store.Store, p *store.StepListParams) []*steptype.Step {
	t.Helper()
	got, err := st.StepList(t.Context(), p)
	if err != nil {
		t.Fatalf("StepList(%+v): %v", p, err)
	}
	return got
}

// view renders steps as "session/sequence/id" for compact comparisons.
func view(steps []*steptype.Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = fmt.Sprintf("%s/%d/%s", s.SessionID, s.Sequence, s.ID)
	}
	return strings.Join(parts, " ")
}

func wantView(t *testing.T, what string, got []*steptype.Step, want string) {
	t.Helper()
	if v := view(got); v != want {
		t.Errorf("%s:\n got %s\nwant %s", what, v, want)
	}
}

// wantErr fails unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

// sameJSON fails unless a and b marshal to the same JSON (for steps, the
// wire format: every field).
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func ptr[T any](v T) *T { return &v }
