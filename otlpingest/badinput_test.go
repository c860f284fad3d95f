package otlpingest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/store"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func (e *env) post(path, ctype string, body []byte, hdr ...string) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+e.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func id(n int, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b[size-8:], uint64(n))
	return b
}

func kv(k string, v any) *commonpb.KeyValue {
	switch x := v.(type) {
	case int:
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(x)}}}
	default:
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: fmt.Sprint(v)}}}
	}
}

// chatSpan is a GenAI chat span answering the user with text.
func chatSpan(trace, span, parent int, start time.Time, text string) *tracepb.Span {
	s := &tracepb.Span{TraceId: id(trace, 16), SpanId: id(span, 8), Name: "chat m",
		StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(time.Millisecond).UnixNano()),
		Attributes: []*commonpb.KeyValue{kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", "m"),
			kv("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"q`+fmt.Sprint(span)+`"}]}]`),
			kv("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"`+text+`"}]}]`),
			kv("gen_ai.usage.input_tokens", 3), kv("gen_ai.usage.output_tokens", 2)}}
	if parent != 0 {
		s.ParentSpanId = id(parent, 8)
	}
	return s
}

func export(spans ...*tracepb.Span) []byte {
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}}}}})
	return b
}

const pb = "application/x-protobuf"

// TestBadInput: malformed bodies, wrong types, oversized and unauthorized
// exports get OTLP errors (never a 500) and record nothing.
func TestBadInput(t *testing.T) {
	e := newEnv(t, server.Config{MaxOTLPBytes: 64 << 10, OTLP: otlpingest.Config{Settle: -1}})
	status := func(b []byte) string {
		// google.rpc.Status: field 2 is the message.
		if i := bytes.IndexByte(b, 0x12); i >= 0 && i+2 <= len(b) {
			return string(b[i+2:])
		}
		return ""
	}
	code, body := e.post("/v1/traces", pb, []byte{0xff, 0xff, 0xff})
	if code != 400 || !strings.Contains(status(body), "malformed protobuf") {
		t.Fatalf("malformed protobuf: %d %q", code, body)
	}
	code, body = e.post("/v1/traces", "application/json", []byte(`{"resourceSpans": [`))
	if code != 400 || !strings.Contains(string(body), `"code":3`) {
		t.Fatalf("malformed JSON: %d %s", code, body)
	}
	code, _ = e.post("/v1/traces", "text/plain", []byte("x"))
	if code != 415 {
		t.Fatalf("text/plain: %d", code)
	}
	big := chatSpan(1, 1, 0, time.Now(), strings.Repeat("x", 100<<10))
	code, body = e.post("/v1/traces", pb, export(big))
	if code != 413 || !strings.Contains(status(body), "larger than") {
		t.Fatalf("oversized: %d %q", code, body)
	}
	// A gzip bomb: small on the wire, too large once decompressed.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(export(big))
	_ = zw.Close()
	code, _ = e.post("/v1/traces", pb, gz.Bytes(), "Content-Encoding", "gzip")
	if code != 413 {
		t.Fatalf("gzip over the limit: %d", code)
	}
	code, _ = e.post("/v1/traces", pb, []byte("not gzip"), "Content-Encoding", "gzip")
	if code != 400 {
		t.Fatalf("bad gzip: %d", code)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/traces", bytes.NewReader(export(chatSpan(1, 1, 0, time.Now(), "hi"))))
	req.Header.Set("Content-Type", pb)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	page, err := e.st.SessionList(context.Background(), &store.SessionListParams{})
	if err != nil || len(page.Sessions) != 0 {
		t.Fatalf("bad input recorded something: %+v %v", page, err)
	}
	// Invalid span ids are rejected with a partial success; the valid span
	// of the same export is recorded.
	bad := chatSpan(2, 1, 0, time.Now(), "x")
	bad.SpanId = []byte{1, 2}
	code, body = e.post("/v1/traces", pb, export(bad, chatSpan(2, 2, 0, time.Now(), "ok")))
	var out coltracepb.ExportTraceServiceResponse
	if err := proto.Unmarshal(body, &out); code != 200 || err != nil || out.GetPartialSuccess().GetRejectedSpans() != 1 {
		t.Fatalf("partial success: %d %v %v", code, &out, err)
	}
	steps := e.waitSteps(otlpingest.TraceSessionID(fmt.Sprintf("%032x", 2)), 2)
	if got := render(steps); got != "1 user user role=user content=\"q2\"\n2 llm llm role=assistant content=\"ok\" tokens=3/2 model=/m\n" {
		t.Fatalf("steps:\n%s", got)
	}
}

// TestDuplicatesOrphansSkew: a re-sent export adds nothing, a span whose
// parent never arrives is recorded (its run stays running), a span ending
// before it starts gets a zero duration, and spans are sequenced by start
// time across exports that arrive within the settle window.
func TestDuplicatesOrphansSkew(t *testing.T) {
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{Settle: 300 * time.Millisecond, ParentWait: 500 * time.Millisecond}})
	t0 := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC) // a client clock far ahead
	late := chatSpan(7, 3, 99, t0.Add(2*time.Second), "second")
	early := chatSpan(7, 2, 99, t0, "first")
	skew := chatSpan(7, 4, 99, t0.Add(3*time.Second), "third")
	skew.EndTimeUnixNano = uint64(t0.UnixNano()) // ends before it starts
	for _, b := range [][]byte{export(late), export(early), export(late, skew), export(early)} {
		if code, body := e.post("/v1/traces", pb, b); code != 200 {
			t.Fatalf("export: %d %s", code, body)
		}
	}
	sid := otlpingest.TraceSessionID(fmt.Sprintf("%032x", 7))
	// Each span's input is one user message and no assistant message: the
	// opening message of the conversation, recorded once (see the
	// de-duplication rule in docs/otlp_ingest.md).
	steps := e.waitSteps(sid, 4)
	want := "1 user user role=user content=\"q2\"\n2 llm llm role=assistant content=\"first\" tokens=3/2 model=/m\n" +
		"3 llm llm role=assistant content=\"second\" tokens=3/2 model=/m\n4 llm llm role=assistant content=\"third\" tokens=3/2 model=/m\n"
	if got := render(steps); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	if d := steps[3].Metrics.Duration; d != 0 {
		t.Fatalf("skewed span duration %s", d)
	}
	// The same spans again, after the flush: nothing new.
	if code, _ := e.post("/v1/traces", pb, export(early, late, skew)); code != 200 {
		t.Fatal(code)
	}
	e.srv.OTLP().Close() // records anything held
	all, _ := e.st.StepList(context.Background(), &store.StepListParams{SessionID: sid})
	if len(all) != 4 {
		t.Fatalf("%d steps after duplicates", len(all))
	}
	run, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: otlpingest.RunID(fmt.Sprintf("%032x", 7))})
	if err != nil || run.Status != "running" {
		t.Fatalf("orphan trace run: %+v %v", run, err)
	}
}

