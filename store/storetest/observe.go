package storetest

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testObservation runs the store.ObservationStore contract. Every driver
// must implement it (the server, evals and the recorder use it): a driver
// that does not fails here.
func testObservation(t *testing.T, h *harness) {
	obs := func(t *testing.T, name string, fn func(t *testing.T, st store.Store, o store.ObservationStore)) {
		h.sub(t, name, func(t *testing.T, st store.Store) {
			seedObservation(t, st)
			fn(t, st, st)
		})
	}
	obs(t, "Evals", testEvals)
	obs(t, "EvalBadInput", testEvalBadInput)
	obs(t, "EvalCascade", testEvalCascade)
	obs(t, "Annotations", testAnnotations)
	obs(t, "Blobs", testBlobs)
	obs(t, "Attachments", testAttachments)
	obs(t, "StepEvents", testStepEvents)
	obs(t, "StepEventPayloadPlace", testStepEventPayloadPlace)
	obs(t, "StepEventsConcurrent", testStepEventsConcurrent)
	obs(t, "BlobsConcurrent", testBlobsConcurrent)
	obs(t, "Datasets", testDatasets)
	obs(t, "Experiments", testExperiments)
	if h.opts.Reopen != nil {
		obs(t, "Reopen", func(t *testing.T, st store.Store, o store.ObservationStore) {
			testObservationReopen(t, h, st, o)
		})
	}
}

// seedObservation creates session s with run r and steps s-1..s-3 of r.
func seedObservation(t *testing.T, st store.Store) {
	t.Helper()
	mustSession(t, st, "s")
	mustRun(t, st, &steptype.Run{ID: "r", SessionID: "s", Agent: "agent", Status: steptype.RunCompleted})
	for i := 1; i <= 3; i++ {
		s := newStep("s", "s-"+string(rune('0'+i)))
		s.RunID = "r"
		mustAppend(t, st, s)
	}
}

func putEval(t *testing.T, o store.ObservationStore, e store.Eval) *store.Eval {
	t.Helper()
	got, err := o.EvalPut(t.Context(), &store.EvalPutParams{Eval: &e, Now: t0})
	if err != nil {
		t.Fatalf("EvalPut(%s): %v", e.ID, err)
	}
	return got
}

