package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/transfer"
)

// seedSession imports a session with n own steps "<id>-<seq>", last active
// at updated, each step with 10 input tokens.
func seedSession(t *testing.T, st store.Store, id, parent string, forkSeq int64, n int, agent string, updated time.Time) {
	t.Helper()
	s := &steptype.Session{ID: id, Agent: agent, ParentSessionID: parent, ForkSequence: forkSeq,
		LastSequence: forkSeq + int64(n), InputTokens: 10 * int64(n), CreatedAt: updated.Add(-time.Hour), UpdatedAt: updated}
	if err := st.SessionImport(t.Context(), &store.SessionImportParams{Session: s}); err != nil {
		t.Fatalf("SessionImport(%s): %v", id, err)
	}
	var steps []*steptype.Step
	for i := 1; i <= n; i++ {
		seq := forkSeq + int64(i)
		st := newStep(id, fmt.Sprintf("%s-%d", id, seq))
		st.Sequence, st.CreatedAt = seq, updated.Add(time.Duration(i)*time.Millisecond)
		st.Metrics.InputTokens = 10
		steps = append(steps, st)
	}
	for len(steps) > 0 {
		k := min(len(steps), 300)
		if err := st.StepImport(t.Context(), &store.StepImportParams{Steps: steps[:k]}); err != nil {
			t.Fatalf("StepImport(%s): %v", id, err)
		}
		steps = steps[k:]
	}
}

