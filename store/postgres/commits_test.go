package postgres

import (
	"context"
	"testing"
	"time"
)

func TestCommitsAfterWaitsForALaterCommit(t *testing.T) {
	var c commits
	before := c.begin() // sent before the mark: does not count
	mark := c.mark()
	c.succeeded(before)
	if c.after(t.Context(), mark, time.Millisecond) {
		t.Fatal("a commit sent before the mark counted")
	}
	n := c.begin()
	go func() {
		time.Sleep(5 * time.Millisecond)
		c.succeeded(n)
	}()
	if !c.after(t.Context(), mark, 5*time.Second) {
		t.Fatal("a commit sent after the mark, which succeeded, did not count")
	}
	// A failed commit (never succeeded) does not count.
	mark = c.mark()
	c.begin()
	if c.after(t.Context(), mark, 2*time.Millisecond) {
		t.Fatal("a commit that did not succeed counted")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if c.after(ctx, mark, time.Minute) {
		t.Fatal("after returned true on an ended context")
	}
}
