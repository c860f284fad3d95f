package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// sseEvent is one parsed SSE event.
type sseEvent struct {
	id, typ, data string
}

// readSSE reads events from r until it ends, calling fn for each; comments
// are reported with typ ":".
func readSSE(r io.Reader, fn func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.data != "" || ev.typ == ":" {
				if !fn(ev) {
					return nil
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			ev.typ = ":"
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		case strings.HasPrefix(line, "retry: "):
		default:
			return errors.New("unexpected SSE line " + line)
		}
	}
	return sc.Err()
}

func openSSE(t *testing.T, ctx context.Context, url, lastID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// checkRunEvents checks a run's delivered events: positions strictly
// increasing, every committed step of the run exactly once, run_finished
// exactly once and last.
func checkRunEvents(t *testing.T, env *testEnv, runID string, evs []*stepwise.Event) {
	t.Helper()
	checkEvents(t, env, runID, evs, true)
}

// checkEvents is checkRunEvents; finished says whether the stream must end
// with the run's run_finished event.
func checkEvents(t *testing.T, env *testEnv, runID string, evs []*stepwise.Event, finished bool) {
	t.Helper()
	steps, err := env.store.StepList(context.Background(), &store.StepListParams{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	var prev stepwise.Position
	for i, ev := range evs {
		if i > 0 && !prev.Less(ev.Position) {
			t.Fatalf("event %d at %s after %s: out of order or duplicated", i, ev.Position, prev)
		}
		prev = ev.Position
		if ev.Type == stepwise.EventStepCompleted {
			if ev.Step.Sequence != ev.Position.Seq || ev.Position.Idx != 0 {
				t.Fatalf("step %d at position %s", ev.Step.Sequence, ev.Position)
			}
			seen[ev.Step.Sequence]++
		}
		if ev.Type == stepwise.EventRunFinished && i != len(evs)-1 {
			t.Fatalf("run_finished at %d of %d", i, len(evs))
		}
	}
	if finished && (len(evs) == 0 || evs[len(evs)-1].Type != stepwise.EventRunFinished) {
		t.Fatalf("stream did not end with run_finished")
	}
	for _, s := range steps {
		if seen[s.Sequence] != 1 {
			t.Fatalf("step %d (%s) seen %d times", s.Sequence, s.Kind, seen[s.Sequence])
		}
	}
	if len(seen) != len(steps) {
		t.Fatalf("saw %d steps, the run has %d", len(seen), len(steps))
	}
}

func TestSSEFormatResumeAndHeartbeat(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{toolAgent("looper", 2, 0)}, withHeartbeat(20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, _, err := env.c.StartRun(ctx, "looper", "go")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(run.ID, steptype.RunCompleted)
	// The whole run from the store: ids are positions, data repeats them.
	resp := openSSE(t, ctx, env.ts.URL+"/v1/runs/"+run.ID+"/events", "")
	var all []sseEvent
	if err := readSSE(resp.Body, func(ev sseEvent) bool { all = append(all, ev); return true }); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// 6 steps (user, llm, tool, llm, tool, llm) and run_finished; the
	// recent tail may also come with its deltas from the in-memory ring.
	var durable int
	for _, ev := range all {
		if ev.typ == string(stepwise.EventStepCompleted) || ev.typ == string(stepwise.EventRunFinished) {
			durable++
		}
	}
	if durable != 7 || all[len(all)-1].typ != string(stepwise.EventRunFinished) {
		t.Fatalf("%d durable events of %d: %+v", durable, len(all), all)
	}
	for _, ev := range all {
		var w wire.EventData
		if err := json.Unmarshal([]byte(ev.data), &w); err != nil || w.ID != ev.id || w.Type != ev.typ || w.RunID != run.ID {
			t.Fatalf("event %+v: %+v %v", ev, w, err)
		}
		if _, err := stepwise.ParsePosition(ev.id); err != nil {
			t.Fatal(err)
		}
	}
	// Resume after the third event, by header and by query.
	for _, url := range []string{env.ts.URL + "/v1/runs/" + run.ID + "/events", env.ts.URL + "/v1/runs/" + run.ID + "/events?after=" + all[2].id} {
		lastID := all[2].id
		if strings.Contains(url, "after=") {
			lastID = ""
		}
		resp := openSSE(t, ctx, url, lastID)
		var got []sseEvent
		_ = readSSE(resp.Body, func(ev sseEvent) bool { got = append(got, ev); return true })
		resp.Body.Close()
		if !resumedAs(got, all[3:]) {
			t.Fatalf("resumed from %s: got %s, want %s", all[2].id, ids(got), ids(all[3:]))
		}
	}
	// Last-Event-ID wins over after.
	resp = openSSE(t, ctx, env.ts.URL+"/v1/runs/"+run.ID+"/events?after=0:0", all[5].id)
	var tail []sseEvent
	_ = readSSE(resp.Body, func(ev sseEvent) bool { tail = append(tail, ev); return true })
	resp.Body.Close()
	if !resumedAs(tail, all[6:]) || tail[len(tail)-1].typ != "run_finished" {
		t.Fatalf("header over query: %+v", tail)
	}
	// A session stream stays open and sends heartbeats.
	resp = openSSE(t, ctx, env.ts.URL+"/v1/sessions/"+run.SessionID+"/events", all[5].id)
	beats := 0
	_ = readSSE(resp.Body, func(ev sseEvent) bool {
		if ev.typ == ":" {
			beats++
		}
		return beats < 2
	})
	resp.Body.Close()
	if beats < 2 {
		t.Fatalf("%d heartbeats", beats)
	}
}

// TestSSERandomDisconnectsRaw drops the connection after a random number of
// events, many times during a live run, and reconnects with the last id
// seen, checking what the server sends without any client-side filtering.
func TestSSERandomDisconnectsRaw(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{toolAgent("looper", 60, 100*time.Microsecond)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, _, err := env.c.StartRun(ctx, "looper", "go")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var evs []*stepwise.Event
	lastID, reconnects, done := "", 0, false
	for !done {
		resp := openSSE(t, ctx, env.ts.URL+"/v1/runs/"+run.ID+"/events", lastID)
		budget := 1 + rng.IntN(15)
		err := readSSE(resp.Body, func(raw sseEvent) bool {
			var w wire.EventData
			if err := json.Unmarshal([]byte(raw.data), &w); err != nil {
				t.Fatalf("event %q: %v", raw.data, err)
			}
			pos, err := stepwise.ParsePosition(raw.id)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, &stepwise.Event{Type: stepwise.EventType(w.Type), RunID: w.RunID, Position: pos, Step: w.Step, Run: w.Run})
			lastID = raw.id
			if w.Type == string(stepwise.EventRunFinished) {
				done = true
				return false
			}
			budget--
			return budget > 0
		})
		resp.Body.Close() // the client goes away mid-stream
		if err != nil && !done {
			t.Fatal(err)
		}
		reconnects++
	}
	if reconnects < 10 {
		t.Fatalf("only %d connections; the test did not disconnect during the run", reconnects)
	}
	checkRunEvents(t, env, run.ID, evs)
	t.Logf("%d events over %d connections", len(evs), reconnects)
}

// cuttingDialer returns connections that die after a random number of
// bytes read, as a network would cut them mid-event.
func cuttingDialer(seed uint64, minBytes, maxBytes int) (func(ctx context.Context, network, addr string) (net.Conn, error), *atomic.Int64) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 7))
	var cuts atomic.Int64
	d := &net.Dialer{}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		n := minBytes + rng.IntN(maxBytes-minBytes)
		mu.Unlock()
		return &cuttingConn{Conn: c, left: n, cuts: &cuts}, nil
	}, &cuts
}