// TestOutOfOrderExports: the spans of a trace exported one by one in
// reverse start order are held until their parent (the root) arrives,
// then recorded in start order; the run is running meanwhile and
// completed with the root.
func TestOutOfOrderExports(t *testing.T) {
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{Settle: time.Millisecond, ParentWait: time.Hour}})
	t0 := time.Now()
	trace := fmt.Sprintf("%032x", 11)
	for i := 3; i >= 1; i-- {
		if code, body := e.post("/v1/traces", pb, export(chatSpan(11, i+1, 1, t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("answer %d", i)))); code != 200 {
			t.Fatalf("export: %d %s", code, body)
		}
	}
	// The open trace shows as a running run once it settled, with no steps
	// yet: they wait for their parent.
	run := e.waitRun(otlpingest.RunID(trace))
	if run.Status != "running" {
		t.Fatalf("open trace run: %+v", run)
	}
	if n, _ := e.st.StepCount(context.Background(), &store.StepCountParams{SessionID: otlpingest.TraceSessionID(trace)}); n != 0 {
		t.Fatalf("%d steps before the parent arrived", n)
	}
	root := chatSpan(11, 1, 0, t0, "root")
	root.Attributes = []*commonpb.KeyValue{kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.name", "ooo")}
	if code, _ := e.post("/v1/traces", pb, export(root)); code != 200 {
		t.Fatal(code)
	}
	sid := otlpingest.TraceSessionID(trace)
	want := "1 user user role=user content=\"q2\"\n2 llm llm role=assistant content=\"answer 1\" tokens=3/2 model=/m\n" +
		"3 llm llm role=assistant content=\"answer 2\" tokens=3/2 model=/m\n4 llm llm role=assistant content=\"answer 3\" tokens=3/2 model=/m\n"
	if got := render(e.waitSteps(sid, 4)); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	e.srv.OTLP().Close()
	run, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: otlpingest.RunID(trace)})
	if err != nil || run.Status != "completed" || run.Output != "answer 3" {
		t.Fatalf("finished trace run: %+v %v", run, err)
	}
}

