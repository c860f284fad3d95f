package transfer_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/transfer"
)

func source(t *testing.T, sessions, steps int) *memory.Store {
	t.Helper()
	ctx := context.Background()
	st := memory.New()
	for i := range sessions {
		sid := fmt.Sprintf("s%03d", i)
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: "a"}); err != nil {
			t.Fatal(err)
		}
		for j := range steps {
			_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: fmt.Sprintf("%s-%d", sid, j),
				SessionID: sid, Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "x"}}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

var errGone = errors.New("destination went away")

// failing is a destination that fails every step import after the first
// n, as a server that goes away does.
type failing struct {
	*memory.Store
	left int
}

func (f *failing) StepImport(ctx context.Context, p *store.StepImportParams) error {
	if f.left == 0 {
		return errGone
	}
	f.left--
	return f.Store.StepImport(ctx, p)
}

// TestCopyResumesFromCheckpoint interrupts a copy, then runs it again with
// the same checkpoint: it skips the finished sessions and copies the rest.
func TestCopyResumesFromCheckpoint(t *testing.T) {
	ctx := context.Background()
	src := source(t, 10, 4)
	dst := &failing{Store: memory.New(), left: 4}
	cp := &transfer.FileCheckpoint{Path: filepath.Join(t.TempDir(), "ckpt"), From: "a", To: "b", Interval: -1}
	_, err := transfer.Copy(ctx, src, dst, transfer.Options{PageSize: 4, Checkpoint: cp})
	if !errors.Is(err, errGone) {
		t.Fatalf("interrupted copy: %v", err)
	}
	after, err := cp.Load()
	if err != nil || after != "s003" {
		t.Fatalf("checkpoint after the interruption = %q, %v, want s003", after, err)
	}
	dst.left = -1
	rep, err := transfer.Copy(ctx, src, dst, transfer.Options{PageSize: 4, Checkpoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != 4 || rep.Sessions != 6 || rep.ResumedAfter != "s003" {
		t.Errorf("resumed copy = %+v, want 4 skipped, 6 copied", rep)
	}
	if after, _ := cp.Load(); after != "" {
		t.Errorf("checkpoint left after the copy finished: %q", after)
	}
	n, err := dst.StepCount(ctx, &store.StepCountParams{SessionID: "s009"})
	if err != nil || n != 4 {
		t.Errorf("last session on the destination: %d steps, %v", n, err)
	}
	other := &transfer.FileCheckpoint{Path: cp.Path, From: "a", To: "c"}
	if err := cp.Save("s001", false); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Load(); err == nil {
		t.Error("a checkpoint of another copy was accepted")
	}
}

// lying is a destination whose reads differ from what was written.
type lying struct{ *memory.Store }

func (l lying) StepList(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	steps, err := l.Store.StepList(ctx, p)
	if len(steps) > 0 {
		steps[0].Content = "altered"
	}
	return steps, err
}

// TestCopyVerifies: a destination that reads back other content than the
// source's fails the copy with ErrVerify.
func TestCopyVerifies(t *testing.T) {
	var bad *transfer.SessionReport
	_, err := transfer.Copy(context.Background(), source(t, 2, 3), lying{memory.New()}, transfer.Options{
		Verified: func(r *transfer.SessionReport) {
			if !r.OK && bad == nil {
				bad = r
			}
		}})
	if !errors.Is(err, transfer.ErrVerify) || bad == nil || bad.Source.Hash == bad.Dst.Hash || bad.Source.Steps != bad.Dst.Steps {
		t.Fatalf("copy into a lying destination: %v, report %+v", err, bad)
	}
}