func evalIDs(t *testing.T, o store.ObservationStore, p store.EvalListParams) string {
	t.Helper()
	got, err := o.EvalList(t.Context(), &p)
	if err != nil {
		t.Fatalf("EvalList(%+v): %v", p, err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	return strings.Join(ids, " ")
}

func obsWant(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func testEvals(t *testing.T, _ store.Store, o store.ObservationStore) {
	ctx := t.Context()
	e1 := putEval(t, o, store.Eval{ID: "e1", TargetKind: store.TargetStep, TargetID: "s-2", Name: "helpful",
		Source: store.SourceUser, Score: 0.75, Label: "good", Description: "clear", Author: "ann",
		Details: json.RawMessage(`{"k":1}`)})
	if e1.SessionID != "s" || e1.RunID != "r" || !e1.CreatedAt.Equal(t0) {
		t.Errorf("step eval located at session %q run %q created %v, want s, r, %v", e1.SessionID, e1.RunID, e1.CreatedAt, t0)
	}
	putEval(t, o, store.Eval{ID: "e2", TargetKind: store.TargetRun, TargetID: "r", Name: "loop", Source: store.SourceHeuristic, Score: 1})
	putEval(t, o, store.Eval{ID: "e3", TargetKind: store.TargetSession, TargetID: "s", Name: "rubric", Source: store.SourceLLMJudge, Score: 0})
	got, err := o.EvalGet(ctx, &store.EvalGetParams{ID: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "EvalGet", got, e1)

	obsWant(t, "by session", evalIDs(t, o, store.EvalListParams{SessionID: "s"}), "e1 e2 e3")
	obsWant(t, "by run (run and its steps)", evalIDs(t, o, store.EvalListParams{RunID: "r"}), "e1 e2")
	obsWant(t, "by target", evalIDs(t, o, store.EvalListParams{TargetKind: store.TargetStep, TargetID: "s-2"}), "e1")
	obsWant(t, "by source", evalIDs(t, o, store.EvalListParams{SessionID: "s", Source: store.SourceLLMJudge}), "e3")
	obsWant(t, "by name", evalIDs(t, o, store.EvalListParams{SessionID: "s", Name: "loop"}), "e2")
	obsWant(t, "limit", evalIDs(t, o, store.EvalListParams{SessionID: "s", Limit: 2}), "e1 e2")

	// Replacing keeps CreatedAt and the position.
	later := t0.Add(time.Hour)
	upd, err := o.EvalPut(ctx, &store.EvalPutParams{Eval: &store.Eval{ID: "e1", TargetKind: store.TargetStep,
		TargetID: "s-2", Name: "helpful", Source: store.SourceUser, Score: 0.25}, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if !upd.CreatedAt.Equal(t0) || !upd.UpdatedAt.Equal(later) || upd.Score != 0.25 || upd.Label != "" {
		t.Errorf("replaced eval = %+v, want created %v, updated %v, score 0.25, no label", upd, t0, later)
	}
	obsWant(t, "after replace", evalIDs(t, o, store.EvalListParams{SessionID: "s"}), "e1 e2 e3")

	if err := o.EvalDelete(ctx, &store.EvalDeleteParams{ID: "e2"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete again", o.EvalDelete(ctx, &store.EvalDeleteParams{ID: "e2"}), store.ErrNotFound)
	_, err = o.EvalGet(ctx, &store.EvalGetParams{ID: "e2"})
	wantErr(t, "get deleted", err, store.ErrNotFound)
	obsWant(t, "after delete", evalIDs(t, o, store.EvalListParams{SessionID: "s"}), "e1 e3")
}

func testEvalBadInput(t *testing.T, _ store.Store, o store.ObservationStore) {
	ctx := t.Context()
	ok := store.Eval{ID: "x", TargetKind: store.TargetStep, TargetID: "s-1", Name: "n", Source: store.SourceUser, Score: 0.5}
	for name, c := range map[string]struct {
		mut  func(*store.Eval)
		want error
	}{
		"score above 1":   {func(e *store.Eval) { e.Score = 1.01 }, store.ErrInvalid},
		"negative score":  {func(e *store.Eval) { e.Score = -0.1 }, store.ErrInvalid},
		"NaN score":       {func(e *store.Eval) { e.Score = math.NaN() }, store.ErrInvalid},
		"infinite score":  {func(e *store.Eval) { e.Score = math.Inf(1) }, store.ErrInvalid},
		"unknown source":  {func(e *store.Eval) { e.Source = "robot" }, store.ErrInvalid},
		"unknown kind":    {func(e *store.Eval) { e.TargetKind = "tool" }, store.ErrInvalid},
		"no name":         {func(e *store.Eval) { e.Name = "" }, store.ErrInvalid},
		"bad details":     {func(e *store.Eval) { e.Details = json.RawMessage(`{`) }, store.ErrInvalid},
		"missing step":    {func(e *store.Eval) { e.TargetID = "nope" }, store.ErrNotFound},
		"missing run":     {func(e *store.Eval) { e.TargetKind, e.TargetID = store.TargetRun, "nope" }, store.ErrNotFound},
		"missing session": {func(e *store.Eval) { e.TargetKind, e.TargetID = store.TargetSession, "nope" }, store.ErrNotFound},
	} {
		e := ok
		c.mut(&e)
		_, err := o.EvalPut(ctx, &store.EvalPutParams{Eval: &e})
		wantErr(t, name, err, c.want)
	}
	obsWant(t, "nothing written", evalIDs(t, o, store.EvalListParams{SessionID: "s"}), "")
	_, err := o.EvalList(ctx, &store.EvalListParams{Name: "n"})
	wantErr(t, "list without scope", err, store.ErrInvalid)
}

func testEvalCascade(t *testing.T, st store.Store, o store.ObservationStore) {
	ctx := t.Context()
	putEval(t, o, store.Eval{ID: "keep", TargetKind: store.TargetStep, TargetID: "s-1", Name: "n", Source: store.SourceUser, Score: 1})
	putEval(t, o, store.Eval{ID: "gone", TargetKind: store.TargetStep, TargetID: "s-3", Name: "n", Source: store.SourceUser, Score: 1})
	if _, err := o.AnnotationPut(ctx, &store.AnnotationPutParams{StepID: "s-3", State: ptr("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "s", StartSeq: 3}); err != nil {
		t.Fatal(err)
	}
	obsWant(t, "after truncate", evalIDs(t, o, store.EvalListParams{SessionID: "s"}), "keep")
	anns, err := o.AnnotationList(ctx, &store.AnnotationListParams{SessionID: "s"})
	if err != nil || len(anns) != 0 {
		t.Errorf("annotations after truncate = %v, %v; want none", anns, err)
	}
	putEval(t, o, store.Eval{ID: "sess", TargetKind: store.TargetSession, TargetID: "s", Name: "n", Source: store.SourceUser, Score: 1})
	if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"keep", "sess"} {
		_, err := o.EvalGet(ctx, &store.EvalGetParams{ID: id})
		wantErr(t, "eval "+id+" after session delete", err, store.ErrNotFound)
	}
}

func testAnnotations(t *testing.T, st store.Store, o store.ObservationStore) {
	ctx := t.Context()
	before, err := st.StepGet(ctx, &store.StepGetParams{ID: "s-2"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.AnnotationPut(ctx, &store.AnnotationPutParams{StepID: "s-2", State: ptr("on page 1"), Goal: ptr("find price"), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	a, err := o.AnnotationPut(ctx, &store.AnnotationPutParams{StepID: "s-2", StateSummary: ptr("page 1"), Goal: ptr(""), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := steptype.Annotations{State: "on page 1", StateSummary: "page 1"}
	if a.Annotations != want || a.SessionID != "s" || !a.UpdatedAt.Equal(t0) {
		t.Errorf("merged annotation = %+v, want %+v in session s", a, want)
	}
	if _, err := o.AnnotationPut(ctx, &store.AnnotationPutParams{StepID: "s-1", Action: ptr("click")}); err != nil {
		t.Fatal(err)
	}
	_, err = o.AnnotationPut(ctx, &store.AnnotationPutParams{StepID: "nope", State: ptr("x")})
	wantErr(t, "annotate missing step", err, store.ErrNotFound)

	list, err := o.AnnotationList(ctx, &store.AnnotationListParams{SessionID: "s"})
	if err != nil || len(list) != 2 || list[0].StepID != "s-2" || list[1].StepID != "s-1" {
		t.Errorf("AnnotationList(session) = %+v, %v; want s-2 then s-1", list, err)
	}
	list, err = o.AnnotationList(ctx, &store.AnnotationListParams{StepIDs: []string{"s-1", "s-3"}})
	if err != nil || len(list) != 1 || list[0].Annotations.Action != "click" {
		t.Errorf("AnnotationList(steps) = %+v, %v; want the s-1 row", list, err)
	}
	after, err := st.StepGet(ctx, &store.StepGetParams{ID: "s-2"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "step row after annotating (immutable)", after, before)
	if got := list[0].Overlay(steptype.Annotations{State: "s", Action: "a"}); got != (steptype.Annotations{State: "s", Action: "click"}) {
		t.Errorf("Overlay = %+v", got)
	}
}

func testBlobs(t *testing.T, _ store.Store, o store.ObservationStore) {
	ctx := t.Context()
	data := []byte("\x89PNG fake screenshot")
	b1, err := o.BlobPut(ctx, &store.BlobPutParams{Data: data, ContentType: "image/png", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := o.BlobPut(ctx, &store.BlobPutParams{Data: data, ContentType: "text/plain", Now: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if b1.Hash != store.BlobHash(data) || b2.Hash != b1.Hash || b2.ContentType != "image/png" || !b2.CreatedAt.Equal(t0) || b1.Size != int64(len(data)) {
		t.Errorf("puts = %+v, %+v; want one blob stored once, first content type kept", b1, b2)
	}
	got, err := o.BlobGet(ctx, &store.BlobGetParams{Hash: b1.Hash})
	if err != nil || !bytes.Equal(got.Data, data) {
		t.Fatalf("BlobGet = %v, %v", got, err)
	}
	_, err = o.BlobGet(ctx, &store.BlobGetParams{Hash: store.BlobHash([]byte("other"))})
	wantErr(t, "get missing", err, store.ErrNotFound)
	_, err = o.BlobPut(ctx, &store.BlobPutParams{ContentType: "text/plain"})
	wantErr(t, "empty blob", err, store.ErrInvalid)

	// Prune keeps referenced and recent blobs.
	used, _ := o.BlobPut(ctx, &store.BlobPutParams{Data: []byte("used"), ContentType: "text/plain", Now: t0})
	recent, _ := o.BlobPut(ctx, &store.BlobPutParams{Data: []byte("recent"), ContentType: "text/plain", Now: t0.Add(2 * time.Hour)})
	if _, err := o.AttachmentAdd(ctx, &store.AttachmentAddParams{Attachment: &store.Attachment{ID: "a", StepID: "s-1", Name: "f", Kind: "file", BlobHash: used.Hash}}); err != nil {
		t.Fatal(err)
	}
	n, err := o.BlobPrune(ctx, &store.BlobPruneParams{Before: t0.Add(time.Hour)})
	if err != nil || n != 1 {
		t.Errorf("BlobPrune = %d, %v; want 1", n, err)
	}
	for hash, want := range map[string]error{b1.Hash: store.ErrNotFound, used.Hash: nil, recent.Hash: nil} {
		_, err := o.BlobGet(ctx, &store.BlobGetParams{Hash: hash})
		wantErr(t, "after prune "+hash[:8], err, want)
	}
	_, err = o.BlobPrune(ctx, &store.BlobPruneParams{})
	wantErr(t, "prune without Before", err, store.ErrInvalid)
}

func testAttachments(t *testing.T, st store.Store, o store.ObservationStore) {
	ctx := t.Context()
	b, err := o.BlobPut(ctx, &store.BlobPutParams{Data: []byte("shot"), ContentType: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	add := func(id, step, hash string) (*store.Attachment, error) {
		return o.AttachmentAdd(ctx, &store.AttachmentAddParams{Now: t0,
			Attachment: &store.Attachment{ID: id, StepID: step, Name: id + ".png", Kind: "screenshot", BlobHash: hash}})
	}
	a1, err := add("a1", "s-2", b.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if a1.SessionID != "s" || a1.RunID != "r" || a1.ContentType != "image/png" || a1.Size != 4 {
		t.Errorf("attachment = %+v, want session s, run r, image/png, 4 bytes", a1)
	}
	if _, err := add("a2", "s-3", b.Hash); err != nil {
		t.Fatal(err)
	}
	_, err = add("a1", "s-2", b.Hash)
	wantErr(t, "same id", err, store.ErrConflict)
	_, err = add("a3", "nope", b.Hash)
	wantErr(t, "missing step", err, store.ErrNotFound)
	_, err = add("a3", "s-1", store.BlobHash([]byte("never stored")))
	wantErr(t, "missing blob", err, store.ErrNotFound)
	_, err = add("", "s-1", b.Hash)
	wantErr(t, "no id", err, store.ErrInvalid)

	got, err := o.AttachmentGet(ctx, &store.AttachmentGetParams{ID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "AttachmentGet", got, a1)
	list, err := o.AttachmentList(ctx, &store.AttachmentListParams{SessionID: "s"})
	if err != nil || len(list) != 2 || list[0].ID != "a1" || list[1].ID != "a2" {
		t.Errorf("AttachmentList(session) = %v, %v; want a1 a2", list, err)
	}
	list, err = o.AttachmentList(ctx, &store.AttachmentListParams{StepID: "s-3"})
	if err != nil || len(list) != 1 || list[0].ID != "a2" {
		t.Errorf("AttachmentList(step) = %v, %v; want a2", list, err)
	}
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "s", StartSeq: 3}); err != nil {
		t.Fatal(err)
	}
	_, err = o.AttachmentGet(ctx, &store.AttachmentGetParams{ID: "a2"})
	wantErr(t, "attachment of a truncated step", err, store.ErrNotFound)
}

// testStepEventPayloadPlace: where an event's payload lives is the
// store's choice: a blob hash given with an inline payload is dropped,
// written and read back alike.
func testStepEventPayloadPlace(t *testing.T, _ store.Store, o store.ObservationStore) {
	ctx := t.Context()
	evs, err := o.StepEventAppend(ctx, &store.StepEventAppendParams{Events: []*store.StepEvent{
		{ID: "placed", StepID: "s-1", Type: "http", Payload: json.RawMessage(`{"b":2}`), BlobHash: "given"}}})
	if err != nil || evs[0].BlobHash != "" || string(evs[0].Payload) != `{"b":2}` {
		t.Fatalf("appended = %+v, %v; want the payload inline and no blob hash", evs, err)
	}
	list, err := o.StepEventList(ctx, &store.StepEventListParams{StepID: "s-1"})
	if err != nil || len(list) != 1 || list[0].BlobHash != "" {
		t.Errorf("read back = %+v, %v; want no blob hash", list, err)
	}
}

func testStepEvents(t *testing.T, _ store.Store, o store.ObservationStore) {
	ctx := t.Context()
	big := []byte(`{"body":"` + strings.Repeat("x", store.InlinePayloadLimit) + `"}`)
	evs, err := o.StepEventAppend(ctx, &store.StepEventAppendParams{Now: t0, Events: []*store.StepEvent{
		{ID: "ev1", StepID: "s-2", Type: "provider_request", Name: "m", Attempt: 1, StartedAt: t0, Payload: json.RawMessage(`{"a":1}`)},
		{ID: "ev2", StepID: "s-2", Type: "provider_response", Duration: 1500 * time.Microsecond, Payload: big},
		{ID: "ev3", StepID: "s-3", Type: "tool_invocation", Error: "boom"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Index != 0 || evs[1].Index != 1 || evs[2].Index != 0 || evs[0].SessionID != "s" || evs[0].RunID != "r" {
		t.Errorf("appended = %+v %+v %+v; want indexes 0 1 0 in session s, run r", evs[0], evs[1], evs[2])
	}
	if evs[1].Payload != nil || evs[1].BlobHash != store.BlobHash(big) || evs[1].Size != int64(len(big)) {
		t.Errorf("large payload: inline %d bytes, hash %q, size %d; want out of line", len(evs[1].Payload), evs[1].BlobHash, evs[1].Size)
	}
	b, err := o.BlobGet(ctx, &store.BlobGetParams{Hash: evs[1].BlobHash})
	if err != nil || !bytes.Equal(b.Data, big) || b.ContentType != "application/json" {
		t.Errorf("out-of-line payload: %v, %v", b, err)
	}
	more, err := o.StepEventAppend(ctx, &store.StepEventAppendParams{Events: []*store.StepEvent{{ID: "ev4", StepID: "s-2", Type: "http"}}})
	if err != nil || more[0].Index != 2 {
		t.Errorf("next index = %v, %v; want 2", more, err)
	}
	list, err := o.StepEventList(ctx, &store.StepEventListParams{StepID: "s-2"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "StepEventList(step)", list, append(evs[:2:2], more...))
	list, err = o.StepEventList(ctx, &store.StepEventListParams{RunID: "r", Types: []string{"tool_invocation", "http"}})
	if err != nil || len(list) != 2 || list[0].ID != "ev3" || list[1].ID != "ev4" {
		t.Errorf("StepEventList(run, types) = %v, %v; want ev3 ev4", list, err)
	}

	// All or nothing.
	_, err = o.StepEventAppend(ctx, &store.StepEventAppendParams{Events: []*store.StepEvent{
		{ID: "ok", StepID: "s-1", Type: "x"}, {ID: "bad", StepID: "s-1", Type: "x", Payload: json.RawMessage(`{`)}}})
	wantErr(t, "invalid payload", err, store.ErrInvalid)
	_, err = o.StepEventAppend(ctx, &store.StepEventAppendParams{Events: []*store.StepEvent{
		{ID: "ok", StepID: "s-1", Type: "x"}, {ID: "lost", StepID: "nope", Type: "x"}}})
	wantErr(t, "missing step", err, store.ErrNotFound)
	_, err = o.StepEventAppend(ctx, &store.StepEventAppendParams{Events: []*store.StepEvent{{ID: "ev1", StepID: "s-1", Type: "x"}}})
	wantErr(t, "duplicate id", err, store.ErrConflict)
	list, err = o.StepEventList(ctx, &store.StepEventListParams{StepID: "s-1"})
	if err != nil || len(list) != 0 {
		t.Errorf("events of s-1 after failed appends = %v, %v; want none", list, err)
	}
}

func testDatasets(t *testing.T, _ store.Store, o store.ObservationStore) {
	ctx := t.Context()
	items := []*store.DatasetItem{{Input: "2+2", Expected: "4"}, {Input: "3+3", Metadata: json.RawMessage(`{"k":"v"}`)}, {Input: "q"}}
	d, err := o.DatasetCreate(ctx, &store.DatasetCreateParams{Dataset: &store.Dataset{ID: "d1", Name: "math"}, Items: items, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if d.ItemCount != 3 || !d.CreatedAt.Equal(t0) {
		t.Errorf("dataset = %+v", d)
	}
	_, err = o.DatasetCreate(ctx, &store.DatasetCreateParams{Dataset: &store.Dataset{ID: "d2", Name: "math"}})
	wantErr(t, "duplicate name", err, store.ErrConflict)
	_, err = o.DatasetCreate(ctx, &store.DatasetCreateParams{Dataset: &store.Dataset{ID: "d3", Name: "bad"},
		Items: []*store.DatasetItem{{Input: "ok"}, {Input: ""}}})
	wantErr(t, "item without input", err, store.ErrInvalid)
	_, err = o.DatasetGet(ctx, &store.DatasetGetParams{Name: "bad"})
	wantErr(t, "nothing written for a bad dataset", err, store.ErrNotFound)

	byName, err := o.DatasetGet(ctx, &store.DatasetGetParams{Name: "math"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "DatasetGet(name)", byName, d)
	got, err := o.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: "d1", Offset: 1, Limit: 1})
	if err != nil || len(got) != 1 || got[0].Index != 1 || got[0].Input != "3+3" || string(got[0].Metadata) != `{"k":"v"}` {
		t.Errorf("DatasetItemList(offset 1, limit 1) = %+v, %v", got, err)
	}
	all, err := o.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: "d1"})
	if err != nil || len(all) != 3 || all[0].Expected != "4" || all[2].Index != 2 {
		t.Errorf("DatasetItemList = %+v, %v", all, err)
	}
	_, err = o.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: "nope"})
	wantErr(t, "items of a missing dataset", err, store.ErrNotFound)
	if _, err := o.DatasetCreate(ctx, &store.DatasetCreateParams{Dataset: &store.Dataset{ID: "d4", Name: "later"}}); err != nil {
		t.Fatal(err)
	}
	list, err := o.DatasetList(ctx, &store.DatasetListParams{})
	if err != nil || len(list) != 2 || list[0].ID != "d4" {
		t.Errorf("DatasetList = %v, %v; want d4 first", list, err)
	}
}

func testExperiments(t *testing.T, _ store.Store, o store.ObservationStore) {
	ctx := t.Context()
	if _, err := o.DatasetCreate(ctx, &store.DatasetCreateParams{Dataset: &store.Dataset{ID: "d", Name: "d"},
		Items: []*store.DatasetItem{{Input: "a"}, {Input: "b"}}}); err != nil {
		t.Fatal(err)
	}
	x, err := o.ExperimentCreate(ctx, &store.ExperimentCreateParams{Now: t0, Experiment: &store.Experiment{
		ID: "x1", Name: "baseline", DatasetID: "d", Agent: "agent", Config: json.RawMessage(`{"concurrency":2}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != store.ExperimentRunning || !x.FinishedAt.IsZero() {
		t.Errorf("new experiment = %+v, want running", x)
	}
	_, err = o.ExperimentCreate(ctx, &store.ExperimentCreateParams{Experiment: &store.Experiment{ID: "x2", Name: "baseline", DatasetID: "d", Agent: "a"}})
	wantErr(t, "duplicate name", err, store.ErrConflict)
	_, err = o.ExperimentCreate(ctx, &store.ExperimentCreateParams{Experiment: &store.Experiment{ID: "x3", Name: "n", DatasetID: "nope", Agent: "a"}})
	wantErr(t, "missing dataset", err, store.ErrNotFound)

	for _, it := range []*store.ExperimentItem{
		{ExperimentID: "x1", Index: 1, Status: "failed", Error: "boom"},
		{ExperimentID: "x1", Index: 0, SessionID: "s", RunID: "r", Status: "completed", Output: "A",
			Scores: map[string]float64{"exact_match": 1}, Duration: time.Second, InputTokens: 3, OutputTokens: 4, Cost: 0.5},
	} {
		if _, err := o.ExperimentItemPut(ctx, &store.ExperimentItemPutParams{Item: it, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = o.ExperimentItemPut(ctx, &store.ExperimentItemPutParams{Item: &store.ExperimentItem{ExperimentID: "x1", Index: 2, Scores: map[string]float64{"x": 2}}})
	wantErr(t, "item score out of range", err, store.ErrInvalid)
	if _, err := o.ExperimentItemPut(ctx, &store.ExperimentItemPutParams{Item: &store.ExperimentItem{ExperimentID: "x1", Index: 1, Status: "completed"}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	items, err := o.ExperimentItemList(ctx, &store.ExperimentItemListParams{ExperimentID: "x1"})
	if err != nil || len(items) != 2 {
		t.Fatalf("ExperimentItemList = %v, %v", items, err)
	}
	if items[0].Scores["exact_match"] != 1 || items[0].Duration != time.Second || items[0].Cost != 0.5 || items[1].Status != "completed" || items[1].Error != "" {
		t.Errorf("items = %+v %+v", items[0], items[1])
	}

	done := store.ExperimentCompleted
	later := t0.Add(time.Minute)
	x, err = o.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: "x1", Status: &done, Summary: json.RawMessage(`{"n":2}`), Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != done || !x.FinishedAt.Equal(later) || string(x.Summary) != `{"n":2}` || string(x.Config) != `{"concurrency":2}` {
		t.Errorf("updated experiment = %+v", x)
	}
	got, err := o.ExperimentGet(ctx, &store.ExperimentGetParams{Name: "baseline"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "ExperimentGet(name)", got, x)
	bad := store.ExperimentStatus("paused")
	_, err = o.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: "x1", Status: &bad})
	wantErr(t, "unknown status", err, store.ErrInvalid)
	_, err = o.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: "nope", Status: &done})
	wantErr(t, "update missing", err, store.ErrNotFound)
	list, err := o.ExperimentList(ctx, &store.ExperimentListParams{DatasetID: "d"})
	if err != nil || len(list) != 1 || list[0].ID != "x1" {
		t.Errorf("ExperimentList = %v, %v", list, err)
	}
}

func testObservationReopen(t *testing.T, h *harness, st store.Store, o store.ObservationStore) {
	ctx := t.Context()
	putEval(t, o, store.Eval{ID: "e", TargetKind: store.TargetStep, TargetID: "s-1", Name: "n", Source: store.SourceUser, Score: 0.5})
	b, _ := o.BlobPut(ctx, &store.BlobPutParams{Data: []byte("x"), ContentType: "text/plain"})
	if _, err := o.AttachmentAdd(ctx, &store.AttachmentAddParams{Attachment: &store.Attachment{ID: "a", StepID: "s-1", Name: "x", Kind: "file", BlobHash: b.Hash}}); err != nil {
		t.Fatal(err)
	}
	o = h.opts.Reopen(t, st)
	if e, err := o.EvalGet(ctx, &store.EvalGetParams{ID: "e"}); err != nil || e.Score != 0.5 {
		t.Errorf("eval after reopen = %v, %v", e, err)
	}
	if a, err := o.AttachmentGet(ctx, &store.AttachmentGetParams{ID: "a"}); err != nil || a.BlobHash != b.Hash {
		t.Errorf("attachment after reopen = %v, %v", a, err)
	}
}
