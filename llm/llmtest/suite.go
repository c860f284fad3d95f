package llmtest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Run runs the conformance suite against the adapter f describes, each case
// as a subtest. The goroutine count check runs first and alone; the other
// cases run in parallel.
func Run(t *testing.T, f Fixture) {
	t.Helper()
	t.Run("BreakReleasesConnection", func(t *testing.T) { testBreakReleases(t, f) })
	cases := []struct {
		name string
		fn   func(*testing.T, Fixture)
	}{
		{"Text", testText},
		{"Reasoning", testReasoning},
		{"ToolCall", testToolCall},
		{"ParallelToolCalls", testParallelCalls},
		{"ToolCallWithoutArguments", testCallNoArgs},
		{"HTTPErrors", testHTTPErrors},
		{"StreamedError", testStreamedError},
		{"Truncated", testTruncated},
		{"ConnectionDropped", testDropped},
		{"Malformed", testMalformed},
		{"ConnectionRefused", testRefused},
		{"Cancelled", testCancelled},
		{"CallTimeout", testTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, f)
		})
	}
}

// serve starts a server for f answering with h and a model pointed at it.
func serve(t *testing.T, f Fixture, h http.HandlerFunc, o Options) (*Server, llm.Model) {
	t.Helper()
	s := NewServer(t, f.Path(), h)
	return s, f.New(t, s.URL, o)
}

