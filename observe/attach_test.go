package observe_test

import (
	"bytes"
	"errors"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// png is the start of a PNG file: enough for content sniffing.
var png = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7}, 100)...)

func TestAttachments(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		seed(t, st, &steptype.Step{ID: "a"}, &steptype.Step{ID: "b"})
		files, err := observe.NewAttachments(st, observe.AttachmentConfig{MaxSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		shot, err := files.Add(ctx, observe.AttachParams{StepID: "a", Name: `C:\shots\page 1.png`, Kind: observe.KindScreenshot, Data: png})
		if err != nil {
			t.Fatal(err)
		}
		if shot.ContentType != "image/png" || shot.Kind != "screenshot" || shot.Name != "page 1.png" || shot.Size != int64(len(png)) || shot.SessionID != "s" {
			t.Errorf("screenshot = %+v", shot)
		}
		again, err := files.Add(ctx, observe.AttachParams{StepID: "b", Reader: bytes.NewReader(png), ContentType: "image/png"})
		if err != nil {
			t.Fatal(err)
		}
		if again.BlobHash != shot.BlobHash || again.Kind != observe.KindImage || again.Name != "attachment" {
			t.Errorf("same content again = %+v, want the same blob, kind image", again)
		}
		att, data, err := files.Open(ctx, shot.ID)
		if err != nil || !bytes.Equal(data, png) || att.StepID != "a" {
			t.Errorf("Open = %+v, %d bytes, %v", att, len(data), err)
		}
		notes, err := files.Add(ctx, observe.AttachParams{StepID: "a", Name: "notes.md", ContentType: "text/markdown; charset=utf-8", Data: []byte("# Notes")})
		if err != nil || notes.ContentType != "text/markdown" {
			t.Errorf("markdown = %+v, %v", notes, err)
		}
		list, err := files.List(ctx, "a")
		if err != nil || len(list) != 2 {
			t.Errorf("List(a) = %v, %v", list, err)
		}

		// Refused: nothing is stored.
		obs := st
		for name, c := range map[string]struct {
			p    observe.AttachParams
			want error
		}{
			"too large":          {observe.AttachParams{StepID: "a", Data: bytes.Repeat([]byte("x"), 1001)}, observe.ErrTooLarge},
			"too large (reader)": {observe.AttachParams{StepID: "a", Reader: strings.NewReader(strings.Repeat("x", 5000))}, observe.ErrTooLarge},
			"empty":              {observe.AttachParams{StepID: "a", Data: []byte{}}, observe.ErrEmpty},
			"html":               {observe.AttachParams{StepID: "a", Data: []byte("<html><script>alert(1)</script>"), ContentType: "text/plain"}, observe.ErrContentType},
			"svg":                {observe.AttachParams{StepID: "a", Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)}, observe.ErrContentType},
			"binary":             {observe.AttachParams{StepID: "a", Data: []byte{0, 1, 2, 3, 0xfe}}, observe.ErrContentType},
			"declared jpeg":      {observe.AttachParams{StepID: "a", Data: png, ContentType: "image/jpeg"}, observe.ErrContentType},
			"png posing as text": {observe.AttachParams{StepID: "a", Data: png, ContentType: "text/plain"}, observe.ErrContentType},
			"not json":           {observe.AttachParams{StepID: "a", Data: []byte("{nope"), ContentType: "application/json"}, observe.ErrContentType},
			"bad kind":           {observe.AttachParams{StepID: "a", Data: []byte("hi"), Kind: "video"}, store.ErrInvalid},
			"unknown step":       {observe.AttachParams{StepID: "nope", Data: []byte("fresh content")}, store.ErrNotFound},
		} {
			_, err := files.Add(ctx, c.p)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", name, err, c.want)
			}
		}
		list, _ = obs.AttachmentList(ctx, &store.AttachmentListParams{SessionID: "s"})
		if len(list) != 3 {
			t.Errorf("%d attachments after refusals, want 3", len(list))
		}
		// Only the two contents accepted were stored: pruning keeps them
		// (referenced) and finds nothing else.
		if n, err := obs.BlobPrune(ctx, &store.BlobPruneParams{Before: time.Now().Add(time.Hour)}); err != nil || n != 0 {
			t.Errorf("BlobPrune after refusals = %d, %v; want 0 (no stray blob)", n, err)
		}
	})
}

func TestAnnotate(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		seed(t, st, &steptype.Step{ID: "a", Annotations: steptype.Annotations{State: "cart empty", Action: "add item"}},
			&steptype.Step{ID: "b"})
		goal := "buy milk"
		if _, err := observe.Annotate(ctx, st, &store.AnnotationPutParams{StepID: "a", Goal: &goal}); err != nil {
			t.Fatal(err)
		}
		_, err := observe.Annotate(ctx, st, &store.AnnotationPutParams{StepID: "zz", Goal: &goal})
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("annotate unknown step: %v", err)
		}
		steps, err := st.StepList(ctx, &store.StepListParams{SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if steps[0].Annotations.Goal != "" {
			t.Fatal("the step row changed")
		}
		if err := observe.ApplyAnnotations(ctx, st, steps); err != nil {
			t.Fatal(err)
		}
		want := steptype.Annotations{State: "cart empty", Goal: "buy milk", Action: "add item"}
		if steps[0].Annotations != want || !steps[1].Annotations.IsZero() {
			t.Errorf("effective annotations = %+v, %+v; want %+v", steps[0].Annotations, steps[1].Annotations, want)
		}
	})
}

func TestNoStore(t *testing.T) {
	t.Parallel()
	if _, err := observe.NewAttachments(nil, observe.AttachmentConfig{}); !errors.Is(err, observe.ErrNoStore) {
		t.Errorf("NewAttachments: %v", err)
	}
	if _, err := observe.NewRecorder(observe.RecorderConfig{}); !errors.Is(err, observe.ErrNoStore) {
		t.Errorf("NewRecorder: %v", err)
	}
	if _, err := observe.NewSummarizer(observe.SummarizerConfig{}); !errors.Is(err, observe.ErrNoStore) {
		t.Errorf("NewSummarizer: %v", err)
	}
}
