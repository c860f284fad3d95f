package storetest

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testRunCount: a store.RunCounter counts an agent's runs by status
// exactly as RunList lists them, other agents apart.
func testRunCount(t *testing.T, h *harness) {
	h.sub(t, "ByStatus", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		statuses := []steptype.RunStatus{steptype.RunCompleted, steptype.RunFailed, steptype.RunCompleted, steptype.RunCancelled, steptype.RunWaiting}
		want := map[steptype.RunStatus]int{}
		for i, status := range statuses {
			agent := "counted"
			if i == 2 {
				agent = "other"
			} else {
				want[status]++
			}
			sid := fmt.Sprintf("s%d", i)
			mustSession(t, st, sid)
			if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: fmt.Sprintf("r%d", i), SessionID: sid, Agent: agent, Status: status, CreatedAt: t0}}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.RunCount(ctx, &store.RunCountParams{Agent: "counted"})
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("RunCount = %v, %v; want %v", got, err, want)
		}
		// A status change moves the run from one count to the other.
		waiting, cancelled := steptype.RunWaiting, steptype.RunCancelled
		if _, err := st.RunUpdate(ctx, &store.RunUpdateParams{ID: "r4", ExpectStatus: []steptype.RunStatus{waiting}, Status: &cancelled}); err != nil {
			t.Fatal(err)
		}
		want[waiting]--
		want[cancelled]++
		delete(want, waiting)
		if got, err := st.RunCount(ctx, &store.RunCountParams{Agent: "counted"}); err != nil || !maps.Equal(got, want) {
			t.Fatalf("RunCount after a status change = %v, %v; want %v", got, err, want)
		}
		if got, err := st.RunCount(ctx, &store.RunCountParams{Agent: "nobody"}); err != nil || len(got) != 0 {
			t.Fatalf("RunCount(nobody) = %v, %v; want empty", got, err)
		}
		if _, err := st.RunCount(ctx, &store.RunCountParams{}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("RunCount without agent = %v; want ErrInvalid", err)
		}
	})
}