func testImport(t *testing.T, h *harness) {
	h.sub(t, "Verbatim", func(t *testing.T, st store.Store) {
		at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
		seedSession(t, st, "p", "", 0, 4, "a", at)
		seedSession(t, st, "f", "p", 2, 3, "a", at.Add(time.Minute))
		p := getSession(t, st, "p")
		if !p.UpdatedAt.Equal(at) || p.LastSequence != 4 || p.InputTokens != 40 {
			t.Errorf("imported session = %+v, want updated %v, last 4, 40 tokens", p, at)
		}
		wantView(t, "fork", list(t, st, &store.StepListParams{SessionID: "f"}), "p/1/p-1 p/2/p-2 f/3/f-3 f/4/f-4 f/5/f-5")
		got, err := st.StepGet(t.Context(), &store.StepGetParams{ID: "f-4"})
		if err != nil || !got.CreatedAt.Equal(at.Add(time.Minute+2*time.Millisecond)) {
			t.Errorf("StepGet(f-4) = %v, %v: want its imported time", got, err)
		}
		// Idempotent: the same rows again are accepted.
		seedSession(t, st, "f", "p", 2, 3, "a", at.Add(time.Minute))
		// New steps append after the imported ones.
		mustAppend(t, st, newStep("f", "f-6"))
		wantView(t, "appended", list(t, st, &store.StepListParams{SessionID: "f", StartSeq: 6}), "f/6/f-6")
	})
	h.sub(t, "PendingInputExpiry", func(t *testing.T, st store.Store) {
		at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
		sess := &steptype.Session{ID: "s", Agent: "a", LastSequence: 1, CreatedAt: at, UpdatedAt: at}
		if err := st.SessionImport(t.Context(), &store.SessionImportParams{Session: sess}); err != nil {
			t.Fatal(err)
		}
		w := &steptype.Step{ID: "ask", SessionID: "s", Sequence: 1, Kind: steptype.KindInput, Status: steptype.StepWaiting,
			CreatedAt: at, Inputs: json.RawMessage(`{"prompt":"ok?","expires_at":"2025-03-02T00:00:00Z"}`)}
		if err := st.StepImport(t.Context(), &store.StepImportParams{Steps: []*steptype.Step{w}}); err != nil {
			t.Fatal(err)
		}
		got, err := st.StepExpiring(t.Context(), &store.StepExpiringParams{Before: at.Add(48 * time.Hour)})
		if err != nil || len(got) != 1 || got[0].ID != "ask" {
			t.Errorf("StepExpiring after importing a waiting request = %v, %v: want it due", got, err)
		}
	})
	h.sub(t, "Notifications", func(t *testing.T, st store.Store) {
		n := st.Notifier()
		if n == nil {
			t.Skip("the driver has no Notifier (Options.Notifier is false): changes are seen in-process only")
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch, err := n.Listen(ctx, store.ChannelChanges)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
		seedSession(t, st, "s", "", 0, 2, "a", at)
		r := &steptype.Run{ID: "r", SessionID: "s", Agent: "a", Status: steptype.RunQueued, CreatedAt: at, UpdatedAt: at}
		if err := st.RunImport(ctx, &store.RunImportParams{Runs: []*steptype.Run{r}}); err != nil {
			t.Fatal(err)
		}
		// Another instance serving the destination learns of the steps and
		// of the queued run at once.
		want := []string{store.ChangeStep("s", 2), store.ChangeRun("s", "r", "queued")}
		var got []string
		timeout := time.After(10 * time.Second)
		for !containsAll(got, want) {
			select {
			case p := <-ch:
				got = append(got, p)
			case <-timeout:
				t.Fatalf("notifications %q, want %q among them", got, want)
			}
		}
	})
	h.sub(t, "Conflicts", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
		seedSession(t, st, "s", "", 0, 2, "a", at)
		other := &steptype.Session{ID: "s", Agent: "b", LastSequence: 2, InputTokens: 20, CreatedAt: at.Add(-time.Hour), UpdatedAt: at}
		wantErr(t, "another session under the id", st.SessionImport(ctx, &store.SessionImportParams{Session: other}), store.ErrConflict)
		changed := newStep("s", "s-1")
		changed.Sequence, changed.Content = 1, "changed"
		wantErr(t, "another step under the id", st.StepImport(ctx, &store.StepImportParams{Steps: []*steptype.Step{changed}}), store.ErrConflict)
		taken := newStep("s", "x")
		taken.Sequence = 2
		fresh := newStep("s", "y")
		fresh.Sequence = 3
		err := st.StepImport(ctx, &store.StepImportParams{Steps: []*steptype.Step{fresh, taken}})
		wantErr(t, "another step at the sequence", err, store.ErrConflict)
		if _, err := st.StepGet(ctx, &store.StepGetParams{ID: "y"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a failed import wrote step y: %v", err)
		}
		orphan := &steptype.Session{ID: "o", ParentSessionID: "nope", ForkSequence: 1, LastSequence: 1, CreatedAt: at}
		wantErr(t, "fork of a missing parent", st.SessionImport(ctx, &store.SessionImportParams{Session: orphan}), store.ErrNotFound)
		r := &steptype.Run{ID: "r", SessionID: "s", Agent: "a", Status: steptype.RunWaiting, Cursor: "ask", CreatedAt: at, UpdatedAt: at}
		if err := st.RunImport(ctx, &store.RunImportParams{Runs: []*steptype.Run{r}}); err != nil {
			t.Fatal(err)
		}
		if err := st.RunImport(ctx, &store.RunImportParams{Runs: []*steptype.Run{r}}); err != nil {
			t.Errorf("RunImport of the same run again: %v", err)
		}
		r2 := *r
		r2.Cursor = "other"
		wantErr(t, "another run under the id", st.RunImport(ctx, &store.RunImportParams{Runs: []*steptype.Run{&r2}}), store.ErrConflict)
		got, err := st.RunGet(ctx, &store.RunGetParams{ID: "r"})
		if err != nil || got.Cursor != "ask" || got.Status != steptype.RunWaiting || !got.CreatedAt.Equal(at) {
			t.Errorf("imported run = %+v, %v", got, err)
		}
	})
	h.sub(t, "Detach", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
		seedSession(t, st, "p", "", 0, 3, "a", at)
		seedSession(t, st, "f", "p", 2, 1, "a", at)
		wantErr(t, "detach without copies", st.SessionDetach(ctx, &store.SessionDetachParams{ID: "f"}), store.ErrConflict)
		c := newStep("f", "c1")
		c.Sequence = 1
		if err := st.StepImport(ctx, &store.StepImportParams{Steps: []*steptype.Step{c}}); err != nil {
			t.Fatal(err)
		}
		wantView(t, "before the cut", list(t, st, &store.StepListParams{SessionID: "f"}), "p/1/p-1 p/2/p-2 f/3/f-3")
		wantErr(t, "detach with a copy missing", st.SessionDetach(ctx, &store.SessionDetachParams{ID: "f"}), store.ErrConflict)
		c2 := newStep("f", "c2")
		c2.Sequence = 2
		if err := st.StepImport(ctx, &store.StepImportParams{Steps: []*steptype.Step{c2}}); err != nil {
			t.Fatal(err)
		}
		if err := st.SessionDetach(ctx, &store.SessionDetachParams{ID: "f", InputTokens: 20}); err != nil {
			t.Fatal(err)
		}
		wantView(t, "after the cut", list(t, st, &store.StepListParams{SessionID: "f"}), "f/1/c1 f/2/c2 f/3/f-3")
		f := getSession(t, st, "f")
		if f.ParentSessionID != "" || f.ForkSequence != 0 || f.InputTokens != 30 || f.LastSequence != 3 {
			t.Errorf("detached fork = %+v", f)
		}
		if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "p"}); err != nil {
			t.Errorf("delete the former parent: %v", err)
		}
		wantView(t, "after the parent is gone", list(t, st, &store.StepListParams{SessionID: "f"}), "f/1/c1 f/2/c2 f/3/f-3")
	})
	h.sub(t, "Export", func(t *testing.T, st store.Store) {
		for _, id := range []string{"c", "a", "b"} {
			mustSession(t, st, id)
		}
		got, err := st.SessionExport(t.Context(), &store.SessionExportParams{AfterID: "a", Limit: 1})
		if err != nil || len(got) != 1 || got[0].ID != "b" {
			t.Errorf("SessionExport(after a, 1) = %v, %v, want [b]", got, err)
		}
		_, err = st.SessionExport(t.Context(), &store.SessionExportParams{Limit: -1})
		wantErr(t, "negative limit", err, store.ErrInvalid)
	})
	h.sub(t, "Copy", func(t *testing.T, src store.Store) { testCopy(t, h, src) })
}

