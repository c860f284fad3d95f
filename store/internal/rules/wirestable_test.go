package rules

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// TestVerbatimAsWireStable: on generated steps, what the encoder reports
// while it writes (PreEncoded.Verbatim) is what WireStable reports, for a
// new PreEncoded and a released one, and a step it calls verbatim comes
// back from its body as NormalizeStep(CloneStep(step)), which a driver
// then returns without decoding (TestAppendReturnsStored in the SQLite
// driver, TestAppendReturnsWhatItStored in PostgreSQL's).
func TestVerbatimAsWireStable(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 28))
	alphabet := []string{"a", "Z", " ", "<", "&", "\"", "\n", "é", "\u2028", "😀", "\xff", "\xe2\x80"}
	str := func() string {
		var b []byte
		for range r.IntN(4) {
			b = append(b, alphabet[r.IntN(len(alphabet))]...)
		}
		return string(b)
	}
	raw := func() json.RawMessage {
		switch r.IntN(6) {
		case 0:
			return nil
		case 1:
			return json.RawMessage{}
		case 2:
			return json.RawMessage(`{ "k": 1 }`)
		default:
			b, _ := json.Marshal(map[string]any{"s": str()})
			if r.IntN(2) == 0 {
				return json.RawMessage(`"` + str() + `"`) // maybe not escaped as encoding/json would
			}
			return b
		}
	}
	value := func() any {
		switch r.IntN(6) {
		case 0:
			return str()
		case 1:
			return 1.5
		case 2:
			return r.IntN(3)
		case 3:
			return []any{str(), true, nil}
		case 4:
			return map[string]any{str(): str()}
		}
		return map[string]any(nil)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	agree := 0
	for i := range 4000 {
		s := &steptype.Step{ID: "st-" + strconv.Itoa(i), SessionID: "s", Kind: steptype.KindTool, Status: steptype.StepCompleted,
			Content: str(), ToolName: str(), Inputs: raw(), Outputs: raw(), CreatedAt: now.Add(time.Duration(i))}
		if r.IntN(2) == 0 {
			s.ToolCalls = []steptype.ToolCall{{ID: str(), Name: "n", Arguments: raw()}}
		}
		if r.IntN(2) == 0 {
			s.Metadata = map[string]any{str(): value(), "k": value()}
		}
		if r.IntN(8) == 0 {
			s.Annotations.Goal = "g"
		}
		if r.IntN(8) == 0 {
			s.Error = &steptype.StepError{Message: str()}
		}
		for round := range 2 { // a new PreEncoded, then maybe a released one
			p, err := PreEncode(s, now)
			if err != nil {
				continue // not encodable ({} args of the generator are fine; an empty raw is not)
			}
			if p.Verbatim() != WireStable(p.Step) {
				t.Fatalf("step %d round %d: Verbatim %v, WireStable %v: %#v", i, round, p.Verbatim(), WireStable(p.Step), s)
			}
			if p.Verbatim() {
				agree++
				body, err := p.Sequenced(7)
				if err != nil {
					t.Fatal(err)
				}
				got, err := DecodeStep(body)
				if err != nil {
					t.Fatal(err)
				}
				c := *p.Step
				c.Sequence = 7
				if want := NormalizeStep(CloneStep(&c)); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: verbatim, but decodes to\n%#v\nnot\n%#v", i, got, want)
				}
			}
			p.Release()
		}
	}
	if agree < 200 {
		t.Errorf("only %d verbatim steps of 8000: the generator tests little", agree)
	}
}
