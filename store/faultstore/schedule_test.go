package faultstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/faultstore"
	"github.com/stepwise-run/stepwise/store/memory"
)

// outcomes makes n sequential session creates and returns, per call,
// what happened: "ok", or the fault.
func outcomes(t *testing.T, cfg faultstore.Config, n int) ([]string, store.Store) {
	t.Helper()
	inner := memory.New()
	st := faultstore.New(inner, cfg)
	var out []string
	for i := range n {
		_, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: fmt.Sprintf("s%d", i)})
		switch {
		case err == nil:
			out = append(out, "ok")
		case !errors.Is(err, faultstore.ErrInjected):
			t.Fatalf("call %d: %v is not injected", i, err)
		case errors.Is(err, store.ErrStorageFull):
			out = append(out, "full")
		case errors.Is(err, store.ErrUnavailable):
			out = append(out, "unavailable")
		default:
			t.Fatalf("call %d: %v wraps no sentinel", i, err)
		}
	}
	return out, inner
}

// A schedule is a function of its seed: the same seed gives the same
// faults, another seed others; an error writes nothing, an ambiguous
// commit writes, a full disk writes nothing.
func TestScheduleReplaysFromSeed(t *testing.T) {
	t.Parallel()
	cfg := faultstore.Config{Seed: 42, Error: 0.2, Full: 0.1}
	a, _ := outcomes(t, cfg, 200)
	b, _ := outcomes(t, cfg, 200)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 42 twice: different schedules")
	}
	cfg.Seed = 43
	if c, _ := outcomes(t, cfg, 200); slices.Equal(a, c) {
		t.Fatalf("seeds 42 and 43: same schedule")
	}
	if n := count(a, "unavailable"); n < 20 || n > 60 {
		t.Fatalf("%d errors in 200 calls at rate 0.2", n)
	}
	// What failed before the store was not written; an ambiguous commit
	// was.
	for _, tc := range []struct {
		cfg       faultstore.Config
		outcome   string
		committed bool
	}{
		{faultstore.Config{Seed: 5, Error: 0.3}, "unavailable", false},
		{faultstore.Config{Seed: 5, Full: 0.3}, "full", false},
		{faultstore.Config{Seed: 5, Ambiguous: 0.3}, "unavailable", true},
	} {
		out, inner := outcomes(t, tc.cfg, 100)
		if count(out, tc.outcome) == 0 {
			t.Fatalf("%+v: no %s in 100 calls", tc.cfg, tc.outcome)
		}
		for i, o := range out {
			_, err := inner.SessionGet(t.Context(), &store.SessionGetParams{ID: fmt.Sprintf("s%d", i)})
			if stored := err == nil; stored != (o == "ok" || tc.committed) {
				t.Fatalf("%+v: call %d answered %s, stored %v", tc.cfg, i, o, stored)
			}
		}
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// Lease renewals fail on the schedule and renew nothing.
func TestRenewFail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inner := memory.New()
	st := faultstore.New(inner, faultstore.Config{Seed: 3, RenewFail: 0.5})
	if _, err := inner.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := inner.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := inner.RunClaim(ctx, &store.RunClaimParams{Owner: "o", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range 40 {
		ids, err := st.RunLeaseRenew(ctx, &store.RunLeaseRenewParams{Owner: "o", IDs: []string{"r"}, Lease: time.Minute})
		switch {
		case err == nil && len(ids) == 1:
		case errors.Is(err, faultstore.ErrInjected) && ids == nil:
			failed++
		default:
			t.Fatalf("renew: %v %v", ids, err)
		}
	}
	if failed == 0 || failed == 40 || st.Injected()[faultstore.FaultRenewFail] != failed {
		t.Fatalf("%d of 40 renewals failed, counted %v", failed, st.Injected())
	}
}

// chanNotifier is an in-process Notifier for the notification faults.
type chanNotifier struct{ ch chan string }

func (n *chanNotifier) Notify(ctx context.Context, channel, payload string) error {
	n.ch <- payload
	return nil
}

func (n *chanNotifier) Listen(ctx context.Context, channel string) (<-chan string, error) {
	return n.ch, nil
}

type notifyingStore struct {
	store.Store
	n *chanNotifier
}

func (s notifyingStore) Notifier() store.Notifier { return s.n }

// Notifications are lost or delayed on the schedule; each lost one is
// replaced by the empty payload of a reconnect, which is never lost.
func TestNotificationsLostOrDelayed(t *testing.T) {
	t.Parallel()
	n := &chanNotifier{ch: make(chan string, 256)}
	st := faultstore.New(notifyingStore{memory.New(), n}, faultstore.Config{Seed: 9, NotifyLost: 0.3, NotifyDelay: 0.3, MaxNotifyDelay: time.Millisecond})
	ch, err := st.Notifier().Listen(t.Context(), store.ChannelChanges)
	if err != nil {
		t.Fatal(err)
	}
	const sent = 100
	for i := range sent {
		n.ch <- fmt.Sprint(i)
	}
	n.ch <- ""
	got, reconnects := 0, 0
	for p := range ch {
		if p == "" {
			if reconnects++; reconnects > st.Injected()[faultstore.FaultNotifyLost] {
				break // the one sent last
			}
			continue
		}
		got++
	}
	inj := st.Injected()
	if got+inj[faultstore.FaultNotifyLost] != sent || reconnects != inj[faultstore.FaultNotifyLost]+1 || inj[faultstore.FaultNotifyLost] == 0 || inj[faultstore.FaultNotifyDelay] == 0 {
		t.Fatalf("received %d of %d, injected %v", got, sent, inj)
	}
}

// A store set down fails every call, writes nothing, whatever the
// schedule, and works again once set up.
func TestSetDown(t *testing.T) {
	t.Parallel()
	inner := memory.New()
	st := faultstore.New(inner, faultstore.Config{Seed: 1})
	st.SetEnabled(false)
	st.SetDown(true)
	_, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: "down"})
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("create while down: %v, want an injected store.ErrUnavailable", err)
	}
	if _, err := inner.SessionGet(t.Context(), &store.SessionGetParams{ID: "down"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the create while down reached the store: %v", err)
	}
	if _, err := st.SessionList(t.Context(), &store.SessionListParams{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("list while down: %v", err)
	}
	st.SetDown(false)
	if _, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: "up"}); err != nil {
		t.Fatalf("create once up: %v", err)
	}
}