// testCopy copies a database with forks, a waiting run, observation data
// and vectors into a second store of the same driver, then checks it is
// identical, that copying again is a no-op, and that a destination holding
// different data is refused.
func testCopy(t *testing.T, h *harness, src store.Store) {
	ctx := t.Context()
	seedCopySource(t, src)
	dst := h.open(t)
	var reports []*transfer.SessionReport
	rep, err := transfer.Copy(ctx, src, dst, transfer.Options{PageSize: 3, Verified: func(r *transfer.SessionReport) { reports = append(reports, r) }})
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if rep.Sessions != 3 || rep.Steps != 9 || len(reports) != 3 {
		t.Errorf("Copy report = %+v (%d verified), want 3 sessions, 9 steps", rep, len(reports))
	}
	for _, id := range []string{"p", "f", "g"} {
		sameJSON(t, "session "+id, getSession(t, dst, id), getSession(t, src, id))
		sameJSON(t, "steps of "+id, list(t, dst, &store.StepListParams{SessionID: id}), list(t, src, &store.StepListParams{SessionID: id}))
	}
	r, err := dst.RunGet(ctx, &store.RunGetParams{ID: "run-wait"})
	if err != nil || r.Status != steptype.RunWaiting || r.Cursor != "ask" || string(r.State) != `{"n":1}` {
		t.Errorf("copied waiting run = %+v, %v", r, err)
	}
	r, err = dst.RunGet(ctx, &store.RunGetParams{ID: "run-lease"})
	if err != nil || r.LeaseOwner != "" || !r.LeaseExpires.IsZero() || r.Status != steptype.RunRunning {
		t.Errorf("copied running run = %+v, %v: want its lease cleared", r, err)
	}
	evs, err := dst.StepEventList(ctx, &store.StepEventListParams{SessionID: "p"})
	if err != nil || len(evs) != 2 || evs[1].BlobHash == "" || evs[1].Index != 1 {
		t.Errorf("copied step events = %+v, %v", evs, err)
	}
	e, err := dst.EvalGet(ctx, &store.EvalGetParams{ID: "ev1"})
	if err != nil || e.Score != 0.5 {
		t.Errorf("copied eval = %+v, %v", e, err)
	}
	if b, err := dst.BlobGet(ctx, &store.BlobGetParams{Hash: store.BlobHash([]byte("\x89PNG shot"))}); err != nil || string(b.Data) != "\x89PNG shot" {
		t.Errorf("copied attachment blob = %v, %v", b, err)
	}
	if a, err := dst.AnnotationList(ctx, &store.AnnotationListParams{SessionID: "p"}); err != nil || len(a) != 1 || a[0].Annotations.Goal != "find the population" {
		t.Errorf("copied annotations = %+v, %v", a, err)
	}
	for _, get := range []func(o store.ObservationStore) (any, error){
		func(o store.ObservationStore) (any, error) {
			return o.DatasetGet(ctx, &store.DatasetGetParams{ID: "ds"})
		},
		func(o store.ObservationStore) (any, error) {
			return o.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: "ds"})
		},
		func(o store.ObservationStore) (any, error) {
			return o.ExperimentGet(ctx, &store.ExperimentGetParams{ID: "x"})
		},
		func(o store.ObservationStore) (any, error) {
			return o.ExperimentItemList(ctx, &store.ExperimentItemListParams{ExperimentID: "x"})
		},
	} {
		want, err := get(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := get(dst)
		if err != nil {
			t.Errorf("copied dataset or experiment: %v", err)
		}
		sameJSON(t, "copied dataset or experiment", got, want)
	}
	n, err := dst.VectorCount(ctx, &store.VectorCountParams{Embedder: "e"})
	if err != nil || len(n) != 1 || n[0].Count != 2 {
		t.Errorf("copied vectors = %v, %v", n, err)
	}
	// Again: every row is there already; nothing changes.
	if _, err := transfer.Copy(ctx, src, dst, transfer.Options{}); err != nil {
		t.Errorf("second Copy: %v", err)
	}
	claimed, err := dst.RunClaim(ctx, &store.RunClaimParams{Owner: "new", Lease: time.Minute, ID: "run-lease"})
	if err != nil || len(claimed) != 1 {
		t.Errorf("claim the copied running run = %v, %v: want it claimable", claimed, err)
	}
	// A destination with other data under the same ids is refused.
	other := h.open(t)
	mustSession(t, other, "f")
	_, err = transfer.Copy(ctx, src, other, transfer.Options{})
	wantErr(t, "copy over other data", err, store.ErrConflict)
	wantSessions(t, "a refused copy writes nothing", other, "f")
}

