package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// call is one store method with fixed parameters.
type call struct {
	name string
	fn   func(ctx context.Context, st store.Store) error
}

func calls(session, step, run string) []call {
	return []call{
		{"SessionGet", func(ctx context.Context, st store.Store) error {
			_, err := st.SessionGet(ctx, &store.SessionGetParams{ID: session})
			return err
		}},
		{"SessionDelete", func(ctx context.Context, st store.Store) error {
			return st.SessionDelete(ctx, &store.SessionDeleteParams{ID: session})
		}},
		{"SessionFork", func(ctx context.Context, st store.Store) error {
			_, err := st.SessionFork(ctx, &store.SessionForkParams{ID: "new-fork", ParentID: session, Sequence: 1})
			return err
		}},
		{"StepAppend", func(ctx context.Context, st store.Store) error {
			_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{newStep(session, "new-step")}})
			return err
		}},
		{"StepList", func(ctx context.Context, st store.Store) error {
			_, err := st.StepList(ctx, &store.StepListParams{SessionID: session})
			return err
		}},
		{"StepGet", func(ctx context.Context, st store.Store) error {
			_, err := st.StepGet(ctx, &store.StepGetParams{ID: step})
			return err
		}},
		{"StepGetBySequence", func(ctx context.Context, st store.Store) error {
			_, err := st.StepGet(ctx, &store.StepGetParams{SessionID: session, Sequence: 1})
			return err
		}},
		{"StepLast", func(ctx context.Context, st store.Store) error {
			_, err := st.StepLast(ctx, &store.StepLastParams{SessionID: session})
			return err
		}},
		{"StepCount", func(ctx context.Context, st store.Store) error {
			_, err := st.StepCount(ctx, &store.StepCountParams{SessionID: session})
			return err
		}},
		{"StepTruncate", func(ctx context.Context, st store.Store) error {
			_, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: session, StartSeq: 1})
			return err
		}},
		{"StepResolve", func(ctx context.Context, st store.Store) error {
			_, err := st.StepResolve(ctx, &store.StepResolveParams{ID: step, Status: steptype.StepCompleted})
			return err
		}},
		{"RunCreate", func(ctx context.Context, st store.Store) error {
			_, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "new-run", SessionID: session, Agent: "a"}})
			return err
		}},
		{"RunGet", func(ctx context.Context, st store.Store) error {
			_, err := st.RunGet(ctx, &store.RunGetParams{ID: run})
			return err
		}},
		{"RunUpdate", func(ctx context.Context, st store.Store) error {
			_, err := st.RunUpdate(ctx, &store.RunUpdateParams{ID: run, Cursor: ptr("x")})
			return err
		}},
		{"RunClaim", func(ctx context.Context, st store.Store) error {
			_, err := st.RunClaim(ctx, &store.RunClaimParams{ID: run, Owner: "o", Lease: time.Minute})
			return err
		}},
	}
}

func testErrors(t *testing.T, h *harness) {
	h.sub(t, "UnknownIDs", func(t *testing.T, st store.Store) {
		for _, c := range calls("no-session", "no-step", "no-run") {
			wantErr(t, c.name, c.fn(t.Context(), st), store.ErrNotFound)
		}
	})
	h.sub(t, "EmptyIDs", func(t *testing.T, st store.Store) {
		for _, c := range calls("", "", "") {
			if c.name == "RunClaim" {
				continue // an empty id means any run
			}
			wantErr(t, c.name, c.fn(t.Context(), st), store.ErrInvalid)
		}
	})
	h.sub(t, "Closed", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		fill(t, st, "s1", "x", 1)
		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for _, c := range calls("s1", "x-1", "r1") {
			if err := c.fn(t.Context(), st); err == nil {
				t.Errorf("%s after Close: no error", c.name)
			}
		}
		if err := st.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}
