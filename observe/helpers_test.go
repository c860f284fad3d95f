package observe_test

import (
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// seed creates session s, run r, and committed steps with the given ids.
func seed(t *testing.T, st store.Store, steps ...*steptype.Step) {
	t.Helper()
	if _, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: "s", Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(t.Context(), &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "a"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		s.SessionID, s.RunID = "s", "r"
		if s.Kind == "" {
			s.Kind = steptype.KindCustom
		}
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		if _, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{s}}); err != nil {
			t.Fatal(err)
		}
	}
}
