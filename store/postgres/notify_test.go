package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// recv returns the next payload on ch; a test that gets nothing within a
// generous bound fails rather than hangs.
func recv(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return p
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing received", what)
	}
	return ""
}

// closed waits for ch to be closed, draining it.
func closed(t *testing.T, ch <-chan string, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("%s: channel not closed", what)
		}
	}
}

func TestListenNotifyAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sts := twoInstances(t)
	for _, st := range sts {
		if !st.SupportsListenNotify() {
			t.Fatal("SupportsListenNotify() = false")
		}
	}
	onB, err := sts[1].Listen(ctx, "runs")
	if err != nil {
		t.Fatal(err)
	}
	onA, err := sts[0].Listen(ctx, "runs")
	if err != nil {
		t.Fatal(err)
	}
	other, err := sts[1].Listen(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"r1", "r2", "", "r3 ✓"} {
		if err := sts[0].Notify(ctx, "runs", p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"r1", "r2", "", "r3 ✓"} {
		if got := recv(t, onB, "instance B"); got != p {
			t.Errorf("B got %q, want %q", got, p)
		}
		if got := recv(t, onA, "instance A (the sender)"); got != p {
			t.Errorf("A got %q, want %q", got, p)
		}
	}
	// Notifications reach a listener in commit order: had "runs" leaked to
	// "other", it would arrive before this one.
	if err := sts[0].Notify(ctx, "other", "marker"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, other, "other channel"); got != "marker" {
		t.Errorf("other channel got %q first, want marker", got)
	}
}

func TestListenSchemasIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := openFresh(t), openFresh(t)
	onB, err := b.Listen(ctx, "runs")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(ctx, "runs", "leak"); err != nil {
		t.Fatal(err)
	}
	if err := b.Notify(ctx, "runs", "marker"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, onB, "schema B"); got != "marker" {
		t.Errorf("a store in another schema heard %q", got)
	}
}

func TestListenEnds(t *testing.T) {
	t.Parallel()
	st := openFresh(t)
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := st.Listen(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	keep, err := st.Listen(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	closed(t, sub, "cancelled subscription")
	if err := st.Notify(t.Context(), "c", "still here"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, keep, "other subscription"); got != "still here" {
		t.Errorf("got %q", got)
	}
	if _, err := st.Listen(ctx, "c"); !errors.Is(err, context.Canceled) {
		t.Errorf("Listen with a done context: %v", err)
	}
	st.Close()
	closed(t, keep, "subscription after Close")
	if _, err := st.Listen(t.Context(), "c"); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("Listen after Close: %v", err)
	}
	if err := st.Notify(t.Context(), "c", "x"); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("Notify after Close: %v", err)
	}
}

func TestListenNotifyInvalid(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	long := strings.Repeat("c", 64)
	for name, err := range map[string]error{
		"notify no channel":  st.Notify(ctx, "", "x"),
		"notify long":        st.Notify(ctx, long, "x"),
		"notify big payload": st.Notify(ctx, "c", strings.Repeat("p", postgres.MaxPayload+1)),
		"notify NUL":         st.Notify(ctx, "c", "a\x00b"),
	} {
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	for _, ch := range []string{"", long} {
		if _, err := st.Listen(ctx, ch); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Listen(%q): %v, want ErrInvalid", ch, err)
		}
	}
	if err := st.Notify(ctx, "c", strings.Repeat("p", postgres.MaxPayload)); err != nil {
		t.Errorf("payload of MaxPayload bytes: %v", err)
	}
}

// TestListenReconnects kills the listener's backend: the subscription is
// told (an empty payload), and later notifications arrive again.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	sub, err := st.Listen(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t)
	var killed bool
	err = conn.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND strpos(query, $1) > 0`, st.Schema()+".c").Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("terminate the listener backend: %v, %v", killed, err)
	}
	if got := recv(t, sub, "after the connection broke"); got != "" {
		t.Errorf("got %q, want the empty wake-up payload", got)
	}
	if err := st.Notify(ctx, "c", "again"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, sub, "after reconnecting"); got != "again" {
		t.Errorf("got %q, want again", got)
	}
}

// TestListenOverflowOwesEmpty: a reader that falls behind loses payloads
// (its channel is full), never silently: once it has room it gets the
// empty payload that says "re-read everything".
func TestListenOverflowOwesEmpty(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	sub, err := st.Listen(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	const extra = 10
	for i := range postgres.ListenBuffer + extra {
		if err := st.Notify(ctx, "c", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for len(sub) < postgres.ListenBuffer {
		time.Sleep(5 * time.Millisecond) // the listener fills the channel
	}
	for i := range postgres.ListenBuffer {
		if got := recv(t, sub, "buffered"); got != fmt.Sprint(i) {
			t.Fatalf("payload %d = %q", i, got)
		}
	}
	// Whatever of the last payloads did not fit must be made up for by an
	// empty payload.
	rest := map[string]bool{}
	for len(rest) < extra {
		p := recv(t, sub, "after the overflow")
		if p == "" {
			return
		}
		rest[p] = true
	}
}
