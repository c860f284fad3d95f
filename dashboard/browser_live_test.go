package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// streamerAgent streams text in small deltas and calls a tool, 12 times.
func streamerAgent() *stepwise.Agent {
	m := scripted.New("streamer", scripted.Script{Turns: []scripted.Turn{
		{Text: "Checking the queue once more before the next tick.", ToolCalls: []steptype.ToolCall{{Name: "tick", Arguments: json.RawMessage(`{}`)}},
			Delay: 20 * time.Millisecond, ChunkDelay: 5 * time.Millisecond, Chunk: 6, Repeat: 12},
		{Text: "The queue is empty.", Delay: 20 * time.Millisecond},
	}})
	tick := tool.Func(llm.ToolDef{Name: "tick", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
			time.Sleep(10 * time.Millisecond) // simulated work: the page must see the run live
			return &tool.Result{Content: "tick"}, nil
		})
	return &stepwise.Agent{Name: "streamer", Model: m, Tools: []tool.Tool{tick}}
}

// cutter drops the first cuts session streams after a few events each,
// as a flaky network would.
type cutter struct {
	cuts  atomic.Int32
	limit int32
}

func (c *cutter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || !strings.HasSuffix(r.URL.Path, "/events") || c.cuts.Load() >= c.limit {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&cutWriter{ResponseWriter: w, c: c, after: 15}, r)
	})
}

type cutWriter struct {
	http.ResponseWriter
	c      *cutter
	mu     sync.Mutex
	events int
	after  int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.events >= w.after {
		w.c.cuts.Add(1)
		panic(http.ErrAbortHandler)
	}
	w.events += bytes.Count(p, []byte("\nid: ")) + bytes.Count(p[:min(len(p), 4)], []byte("id: "))
	return w.ResponseWriter.Write(p)
}

func (w *cutWriter) FlushError() error { return http.NewResponseController(w.ResponseWriter).Flush() }

func (w *cutWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A running session updates live: steps and token deltas arrive over SSE;
// when the stream is cut, the page resumes from its last event id and ends
// with every step exactly once, in order.
func TestBrowserLiveStreamResume(t *testing.T) {
	cut := &cutter{limit: 2}
	e := newEnvWith(t, envOptions{agents: []*stepwise.Agent{streamerAgent()}, wrap: cut.wrap})
	sess, err := e.eng.CreateSession(context.Background(), "streamer", "live")
	if err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + sess.ID))
	p.waitJS(`document.getElementById('conn').textContent.includes('live')`)
	run, err := e.eng.StartRun(context.Background(), stepwise.StartParams{Agent: "streamer", SessionID: sess.ID, Input: "drain the queue"})
	if err != nil {
		t.Fatal(err)
	}
	p.waitJS(`document.querySelector('#timeline .tl-live')`) // a step in flight, with its deltas
	done := waitRun(t, e, run.ID, steptype.RunCompleted, steptype.RunFailed)
	if done.Status != steptype.RunCompleted {
		t.Fatalf("run %s", done.Status)
	}
	n := done.StepCount
	p.waitJS(`document.querySelector('#timeline [data-seq="` + strconv.FormatInt(n, 10) + `"][data-loaded="1"]') && document.querySelector('.status-slot .badge')?.textContent === 'completed'`)
	if cut.cuts.Load() < 2 {
		t.Fatalf("the stream was cut %d times; the test needs at least 2", cut.cuts.Load())
	}
	if r := eval[int](p, `window.__stepwiseReconnects || 0`); r < 2 {
		t.Fatalf("page reconnected %d times", r)
	}
	ids := eval[[]string](p, `window.__stepwiseEventIDs`)
	var last [2]int64
	completed, deltas := map[int64]int{}, 0
	for i, s := range ids {
		typ, id, _ := strings.Cut(s, " ")
		a, b, _ := strings.Cut(id, ":")
		seq, _ := strconv.ParseInt(a, 10, 64)
		idx, _ := strconv.ParseInt(b, 10, 64)
		if i > 0 && (seq < last[0] || (seq == last[0] && idx <= last[1])) {
			t.Fatalf("event %d (%s) not after %v: events %v", i, s, last, ids)
		}
		last = [2]int64{seq, idx}
		switch typ {
		case "step_completed":
			completed[seq]++
		case "step_delta":
			deltas++
		}
	}
	for seq := int64(1); seq <= n; seq++ {
		if completed[seq] != 1 {
			t.Fatalf("step %d completed %d times in the stream: %v", seq, completed[seq], ids)
		}
	}
	if deltas == 0 {
		t.Fatal("no token deltas reached the page")
	}
	if rows := eval[int](p, `document.querySelectorAll('#timeline .tl-row[data-loaded="1"]').length`); int64(rows) != n {
		t.Fatalf("%d rows for %d steps", rows, n)
	}
	p.screenshot("live-session")
}
