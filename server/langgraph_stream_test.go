package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestLangGraphStreamCompletesLostDeltas: deltas are best effort, so a
// stream that missed some of a message's chunks gets the rest as one more
// chunk of the same message when the step completes, and a message whose
// chunks are not its prefix is sent whole.
func TestLangGraphStreamCompletesLostDeltas(t *testing.T) {
	for _, tc := range []struct {
		name, streamed, want string
	}{
		{"lost tail", "Let me c", `"content":"ompute both.","id":"run-r1-2"`},
		{"all delivered", "Let me compute both.", ""},
		{"not a prefix", "Something else", `"content":"Let me compute both."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			run := &stepwise.Run{ID: "r1", SessionID: "s1"}
			o := &lgStream{s: &Server{}, w: w, run: run, modes: map[string]bool{"messages-tuple": true}, view: &lgView{thread: "s1"}}
			if err := o.start(); err != nil {
				t.Fatal(err)
			}
			o.event(&stepwise.Event{Type: stepwise.EventStepDelta, Position: steptype.Position{Seq: 2}, StepName: "llm", Delta: &stepwise.Delta{Content: tc.streamed}})
			o.flush()
			before := w.Body.Len()
			st := &stepwise.Step{ID: "st2", Sequence: 2, Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "Let me compute both.", Status: steptype.StepCompleted}
			o.event(&stepwise.Event{Type: stepwise.EventStepCompleted, Position: steptype.Position{Seq: 2}, Step: st})
			o.flush()
			after := w.Body.String()[before:]
			if tc.want == "" {
				if strings.Contains(after, "event: messages") {
					t.Fatalf("a fully streamed message was sent again:\n%s", after)
				}
				return
			}
			if !strings.Contains(after, tc.want) {
				t.Fatalf("after the completion the stream said:\n%s\nwant it to carry %s", after, tc.want)
			}
		})
	}
}
