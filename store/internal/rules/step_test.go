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
			// Sequenced rewrites the number in place: longer, shorter,
			// as long; Body still splices from what it left.
			for _, seq := range []int64{1, 9, 10, 123456789, 7, 12, 12} {
				c := *p.Step
				c.Sequence = seq
				want, _ := EncodeStep(&c)
				got, err := p.Body(seq)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s round %d seq %d:\n got %s\nwant %s", name, round, seq, got, want)
				}
				got, err = p.Sequenced(seq)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s round %d seq %d, in place:\n got %s\nwant %s", name, round, seq, got, want)
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

// A released PreEncoded serves the next step whole (its placed copy and
// its body's buffer), and Sequenced writes the sequence into that buffer:
// encoding a step and placing it at its sequence allocates only what the
// encoder itself does.
func TestPreEncodeSequencedAllocatesNothing(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &steptype.Step{ID: "a", SessionID: "s", Kind: steptype.KindTool, Status: steptype.StepCompleted,
		Content: strings.Repeat("result ", 100)}
	p, err := PreEncode(s, now)
	if err != nil {
		t.Fatal(err)
	}
	given := *s
	if _, err := p.Sequenced(12345); err != nil {
		t.Fatal(err)
	}
	p.Release()
	if s.Sequence != given.Sequence || s.CreatedAt != given.CreatedAt {
		t.Fatal("PreEncode changed the given step")
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	var body []byte
	allocs := testing.AllocsPerRun(100, func() {
		p, err := PreEncode(s, now)
		if err != nil {
			t.Fatal(err)
		}
		for seq := int64(8); seq < 13; seq++ { // a digit more, as an attempt after a refused group
			if body, err = p.Sequenced(seq); err != nil {
				t.Fatal(err)
			}
		}
		p.Release()
	})
	if allocs > 0 {
		t.Errorf("encoding a released step and placing it at five sequences: %.0f allocations, want none", allocs)
	}
	c := *s
	c.Sequence, c.CreatedAt = 12, now
	if want, _ := EncodeStep(&c); !bytes.Equal(body, want) {
		t.Errorf("got %s\nwant %s", body, want)
	}
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