// byTimeOutcomes makes n step appends under a ByTime schedule, one per
// instant of a fake clock, each step measured with the resource use use(i)
// gives, and returns whether each drew an injected fault.
func byTimeOutcomes(t *testing.T, seed int64, n int, use func(i int) steptype.Metrics) []bool {
	t.Helper()
	var out []bool
	synctest.Test(t, func(t *testing.T) {
		st := faultstore.New(memory.New(), faultstore.Config{Seed: seed, Error: 0.3, ByTime: true})
		for i := range n {
			time.Sleep(time.Millisecond)
			m := use(i)
			m.Attempt = 1
			s := &steptype.Step{ID: "0190f5c2-8a3b-7c1d-9e2f-0a1b2c3d4e5f", SessionID: "s", RunID: "r", Kind: steptype.KindCustom, Name: "work", Metrics: m}
			_, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{s}})
			out = append(out, errors.Is(err, faultstore.ErrInjected))
		}
	})
	return out
}

// A ByTime schedule leaves a step's measured resource use out of its key:
// it is the machine's reading (the process's CPU time and allocation),
// which no seed fixes, so steps that differ in it alone draw the same
// faults; another seed draws others.
func TestByTimeIgnoresResourceUse(t *testing.T) {
	a := byTimeOutcomes(t, 11, 100, func(i int) steptype.Metrics {
		return steptype.Metrics{CPUTime: time.Duration(1000 + i), AllocBytes: int64(4096 * i), AllocObjects: int64(i), OverlappingSteps: i % 3}
	})
	b := byTimeOutcomes(t, 11, 100, func(i int) steptype.Metrics {
		return steptype.Metrics{CPUTime: time.Duration(777_777 * i), AllocBytes: int64(13 + i*i), AllocObjects: 5}
	})
	if !slices.Equal(a, b) {
		t.Fatalf("seed 11: steps differing only in resource use drew different faults:\n%v\n%v", a, b)
	}
	if n := len(slices.DeleteFunc(slices.Clone(a), func(f bool) bool { return !f })); n < 10 || n > 50 {
		t.Fatalf("%d faults in 100 calls at rate 0.3", n)
	}
	c := byTimeOutcomes(t, 12, 100, func(int) steptype.Metrics { return steptype.Metrics{} })
	if slices.Equal(a, c) {
		t.Fatalf("seeds 11 and 12: the same faults")
	}
}
