package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/bench"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/wire"
)

// countingStore counts the step and run rows the server reads through the
// Store methods StepList, StepGet, StepLast and RunList. capableStore
// counts the outlines too; bareStore answers the aggregate reads from those
// plain reads, as the reference the store's aggregates must equal.
type countingStore struct {
	store.Store
	stepRows, runRows, runLists, fullSteps atomic.Int64
}

func (c *countingStore) StepList(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	s, err := c.Store.StepList(ctx, p)
	c.stepRows.Add(int64(len(s)))
	c.fullSteps.Add(int64(len(s)))
	return s, err
}

func (c *countingStore) StepGet(ctx context.Context, p *store.StepGetParams) (*steptype.Step, error) {
	c.stepRows.Add(1)
	return c.Store.StepGet(ctx, p)
}

func (c *countingStore) StepLast(ctx context.Context, p *store.StepLastParams) (*steptype.Step, error) {
	c.stepRows.Add(1)
	return c.Store.StepLast(ctx, p)
}

func (c *countingStore) RunList(ctx context.Context, p *store.RunListParams) ([]*steptype.Run, error) {
	r, err := c.Store.RunList(ctx, p)
	if p.SessionID != "" { // the engine's own sweeps list runs by status
		c.runRows.Add(int64(len(r)))
		c.runLists.Add(1)
	}
	return r, err
}

// reset zeroes the counters.
func (c *countingStore) reset() {
	c.stepRows.Store(0)
	c.runRows.Store(0)
	c.runLists.Store(0)
	c.fullSteps.Store(0)
}

type capableStore struct{ *countingStore }

func (c capableStore) StepOutline(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	s, err := c.Store.StepOutline(ctx, p)
	c.stepRows.Add(int64(len(s)))
	return s, err
}

type bareStore struct{ *countingStore }

// StepOutline reads whole steps.
func (b bareStore) StepOutline(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	return b.StepList(ctx, p)
}

// RunLatest lists the runs of each session.
func (b bareStore) RunLatest(ctx context.Context, p *store.RunLatestParams) (map[string]store.LatestRun, error) {
	out := map[string]store.LatestRun{}
	for _, id := range p.SessionIDs {
		runs, err := b.RunList(ctx, &store.RunListParams{SessionID: id})
		if err != nil {
			return nil, err
		}
		for _, r := range runs { // newest first
			if r.Hop != 0 {
				continue
			}
			l, ok := out[id]
			if !ok {
				l.RunID, l.Status = r.ID, r.Status
			}
			l.Runs++
			out[id] = l
		}
	}
	return out, nil
}

// RunCount lists the agent's runs.
func (b bareStore) RunCount(ctx context.Context, p *store.RunCountParams) (map[steptype.RunStatus]int, error) {
	runs, err := b.RunList(ctx, &store.RunListParams{Agent: p.Agent})
	if err != nil {
		return nil, err
	}
	out := map[steptype.RunStatus]int{}
	for _, r := range runs {
		out[r.Status]++
	}
	return out, nil
}

// SessionStats totals the session's own steps and its runs from the
// lists of them.
func (b bareStore) SessionStats(ctx context.Context, p *store.SessionStatsParams) (*store.SessionStats, error) {
	if _, err := b.SessionGet(ctx, &store.SessionGetParams{ID: p.ID}); err != nil {
		return nil, err
	}
	steps, err := b.StepList(ctx, &store.StepListParams{SessionID: p.ID})
	if err != nil {
		return nil, err
	}
	type key struct {
		kind steptype.Kind
		role steptype.Role
	}
	by := map[key]*store.StepStat{}
	out := &store.SessionStats{Runs: map[steptype.RunStatus]int{}}
	for _, s := range steps {
		if s.SessionID != p.ID {
			continue // inherited
		}
		k := key{s.Kind, s.Role}
		st := by[k]
		if st == nil {
			st = &store.StepStat{Kind: s.Kind, Role: s.Role}
			by[k] = st
		}
		st.Steps++
		st.InputTokens += s.Metrics.InputTokens
		st.OutputTokens += s.Metrics.OutputTokens
		st.CachedTokens += s.Metrics.CachedTokens
		st.Cost += s.Metrics.Cost
	}
	for _, st := range by {
		out.Steps = append(out.Steps, *st)
	}
	runs, err := b.RunList(ctx, &store.RunListParams{SessionID: p.ID})
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		out.Runs[r.Status]++
	}
	return out, nil
}

// bigEnv is a filled SQLite database served twice on loopback: through a
// store that reads its aggregates and through one that derives them from
// plain reads.
type bigEnv struct {
	fill          *bench.FillResult
	capable, bare *countingStore
	capURL, bURL  string
}

func newBigEnv(t *testing.T, cfg bench.FillConfig) *bigEnv {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "big.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg.Now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := bench.Fill(t.Context(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &bigEnv{fill: res, capable: &countingStore{Store: st}, bare: &countingStore{Store: st}}
	e.capURL, e.bURL = serveStore(t, capableStore{e.capable}, 0), serveStore(t, bareStore{e.bare}, 0)
	return e
}

// get returns the body of a 200 answer.
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	return b
}