type cuttingConn struct {
	net.Conn
	left int
	cuts *atomic.Int64
}

func (c *cuttingConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.cuts.Add(1)
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= n
	return n, err
}

// TestClientStreamsSurviveCuts runs the Go client's run and session streams
// over connections cut at random byte offsets: every event arrives once, in
// order, across the reconnections.
func TestClientStreamsSurviveCuts(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{toolAgent("looper", 80, 100*time.Microsecond)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial, cuts := cuttingDialer(uint64(time.Now().UnixNano()), 200, 4000)
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	flaky, err := client.New(env.ts.URL, client.WithHTTPClient(hc), client.WithReconnect(time.Millisecond, 5*time.Millisecond, 50))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := env.c.CreateSession(ctx, "looper", "")
	if err != nil {
		t.Fatal(err)
	}
	// A session stream, opened before the run. Session streams do not end;
	// this one is stopped once it has delivered the run's last step.
	// (Lifecycle events such as run_finished are served from the engine's
	// in-memory ring only, which a session without subscribers or runs
	// drops, so after a reconnect only the committed steps are guaranteed.)
	sessCtx, stopSession := context.WithCancel(ctx)
	defer stopSession()
	var sessionEvents []*stepwise.Event
	var lastSeen atomic.Int64
	sessionDone := make(chan error, 1)
	go func() {
		for ev, err := range flaky.Subscribe(sessCtx, stepwise.SubscribeParams{SessionID: sess.ID}) {
			if err != nil {
				if sessCtx.Err() != nil && ctx.Err() == nil {
					err = nil
				}
				sessionDone <- err
				return
			}
			sessionEvents = append(sessionEvents, ev)
			if ev.Type == stepwise.EventStepCompleted {
				lastSeen.Store(ev.Step.Sequence)
			}
		}
		sessionDone <- nil
	}()
	run, _, err := env.c.StartRun(ctx, "looper", "go", stepwise.InSession(sess.ID))
	if err != nil {
		t.Fatal(err)
	}
	var runEvents []*stepwise.Event
	for ev, err := range flaky.Subscribe(ctx, stepwise.SubscribeParams{RunID: run.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		runEvents = append(runEvents, ev)
	}
	final, err := env.c.Session(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	for lastSeen.Load() < final.LastSequence && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	stopSession()
	if err := <-sessionDone; err != nil {
		t.Fatal(err)
	}
	if cuts.Load() < 10 {
		t.Fatalf("only %d cuts", cuts.Load())
	}
	checkRunEvents(t, env, run.ID, runEvents)
	checkEvents(t, env, run.ID, sessionEvents, false)
	t.Logf("%d run events, %d session events, %d cuts", len(runEvents), len(sessionEvents), cuts.Load())
}

// TestSlowClientDoesNotSlowRun keeps a subscriber that never reads while a
// run streams thousands of events: the run completes, and the server drops
// the stuck stream after its write timeout.
func TestSlowClientDoesNotSlowRun(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{toolAgent("looper", 300, 0)}, func(c *Config) { c.WriteTimeout = 200 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A server whose connections have small send buffers, so that a client
	// that does not read blocks the writer quickly.
	ts := httptest.NewUnstartedServer(env.srv)
	ts.Listener = smallBufferListener{ts.Listener}
	ts.Start()
	defer ts.Close()
	sess, err := env.c.CreateSession(ctx, "looper", "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	if _, err := io.WriteString(conn, "GET /v1/sessions/"+sess.ID+"/events HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	run, _, err := env.c.StartRun(ctx, "looper", "go", stepwise.InSession(sess.ID))
	if err != nil {
		t.Fatal(err)
	}
	r := env.waitRun(run.ID, steptype.RunCompleted)
	if r.StepCount != 602 {
		t.Fatalf("step count %d", r.StepCount)
	}
	// The stuck reader now reads: it gets a prefix of the stream, then EOF
	// (the server gave up on it), never a gap.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	var prev stepwise.Position
	n := 0
	_ = readSSE(resp.Body, func(ev sseEvent) bool {
		if ev.typ == ":" {
			return true
		}
		pos, err := stepwise.ParsePosition(ev.id)
		if err != nil || (n > 0 && !prev.Less(pos)) {
			t.Fatalf("event %d id %q after %s", n, ev.id, prev)
		}
		prev = pos
		n++
		return true
	})
	if n >= 2*602 {
		t.Fatalf("the stuck client got all %d events; the test applied no back-pressure", n)
	}
	t.Logf("the stuck client got %d events before being dropped", n)
}

type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// ids lists the event ids of a stream, to compare streams.
func ids(evs []sseEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.id + " ")
	}
	return b.String()
}

// resumedAs reports whether a resumed stream got every durable event of
// want (step_completed, run_finished) and otherwise only events of want, in
// its order. Deltas are ephemeral: the session's ring is cut to a short tail
// once its topic has no subscriber left (asynchronously, when a closed
// stream's handler ends), so a later read may miss deltas an earlier one saw.
func resumedAs(got, want []sseEvent) bool {
	i := 0
	for _, ev := range got {
		for i < len(want) && want[i].id != ev.id {
			if want[i].typ == string(stepwise.EventStepCompleted) || want[i].typ == string(stepwise.EventRunFinished) {
				return false
			}
			i++
		}
		if i == len(want) || want[i].typ != ev.typ || want[i].data != ev.data {
			return false
		}
		i++
	}
	for ; i < len(want); i++ {
		if want[i].typ == string(stepwise.EventStepCompleted) || want[i].typ == string(stepwise.EventRunFinished) {
			return false
		}
	}
	return true
}
