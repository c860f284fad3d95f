package rules

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/raceflag"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestPreEncodedBodyMatchesEncode(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, s := range map[string]*steptype.Step{
		"plain":    {ID: "a", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: `,"sequence":0,`},
		"metadata": {ID: "b", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted, Metadata: map[string]any{"x": map[string]any{"sequence": 0, "y": 1}}},
		"marker in metadata": {ID: "c", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted,
			Metadata: map[string]any{"a": 1, "sequence": 0, "t": map[string]any{"a": 1, "sequence": 0, "z": 0}}},
		"ids": {ID: `q",` + `"sequence":0,`, SessionID: "s", Kind: steptype.KindLLM, Status: steptype.StepCompleted},
	} {
		// The second round encodes into the buffer the first released.
		for round := range 2 {
			p, err := PreEncode(s, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, seq := range []int64{1, 9, 10, 123456789} {
				got, err := p.Body(seq)
				if err != nil {
					t.Fatal(err)
				}
				c := *p.Step
				c.Sequence = seq
				want, _ := EncodeStep(&c)
				if !bytes.Equal(got, want) {
					t.Errorf("%s round %d seq %d:\n got %s\nwant %s", name, round, seq, got, want)
				}
			}
			p.Release()
		}
	}
}

// A released pre-encoded body's buffer is reused by the next PreEncode,
// and the bodies Body returned before stay as they were.
func TestPreEncodeReusesReleasedBody(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &steptype.Step{ID: "a", SessionID: "s", Kind: steptype.KindTool, Status: steptype.StepCompleted,
		Content: strings.Repeat("result ", 100)}
	p, err := PreEncode(s, now)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := p.Body(3)
	want := bytes.Clone(kept)
	p.Release()
	other := *s
	other.ID, other.Content = "b", strings.Repeat("other! ", 100)
	q, err := PreEncode(&other, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Body(4); err != nil {
		t.Fatal(err)
	}
	q.Release()
	if !bytes.Equal(kept, want) {
		t.Fatalf("a body returned before the release changed:\n got %s\nwant %s", kept, want)
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	cycle := func(release bool) float64 {
		return testing.AllocsPerRun(50, func() {
			p, err := PreEncode(s, now)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = p.Body(7)
			if release {
				p.Release()
			}
		})
	}
	without, with := cycle(false), cycle(true)
	if with > without-1 {
		t.Errorf("encoding a step, splicing its sequence, releasing: %.0f allocations, %.0f without the release; want one fewer", with, without)
	}
	t.Logf("%.0f allocations per step with the release, %.0f without", with, without)
}

func TestSegments(t *testing.T) {
	// g forked from f at 2; f forked from p at 3.
	chain := []Link{{SessionID: "g", ForkSequence: 2, LastSequence: 4}, {SessionID: "f", ForkSequence: 3, LastSequence: 5}, {SessionID: "p", LastSequence: 10}}
	for _, c := range []struct {
		start, end int64
		want       []Segment
	}{
		{0, 0, []Segment{{"p", 1, 2}, {"g", 3, 4}}},
		{2, 3, []Segment{{"p", 2, 2}, {"g", 3, 3}}},
		{4, 0, []Segment{{"g", 4, 4}}},
		{5, 0, nil},
	} {
		got := Segments(chain, c.start, c.end)
		if len(got) != len(c.want) {
			t.Errorf("Segments(%d, %d) = %v, want %v", c.start, c.end, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("Segments(%d, %d) = %v, want %v", c.start, c.end, got, c.want)
			}
		}
	}
}