func seedCopySource(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustSession(t, st, "p")
	steps := fill(t, st, "p", "p", 4)
	mustFork(t, st, "f", "p", 2)
	fill(t, st, "f", "f", 3)
	mustFork(t, st, "g", "f", 4)
	fill(t, st, "g", "g", 2)
	for _, r := range []*steptype.Run{
		{ID: "run-wait", SessionID: "f", Agent: "agent", Status: steptype.RunWaiting, Cursor: "ask", State: json.RawMessage(`{"n":1}`)},
		{ID: "run-lease", SessionID: "p", Agent: "agent"},
	} {
		if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: r}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.RunClaim(ctx, &store.RunClaimParams{Owner: "old", Lease: time.Hour, ID: "run-lease"}); err != nil {
		t.Fatal(err)
	}
	big := `{"x":"` + strings.Repeat("x", store.InlinePayloadLimit+10) + `"}`
	_, err := st.StepEventAppend(ctx, &store.StepEventAppendParams{Events: []*store.StepEvent{
		{ID: "e1", StepID: steps[0].ID, Type: "http", Payload: json.RawMessage(`{"a":1}`)},
		{ID: "e2", StepID: steps[0].ID, Type: "http", Payload: json.RawMessage(big)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.EvalPut(ctx, &store.EvalPutParams{Eval: &store.Eval{ID: "ev1", TargetKind: store.TargetStep, TargetID: steps[1].ID,
		Name: "q", Source: store.SourceUser, Score: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	goal := "find the population"
	if _, err := st.AnnotationPut(ctx, &store.AnnotationPutParams{StepID: steps[2].ID, Goal: &goal}); err != nil {
		t.Fatal(err)
	}
	b, err := st.BlobPut(ctx, &store.BlobPutParams{Data: []byte("\x89PNG shot"), ContentType: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AttachmentAdd(ctx, &store.AttachmentAddParams{Attachment: &store.Attachment{ID: "att", StepID: steps[2].ID,
		Name: "shot.png", Kind: "screenshot", BlobHash: b.Hash}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	if _, err := st.DatasetCreate(ctx, &store.DatasetCreateParams{Dataset: &store.Dataset{ID: "ds", Name: "cities"},
		Items: []*store.DatasetItem{{Input: "Paris", Expected: "2.1M"}, {Input: "Berlin"}}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExperimentCreate(ctx, &store.ExperimentCreateParams{Experiment: &store.Experiment{ID: "x", Name: "x1",
		DatasetID: "ds", Agent: "agent", Config: json.RawMessage(`{"k":1}`)}, Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExperimentItemPut(ctx, &store.ExperimentItemPutParams{Item: &store.ExperimentItem{ExperimentID: "x", Index: 0,
		SessionID: "p", Status: "completed", Scores: map[string]float64{"q": 1}}, Now: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	done := store.ExperimentCompleted
	if _, err := st.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: "x", Status: &done, Summary: json.RawMessage(`{"q":1}`),
		Now: t0.Add(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: "x", Now: t0.Add(4 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	_, err = st.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{
		{StepID: "p-1", Vector: []float32{1, 0}}, {StepID: "f-1", Vector: []float32{0, 1}}}})
	if err != nil {
		t.Fatal(err)
	}
}