// streamTurn serves turn whole and drains the model's answer.
func streamTurn(t *testing.T, f Fixture, turn Turn) Result {
	t.Helper()
	s, m := serve(t, f, Frames(f.ContentType(), f.Stream(turn).Frames...), Options{})
	r := Drain(t.Context(), m, UserRequest("hi"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Final == nil || r.Final.Partial || r.AfterEnd != 0 {
		t.Fatalf("final %+v, %d values after it", r.Final, r.AfterEnd)
	}
	if n := s.Count(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	return r
}

func testText(t *testing.T, f Fixture) {
	turn := Turn{
		Model: "llmtest-model-2026",
		Text:  []string{"The capital", " of France", " is Paris", ": \"la Ville", " Lumière\"", " 🌟."},
		Usage: llm.Usage{InputTokens: 2006, OutputTokens: 17, CachedTokens: 1920},
	}
	r := streamTurn(t, f, turn)
	want := strings.Join(turn.Text, "")
	if r.Final.Content != want {
		t.Errorf("content %q, want %q", r.Final.Content, want)
	}
	if content, _ := r.Joined(); content != want {
		t.Errorf("partials join to %q", content)
	}
	if len(r.Partials) != len(turn.Text) {
		t.Errorf("%d partials, want one per text delta (%d)", len(r.Partials), len(turn.Text))
	}
	for _, p := range r.Partials {
		if p.Content == "" || p.Usage != (llm.Usage{}) || p.FinishReason != "" || len(p.ToolCalls) != 0 {
			t.Errorf("partial carries more than a delta: %+v", p)
		}
	}
	if r.Final.Usage != turn.Usage {
		t.Errorf("usage %+v, want %+v", r.Final.Usage, turn.Usage)
	}
	if r.Final.FinishReason == "" || len(r.Final.ToolCalls) != 0 {
		t.Errorf("final %+v: want a finish reason and no tool calls", r.Final)
	}
	if f.Capabilities().ModelID && r.Final.Model != turn.Model {
		t.Errorf("final model %q, want %q", r.Final.Model, turn.Model)
	}
}

func testReasoning(t *testing.T, f Fixture) {
	if !f.Capabilities().Reasoning {
		t.Log("the provider declares no reasoning deltas")
		return
	}
	turn := Turn{Model: "m", Reasoning: []string{"The user says hi.", " Reply briefly."}, Text: []string{"Hello!", " How can I help?"}}
	r := streamTurn(t, f, turn)
	reasoning, content := strings.Join(turn.Reasoning, ""), strings.Join(turn.Text, "")
	if r.Final.Reasoning != reasoning || r.Final.Content != content {
		t.Errorf("final reasoning %q content %q", r.Final.Reasoning, r.Final.Content)
	}
	if c, rs := r.Joined(); c != content || rs != reasoning {
		t.Errorf("partials join to content %q reasoning %q", c, rs)
	}
}

// checkCalls compares the final calls with the turn's, and the deltas by
// index with the arguments.
func checkCalls(t *testing.T, f Fixture, r Result, calls []Call) {
	t.Helper()
	got := r.Final.ToolCalls
	if len(got) != len(calls) {
		t.Fatalf("%d tool calls, want %d: %+v", len(got), len(calls), got)
	}
	ids := map[string]bool{}
	for i, c := range calls {
		g := got[i]
		if g.Name != c.Name || string(g.Arguments) != c.Arguments() {
			t.Errorf("call %d: %s %s, want %s %s", i, g.Name, g.Arguments, c.Name, c.Arguments())
		}
		if f.Capabilities().CallIDs && g.ID != c.ID || g.ID == "" || ids[g.ID] {
			t.Errorf("call %d: id %q, want %q (distinct, non-empty)", i, g.ID, c.ID)
		}
		ids[g.ID] = true
	}
	args := map[int]string{}
	names := map[int][]string{}
	for _, p := range r.Partials {
		for _, d := range p.ToolCallDeltas {
			args[d.Index] += d.Arguments
			if d.Name != "" {
				names[d.Index] = append(names[d.Index], d.Name)
			}
		}
	}
	for i, c := range calls {
		if a := args[i]; a != strings.Join(c.Args, "") && a != c.Arguments() {
			t.Errorf("deltas of call %d join to %q, want %q", i, a, c.Arguments())
		}
		if n := names[i]; len(n) != 1 || n[0] != c.Name {
			t.Errorf("deltas of call %d name it %q, want %q once", i, n, c.Name)
		}
	}
	if len(args) > len(calls) {
		t.Errorf("deltas for %d calls, want %d", len(args), len(calls))
	}
}

func testToolCall(t *testing.T, f Fixture) {
	calls := []Call{{ID: "call_1", Name: "get_weather",
		Args: []string{`{"loc`, `ation":"Pa`, `ris, Fra`, `nce","unit":"cel`, `sius","days":[1,`, `2,3]}`}}}
	r := streamTurn(t, f, Turn{Model: "m", Calls: calls, Usage: llm.Usage{InputTokens: 80, OutputTokens: 20}})
	checkCalls(t, f, r, calls)
	if r.Final.Content != "" || r.Final.FinishReason == "" {
		t.Errorf("final %+v", r.Final)
	}
}

func testParallelCalls(t *testing.T, f Fixture) {
	calls := []Call{
		{ID: "call_A", Name: "get_weather", Args: []string{`{"l`, `ocation"`, `:"Tokyo"}`}},
		{ID: "call_B", Name: "get_time", Args: []string{`{"t`, `imezone":`, `"Asia/Tokyo"}`}},
	}
	r := streamTurn(t, f, Turn{Model: "m", Text: []string{"Checking both."}, Calls: calls})
	checkCalls(t, f, r, calls)
	if r.Final.Content != "Checking both." {
		t.Errorf("content %q", r.Final.Content)
	}
}

func testCallNoArgs(t *testing.T, f Fixture) {
	calls := []Call{{ID: "call_1", Name: "now"}}
	r := streamTurn(t, f, Turn{Model: "m", Calls: calls})
	checkCalls(t, f, r, calls)
}

func testHTTPErrors(t *testing.T, f Fixture) {
	inAnHour := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	cases := []struct {
		name    string
		status  int
		headers []string
		html    bool
		class   steptype.ErrorClass
		code    string
		retry   func(time.Duration) bool
	}{
		{name: "429 Retry-After seconds", status: 429, headers: []string{"Retry-After: 17"},
			class: steptype.ErrorTransient, code: "rate_limited", retry: func(d time.Duration) bool { return d == 17*time.Second }},
		{name: "429 Retry-After date", status: 429, headers: []string{"Retry-After: " + inAnHour},
			class: steptype.ErrorTransient, code: "rate_limited", retry: func(d time.Duration) bool { return d > 58*time.Minute && d <= time.Hour }},
		{name: "500", status: 500, class: steptype.ErrorTransient, code: "server_error"},
		{name: "503 Retry-After", status: 503, headers: []string{"Retry-After: 3"},
			class: steptype.ErrorTransient, code: "server_error", retry: func(d time.Duration) bool { return d == 3*time.Second }},
		{name: "502 HTML from a proxy", status: 502, html: true, class: steptype.ErrorTransient, code: "server_error"},
		{name: "400", status: 400, class: steptype.ErrorPermanent, code: "bad_request"},
		{name: "401", status: 401, class: steptype.ErrorPermanent, code: "auth"},
		{name: "403", status: 403, class: steptype.ErrorPermanent, code: "auth"},
		{name: "404", status: 404, class: steptype.ErrorPermanent, code: "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			msg := "message of the " + c.name + " answer"
			body := string(f.ErrorBody(c.status, msg))
			h := JSONError(c.status, body, c.headers...)
			if c.html {
				msg = "502 Bad Gateway"
				h = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(c.status)
					_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
				}
			}
			s, m := serve(t, f, h, Options{})
			r := Drain(t.Context(), m, UserRequest("hi"))
			e := AsError(t, r.Err)
			if e.Class != c.class || e.Code != c.code || e.StatusCode != c.status || !strings.Contains(e.Message, msg) {
				t.Errorf("got class %s code %s status %d message %q, want %s %s %d %q",
					e.Class, e.Code, e.StatusCode, e.Message, c.class, c.code, c.status, msg)
			}
			if llm.Classify(r.Err) != c.class {
				t.Errorf("llm.Classify = %s", llm.Classify(r.Err))
			}
			if c.retry != nil && !c.retry(e.RetryAfter) || c.retry == nil && e.RetryAfter != 0 {
				t.Errorf("RetryAfter %v", e.RetryAfter)
			}
			if llm.RetryAfter(r.Err) != e.RetryAfter {
				t.Errorf("llm.RetryAfter = %v", llm.RetryAfter(r.Err))
			}
			if r.Final != nil || len(r.Partials) != 0 || r.AfterEnd != 0 {
				t.Errorf("values besides the error: %+v", r)
			}
			if n := s.Count(); n != 1 {
				t.Errorf("%d requests: the adapter retried", n)
			}
		})
	}
}

// headThen serves the frames before the end of turn, then more.
func headThen(f Fixture, turn Turn, more ...[]byte) http.HandlerFunc {
	frames := append(f.Stream(turn).Head(), more...)
	return Frames(f.ContentType(), frames...)
}

// failed drains the model against h and checks the error's class and code
// and that partials partials came before it and nothing after.
func failed(t *testing.T, f Fixture, h http.HandlerFunc, code string, partials int) *llm.Error {
	t.Helper()
	_, m := serve(t, f, h, Options{})
	r := Drain(t.Context(), m, UserRequest("hi"))
	e := AsError(t, r.Err)
	if e.Class != steptype.ErrorTransient || e.Code != code {
		t.Errorf("error %+v, want transient %s", e, code)
	}
	if r.Final != nil || len(r.Partials) != partials || r.AfterEnd != 0 {
		t.Errorf("final %v, %d partials (want %d), %d values after the error", r.Final, len(r.Partials), partials, r.AfterEnd)
	}
	return e
}

func testStreamedError(t *testing.T, f Fixture) {
	h := headThen(f, Turn{Model: "m", Text: []string{"Hi"}}, f.StreamError("Overloaded right now"))
	e := failed(t, f, h, "server_error", 1)
	if !strings.Contains(e.Message, "Overloaded right now") || e.StatusCode != 0 {
		t.Errorf("error %+v", e)
	}
}

func testTruncated(t *testing.T, f Fixture) {
	failed(t, f, headThen(f, Turn{Model: "m", Text: []string{"Once", " upon", " a time"}}), "stream_truncated", 3)
}

func testDropped(t *testing.T, f Fixture) {
	head := f.Stream(Turn{Model: "m", Text: []string{"Hel"}}).Head()
	h := func(w http.ResponseWriter, r *http.Request) {
		if !writeFrames(w, f.ContentType(), head) {
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST instead of FIN
			}
			_ = conn.Close()
		}
	}
	failed(t, f, h, "stream_truncated", 1)
}

