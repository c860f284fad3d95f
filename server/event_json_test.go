package server

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// TestAppendEventMatchesEncodingJSON checks the hand-written event encoder
// against encoding/json on events of every shape.
func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)
	weird := "a\"b\\c\nd\re\tf\x00g\x1fh<i>j&k\u2028l\u2029m\xffn😀o"
	evs := []*stepwise.Event{
		{Type: stepwise.EventStepDelta, SessionID: "s", RunID: "r", Position: stepwise.Position{Seq: 3, Idx: 7}, Time: now, StepName: "llm", Delta: &stepwise.Delta{Content: weird}},
		{Type: stepwise.EventStepDelta, SessionID: weird, RunID: "r", Time: now, Delta: &stepwise.Delta{Reasoning: "think", Content: "x"}},
		{Type: stepwise.EventStepDelta, SessionID: "s", RunID: "r", Time: now, Delta: &stepwise.Delta{ToolCall: &llm.ToolCallDelta{Index: 2, ID: "c", Name: "f", Arguments: `{"a":`}}},
		{Type: stepwise.EventStepDelta, SessionID: "s", RunID: "r", Time: now, Delta: &stepwise.Delta{ToolCall: &llm.ToolCallDelta{Arguments: "1}"}}},
		{Type: stepwise.EventStepCompleted, SessionID: "s", RunID: "r", Position: stepwise.Position{Seq: 9}, Time: now, StepName: "tools",
			Step: &stepwise.Step{ID: "i", Sequence: 9, Kind: steptype.KindTool, Content: weird, Outputs: json.RawMessage(`{"x": [1, 2]}`), CreatedAt: now}},
		{Type: stepwise.EventRunFinished, SessionID: "s", RunID: "r", Time: time.Time{}, Run: &stepwise.Run{ID: "r", Status: steptype.RunCompleted, Output: weird, State: json.RawMessage(`{"k":1}`)}},
		{Type: stepwise.EventRunStarted, SessionID: "", RunID: ""},
	}
	for _, ev := range evs {
		var e eventEncoder
		got, err := e.append(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(wire.EventDataOf(ev))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("event %s:\n got %s\nwant %s", ev.Type, got, want)
		}
	}
}

// One stream's encoder, kept across events whose ids, seconds, fractions
// and zones change, writes what encoding/json writes for each.
func TestEventEncoderAcrossEvents(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("EST", -5*3600)
	}
	plus := time.FixedZone("X", 5*3600+30*60)
	base := time.Date(2026, 3, 8, 6, 59, 59, 0, time.UTC) // 01:59:59 EST, a second before New York's clocks go forward
	var times []time.Time
	for _, loc := range []*time.Location{time.UTC, ny, plus, time.Local} {
		for _, d := range []time.Duration{0, 1, 10, 120 * time.Millisecond, 999999999, time.Second, time.Second + 500*time.Microsecond, time.Hour} {
			times = append(times, base.Add(d).In(loc))
		}
	}
	times = append(times, base.In(time.UTC), base.In(plus), base.In(ny), base.Add(time.Nanosecond).In(ny), time.Time{}, time.Date(-1, 1, 1, 0, 0, 0, 5, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 999, time.UTC))
	var e eventEncoder
	var buf []byte
	for i, tm := range times {
		sess, run := "s1", []string{"r1", "r1", "r2", "", "r1"}[i%5]
		if i%7 == 6 {
			sess = "s\"2"
		}
		ev := &stepwise.Event{Type: stepwise.EventStepDelta, SessionID: sess, RunID: run, Position: stepwise.Position{Seq: int64(i), Idx: 1}, Time: tm, Delta: &stepwise.Delta{Content: "x"}}
		got, err := e.append(buf[:0], ev)
		if err != nil {
			t.Fatal(err)
		}
		buf = got
		want, err := json.Marshal(wire.EventDataOf(ev))
		if err != nil {
			// encoding/json refuses years outside 0-9999: RFC3339Nano then.
			want = []byte(`{"id":"` + ev.Position.String() + `","type":"step_delta","session_id":` + mustJSON(t, sess) + `,"run_id":` + mustJSON(t, run) + `,"time":"` + tm.Format(time.RFC3339Nano) + `","delta":{"content":"x"}}`)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("event %d (%s):\n got %s\nwant %s", i, tm, got, want)
		}
	}
}