// TestLongSessionReadsBounded: opening a session of 3,000 steps and ~600
// runs through the API, as the dashboard's session page does (the
// session, its newest runs, the first chunk of steps, the last step) and
// with the summary and the first, last and middle pages of steps, reads
// a bounded number of rows: none of these reads the whole session.
func TestLongSessionReadsBounded(t *testing.T) {
	e := newBigEnv(t, bench.FillConfig{Sessions: 0, LongSession: 3000, Agents: 1})
	id, n := e.fill.LongSessionID, int64(e.fill.Steps)
	if id == "" || n < 3000 || e.fill.Runs < 300 {
		t.Fatalf("fill: %+v", e.fill)
	}
	base := e.capURL + "/v1/sessions/" + id
	const bound = 300 // rows per read; the session has 10× as many steps
	for _, path := range []string{
		"", "/runs?limit=100", "/summary",
		"/steps?start_seq=1&end_seq=200", "/steps?limit=100",
		fmt.Sprintf("/steps?start_seq=%d&end_seq=%d", n-199, n),
		fmt.Sprintf("/steps?start_seq=%d&end_seq=%d", n/2, n/2+199),
		fmt.Sprintf("/steps/%d", n),
	} {
		e.capable.reset()
		getBody(t, base+path)
		if s, r := e.capable.stepRows.Load(), e.capable.runRows.Load(); s > bound || r > bound {
			t.Errorf("GET %s read %d step rows and %d run rows (bound %d)", path, s, r, bound)
		}
	}
	// The summary from the store's totals is the summary of every step.
	var fast, slow stepwise.Summary
	if err := json.Unmarshal(getBody(t, base+"/summary"), &fast); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(getBody(t, e.bURL+"/v1/sessions/"+id+"/summary"), &slow); err != nil {
		t.Fatal(err)
	}
	if e.bare.stepRows.Load() < n {
		t.Fatalf("the reference read %d step rows, want all %d", e.bare.stepRows.Load(), n)
	}
	sameSummary(t, &fast, &slow)
}

// sameSummary compares summaries, the cost to rounding.
func sameSummary(t *testing.T, a, b *stepwise.Summary) {
	t.Helper()
	if math.Abs(a.Cost-b.Cost) > 1e-6*math.Max(1, b.Cost) {
		t.Errorf("%s: cost %v, want %v", b.SessionID, a.Cost, b.Cost)
	}
	a2, b2 := *a, *b
	a2.Cost, b2.Cost = 0, 0
	ja, _ := json.Marshal(a2)
	jb, _ := json.Marshal(b2)
	if string(ja) != string(jb) {
		t.Errorf("summary from totals:\n%s\nfrom every step:\n%s", ja, jb)
	}
}

// TestBigDBListsAndAgentViews: over a filled database (forks included),
// the sessions list makes no RunList per row, the agent overview and
// graph read step outlines only, every summary comes from the totals,
// and each answer equals the one of a store without those capabilities.
func TestBigDBListsAndAgentViews(t *testing.T) {
	e := newBigEnv(t, bench.FillConfig{Steps: 6000, Sessions: 120, Agents: 2, Seed: 3})
	if e.fill.Forks == 0 {
		t.Fatalf("no fork in %+v", e.fill)
	}
	agent := bench.AgentName(0)
	for _, path := range []string{
		"/v1/dashboard/sessions?limit=50",
		"/v1/dashboard/sessions?agent=" + agent + "&status=completed,failed&limit=50",
		"/v1/dashboard/sessions?status=failed&limit=20",
		"/v1/agents/" + agent + "/overview",
		"/v1/agents/" + agent + "/graph",
		"/v1/agents/" + agent + "/overview?sessions=500",
	} {
		e.capable.reset()
		got := getBody(t, e.capURL+path)
		want := getBody(t, e.bURL+path)
		if string(got) != string(want) {
			t.Errorf("GET %s differs from the answer from plain reads:\n got %.600s\nwant %.600s", path, got, want)
		}
		if n := e.capable.runLists.Load(); n > 0 {
			t.Errorf("GET %s: %d RunList calls of a session", path, n)
		}
		if n := e.capable.fullSteps.Load(); n > 0 {
			t.Errorf("GET %s: %d full steps read (want outlines)", path, n)
		}
	}
	page := getBody(t, e.capURL+"/v1/dashboard/sessions?limit=200")
	var rows wire.SessionRowPage
	if err := json.Unmarshal(page, &rows); err != nil {
		t.Fatal(err)
	}
	forks := 0
	for _, r := range rows.Sessions {
		var fast, slow stepwise.Summary
		e.capable.reset()
		if err := json.Unmarshal(getBody(t, e.capURL+"/v1/sessions/"+r.ID+"/summary"), &fast); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(getBody(t, e.bURL+"/v1/sessions/"+r.ID+"/summary"), &slow); err != nil {
			t.Fatal(err)
		}
		sameSummary(t, &fast, &slow)
		if r.ParentSessionID != "" {
			forks++
			if got := e.capable.stepRows.Load(); got > r.ForkSequence+2 {
				t.Errorf("fork %s at %d: summary read %d step rows", r.ID, r.ForkSequence, got)
			}
		} else if got := e.capable.stepRows.Load(); got > 2 {
			t.Errorf("session %s: summary read %d step rows", r.ID, got)
		}
	}
	if forks == 0 {
		t.Error("no fork among the sessions summarized")
	}
}
