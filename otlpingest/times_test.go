package otlpingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/store"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestSpanTimes: the session and run of a trace take their times from the
// spans (a run lasts from its first span's start to its last span's end),
// not from when the export arrived, and a session without a conversation id
// is titled after its first user message, not after a span name.
func TestSpanTimes(t *testing.T) {
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{Settle: -1}})
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	root := &tracepb.Span{TraceId: id(31, 16), SpanId: id(1, 8), Name: "ai.generateText",
		StartTimeUnixNano: uint64(t0.UnixNano()), EndTimeUnixNano: uint64(t0.Add(150 * time.Millisecond).UnixNano())}
	chat := chatSpan(31, 2, 1, t0.Add(10*time.Millisecond), "hello")
	chat.EndTimeUnixNano = uint64(t0.Add(140 * time.Millisecond).UnixNano())
	if code, body := e.post("/v1/traces", pb, export(root, chat)); code != 200 {
		t.Fatalf("export: %d %s", code, body)
	}
	sid := otlpingest.TraceSessionID("0000000000000000000000000000001f")
	e.waitSteps(sid, 2)
	run := e.waitRun(otlpingest.RunID("0000000000000000000000000000001f"))
	if !run.CreatedAt.Equal(t0) || !run.FinishedAt.Equal(t0.Add(150*time.Millisecond)) {
		t.Errorf("run from %s to %s, want %s to %s", run.CreatedAt, run.FinishedAt, t0, t0.Add(150*time.Millisecond))
	}
	sess, err := e.st.SessionGet(context.Background(), &store.SessionGetParams{ID: sid})
	if err != nil {
		t.Fatal(err)
	}
	if !sess.CreatedAt.Equal(t0) || sess.Title != "q2" {
		t.Errorf("session created %s titled %q, want %s and the first user message %q", sess.CreatedAt, sess.Title, t0, "q2")
	}
}
