package server

import (
	"bufio"
	"bytes"
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// flushRecorder is a ResponseWriter that records what is written, with a
// "FLUSH" line at each flush; the write that carries block waits for
// release.
type flushRecorder struct {
	h       http.Header
	mu      sync.Mutex
	buf     bytes.Buffer
	block   string
	blocked chan struct{}
	release chan struct{}
}

func (w *flushRecorder) Header() http.Header { return w.h }
func (w *flushRecorder) WriteHeader(int)     {}

func (w *flushRecorder) Write(p []byte) (int, error) {
	if w.block != "" && bytes.Contains(p, []byte(w.block)) {
		w.block = ""
		close(w.blocked)
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *flushRecorder) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.WriteString("FLUSH\n")
}

func (w *flushRecorder) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// burstModel streams "d0", waits until told, then streams d1..d9 at once.
type burstModel struct{ wait, burst chan struct{} }

func (m *burstModel) Name() string { return "burst" }
func (m *burstModel) Generate(ctx context.Context, _ *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		if !yield(&llm.Response{Partial: true, Content: "d0 "}, nil) {
			return
		}
		<-m.wait
		text := "d0 "
		for _, d := range []string{"d1 ", "d2 ", "d3 ", "d4 ", "d5 ", "d6 ", "d7 ", "d8 ", "d9 "} {
			text += d
			if !yield(&llm.Response{Partial: true, Content: d}, nil) {
				return
			}
		}
		close(m.burst)
		yield(&llm.Response{Content: text, FinishReason: "stop"}, nil)
	}
}

// Deltas published while the stream is busy writing reach the client
// complete, in order, once, and in one write: no flush inside the burst.
func TestSSEBurstInOneFlush(t *testing.T) {
	t.Parallel()
	rec := &flushRecorder{h: http.Header{}, block: `"content":"d0 "`, blocked: make(chan struct{}), release: make(chan struct{})}
	m := &burstModel{wait: rec.blocked, burst: make(chan struct{})}
	env := newEnv(t, []*stepwise.Agent{{Name: "burst", Model: m}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := env.eng.CreateSession(ctx, "burst", "")
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, stop := context.WithCancel(ctx)
	req := httptest.NewRequest(http.MethodGet, "/v1/sessions/"+sess.ID+"/events", nil).WithContext(reqCtx)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		_ = env.srv.stream(rec, req, stepwise.SubscribeParams{SessionID: sess.ID})
	}()
	run, err := env.eng.StartRun(ctx, stepwise.StartParams{Agent: "burst", SessionID: sess.ID, Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	<-m.burst // d1..d9 are queued while the handler is held writing d0
	close(rec.release)
	env.waitRun(run.ID, steptype.RunCompleted)
	for !strings.Contains(rec.String(), "event: run_finished") {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-handled

	var got []string
	var last stepwise.Position
	for line := range strings.Lines(rec.String()) {
		switch {
		case line == "FLUSH\n":
			got = append(got, "|")
		case strings.HasPrefix(line, "id: "):
			pos, err := stepwise.ParsePosition(strings.TrimSpace(line[4:]))
			if err != nil || !last.Less(pos) {
				t.Fatalf("id %q after %v (%v)", line, last, err)
			}
			last = pos
		case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"delta":`):
			i := strings.Index(line, `"content":"`) + len(`"content":"`)
			got = append(got, line[i:i+2])
		}
	}
	deltas := strings.Join(got, " ")
	if !strings.Contains(deltas, "d0 | d1 d2 d3 d4 d5 d6 d7 d8 d9") || strings.Count(deltas, "d") != 10 {
		t.Fatalf("deltas and flushes: %s, want d0, a flush, then d1..d9 in one flush, each once", deltas)
	}
}

// An AG-UI stream, written by the handler's goroutine as the run's events
// come (no pump), sends heartbeats from its watcher while the run is quiet
// and delivers every delta in order, once, around them.
func TestAGUIHeartbeatWhileQuiet(t *testing.T) {
	t.Parallel()
	m := &burstModel{wait: make(chan struct{}), burst: make(chan struct{})}
	env := newEnv(t, []*stepwise.Agent{{Name: "burst", Model: m}}, withHeartbeat(10*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := `{"threadId":"t-hb","runId":"r-hb","messages":[{"id":"m1","role":"user","content":"go"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/agui/burst", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	var got []string
	released := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended after %v: %v", got, err)
		}
		switch {
		case line == ": heartbeat\n":
			got = append(got, "hb")
			if !released { // the run waits until the stream had a heartbeat
				released = true
				close(m.wait)
			}
		case strings.Contains(line, `"TEXT_MESSAGE_CONTENT"`):
			i := strings.Index(line, `"delta":"`) + len(`"delta":"`)
			got = append(got, line[i:i+2])
		case strings.Contains(line, `"RUN_FINISHED"`):
			s := strings.Join(got, " ")
			if !strings.HasPrefix(s, "d0 hb") || !strings.Contains(s, "d1 d2 d3 d4 d5 d6 d7 d8 d9") || strings.Count(s, "d") != 10 {
				t.Fatalf("deltas and heartbeats: %s, want d0, a heartbeat, then d1..d9, each once", s)
			}
			return
		}
	}
}