func testMalformed(t *testing.T, f Fixture) {
	failed(t, f, headThen(f, Turn{Model: "m", Text: []string{"Hi"}}, f.Malformed()), "bad_chunk", 1)
}

func testRefused(t *testing.T, f Fixture) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	r := Drain(t.Context(), f.New(t, "http://"+addr, Options{}), UserRequest("hi"))
	e := AsError(t, r.Err)
	if e.Class != steptype.ErrorTransient || e.Code != "connection" || !errors.Is(r.Err, syscall.ECONNREFUSED) {
		t.Errorf("error %+v", e)
	}
}

// stalled sends the start of a turn and four text deltas in one write (the
// client buffers them all), then nothing until the client goes away, and
// reports that on gone.
func stalled(f Fixture, gone chan<- struct{}) http.HandlerFunc {
	head := bytes.Join(f.Stream(Turn{Model: "m", Text: []string{"Once", " upon", " a", " time"}}).Head(), nil)
	return func(w http.ResponseWriter, r *http.Request) {
		writeFrames(w, f.ContentType(), [][]byte{head})
		<-r.Context().Done()
		close(gone)
	}
}

func testCancelled(t *testing.T, f Fixture) {
	gone := make(chan struct{})
	_, m := serve(t, f, stalled(f, gone), Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var partials int
	var got error
	for resp, err := range m.Generate(ctx, UserRequest("tell a long story")) {
		if err != nil {
			got = err
			break
		}
		partials++
		if resp.Partial {
			cancel() // the server will never send more
		}
	}
	if got != context.Canceled {
		t.Fatalf("error %v, want context.Canceled itself", got)
	}
	if partials != 1 {
		t.Errorf("%d partials after cancelling: buffered frames must not be yielded", partials)
	}
	<-gone // the connection was released
}

func testTimeout(t *testing.T, f Fixture) {
	gone := make(chan struct{})
	// The timeout is the adapter's wall-clock limit on a call: it runs out
	// in real time while the server stalls.
	s, m := serve(t, f, stalled(f, gone), Options{Timeout: 50 * time.Millisecond})
	r := Drain(t.Context(), m, UserRequest("?"))
	e := AsError(t, r.Err)
	if e.Class != steptype.ErrorTransient || e.Code != "timeout" || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Errorf("error %+v", e)
	}
	// Under load the 50 ms can end before the request reaches the server;
	// then no handler runs and gone never closes. Close waits for every
	// handler, so afterwards a server that saw the request saw it go away.
	s.Close()
	if s.Count() > 0 {
		select {
		case <-gone:
		default:
			t.Error("the server never saw the client go away")
		}
	}
}

func testBreakReleases(t *testing.T, f Fixture) {
	gone := make(chan struct{})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, m := serve(t, f, stalled(f, gone), Options{HTTPClient: &http.Client{Transport: tr}})
	before := runtime.NumGoroutine()
	for range m.Generate(t.Context(), UserRequest("?")) {
		break
	}
	<-gone // the server saw the client close the connection
	tr.CloseIdleConnections()
	// Goroutines of the closed connection end asynchronously; poll for the
	// count to come back down.
	for i := 0; ; i++ {
		n := runtime.NumGoroutine()
		if n <= before {
			break
		}
		if i == 200 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after breaking out:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
