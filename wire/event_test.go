package wire

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

func TestEventDataRoundTrip(t *testing.T) {
	frac := 0.25
	ev := &Event{Type: EventStepProgress, SessionID: "s", RunID: "r", Position: Position{Seq: 4, Idx: 2},
		Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), StepName: "llm", Delta: &Delta{Content: "hi"},
		Progress: &steptype.Progress{Fraction: &frac, Message: "m"}, Yield: &Yield{Name: "y", Data: json.RawMessage(`1`)},
		Reset: &Reset{Attempt: 1, Retrying: true}}
	d := EventDataOf(ev)
	if d.ID != "4:2" {
		t.Fatalf("id %q", d.ID)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back EventData
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	pos, err := ParsePosition(back.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Event(pos); !reflect.DeepEqual(got, ev) {
		t.Fatalf("round trip of %s:\ngot  %+v\nwant %+v", b, got, ev)
	}
}

func TestParsePosition(t *testing.T) {
	for in, want := range map[string]Position{"0": {}, "7": {Seq: 7}, "7:3": {Seq: 7, Idx: 3}, " 2:1 ": {Seq: 2, Idx: 1}} {
		got, err := ParsePosition(in)
		if err != nil || got != want {
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", in, got, err, want)
		}
		if err == nil && got.String() != fmtPos(want) {
			t.Errorf("String() = %q", got.String())
		}
	}
	for _, bad := range []string{"", "x", "-1", "1:-1", "1:x", "1:2:3"} {
		if _, err := ParsePosition(bad); err == nil {
			t.Errorf("ParsePosition(%q) accepted", bad)
		}
	}
	if !(Position{Seq: 1, Idx: 5}).Less(Position{Seq: 2}) || (Position{Seq: 2}).Less(Position{Seq: 2}) {
		t.Error("Less")
	}
}

func fmtPos(p Position) string {
	b, _ := json.Marshal(p.Seq)
	c, _ := json.Marshal(p.Idx)
	return string(b) + ":" + string(c)
}