// TestLargeTrace: one trace of 10,000 spans in batches of 512.
func TestLargeTrace(t *testing.T) {
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{Settle: -1}})
	t0 := time.Now()
	const n = 10000
	for i := 0; i < n; i += 512 {
		var batch []*tracepb.Span
		for j := i; j < i+512 && j < n; j++ {
			batch = append(batch, chatSpan(9, j+1, 100000, t0.Add(time.Duration(j)*time.Millisecond), "a"))
		}
		if code, body := e.post("/v1/traces", pb, export(batch...)); code != 200 {
			t.Fatalf("batch %d: %d %s", i, code, body)
		}
	}
	sid := otlpingest.TraceSessionID(fmt.Sprintf("%032x", 9))
	// n llm steps and the opening user message.
	if steps := e.waitSteps(sid, n+1); len(steps) != n+1 || steps[n].Sequence != n+1 {
		t.Fatalf("%d steps, want %d", len(steps), n+1)
	}
}

// TestConversationTurns: two traces naming one gen_ai.conversation.id are
// two runs of one session; the second re-sends the first turn's history,
// which adds nothing; a third turn that sends only its new message (a
// stateful API) still records it.
func TestConversationTurns(t *testing.T) {
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{Settle: -1}})
	t0 := time.Now()
	turn := func(trace int, input, output string) {
		s := chatSpan(trace, 1, 0, t0.Add(time.Duration(trace)*time.Second), output)
		s.Attributes = append(s.Attributes, kv("gen_ai.conversation.id", "conv-turns"), kv("gen_ai.input.messages", input))
		// The later attribute wins in the decoded map: replace the default input.
		if code, body := e.post("/v1/traces", pb, export(s)); code != 200 {
			t.Fatalf("export: %d %s", code, body)
		}
	}
	turn(21, `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, "hello")
	turn(22, `[{"role":"user","parts":[{"type":"text","content":"hi"}]},{"role":"assistant","parts":[{"type":"text","content":"hello"}]},{"role":"user","parts":[{"type":"text","content":"how are you?"}]}]`, "fine")
	turn(23, `[{"role":"user","parts":[{"type":"text","content":"bye"}]}]`, "bye!")
	sid := otlpingest.SessionID("conv-turns")
	want := "1 user user role=user content=\"hi\"\n2 llm llm role=assistant content=\"hello\" tokens=3/2 model=/m\n" +
		"3 user user role=user content=\"how are you?\"\n4 llm llm role=assistant content=\"fine\" tokens=3/2 model=/m\n" +
		"5 user user role=user content=\"bye\"\n6 llm llm role=assistant content=\"bye!\" tokens=3/2 model=/m\n"
	if got := render(e.waitSteps(sid, 6)); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	runs, err := e.st.RunList(context.Background(), &store.RunListParams{SessionID: sid})
	if err != nil || len(runs) != 3 {
		t.Fatalf("runs %d %v", len(runs), err)
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestHundredMegabyteExport: a 100 MB export (a span with 100 MB of
// attributes) is refused by the default limit with 413 and an OTLP
// Status body, before it is read.
func TestHundredMegabyteExport(t *testing.T) {
	e := newEnv(t, server.Config{})
	const size = 100 << 20
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/traces", io.LimitReader(zeros{}, size))
	req.ContentLength = size
	req.Header.Set("Content-Type", pb)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte("larger than 16777216 bytes")) || resp.Header.Get("Content-Type") != pb {
		t.Fatalf("%s %q", resp.Status, b)
	}
}
