// Package attach stores the attachments of tool results (screenshots,
// files). Before its tool step commits, each attachment's bytes are stored
// as a content-addressed blob and the step is flagged in its metadata:
// "tool_attachments" lists id, name, kind, content type, size and blob
// hash, "screenshots" counts the images. Once the step is durable the
// attachment rows are added under the ids listed, so the dashboard and
// GET /v1/steps/{id}/attachments show them. Stores without observations
// keep neither.
package attach

import (
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/internal/ids"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// stagedAttachment is the metadata entry of one attachment of a step.
type stagedAttachment struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	BlobHash    string `json:"blob_hash"`
}

// Stage stores the blobs of atts and records them in s.Metadata.
func Stage(st store.Store, now func() time.Time, s *steptype.Step, atts []tool.Attachment) {
	if len(atts) == 0 {
		return
	}
	var staged []stagedAttachment
	images := 0
	for i, a := range atts {
		if len(a.Data) == 0 {
			continue
		}
		ct := a.ContentType
		if ct == "" {
			ct = http.DetectContentType(a.Data)
		}
		ct = strings.TrimSpace(strings.SplitN(ct, ";", 2)[0])
		image := strings.HasPrefix(ct, "image/")
		kind := a.Kind
		if kind == "" {
			kind = "file"
			if image {
				kind = "image"
			}
		}
		if image {
			images++
		}
		name := a.Name
		if name == "" {
			name = fmt.Sprintf("attachment-%d", i+1)
			if exts, _ := mime.ExtensionsByType(ct); len(exts) > 0 {
				name += exts[0]
			}
		}
		b, err := st.BlobPut(context.Background(), &store.BlobPutParams{Data: a.Data, ContentType: ct, Now: now()})
		if err != nil {
			slog.Default().Error("stepwise: store tool attachment", "tool", s.ToolName, "err", err)
			continue
		}
		staged = append(staged, stagedAttachment{ID: ids.At(time.Now()), Name: name, Kind: kind, ContentType: ct, Size: len(a.Data), BlobHash: b.Hash})
	}
	if len(staged) == 0 {
		return
	}
	if s.Metadata == nil {
		s.Metadata = map[string]any{}
	}
	list := make([]any, len(staged))
	for i, a := range staged {
		list[i] = map[string]any{"id": a.ID, "name": a.Name, "kind": a.Kind, "content_type": a.ContentType, "size": a.Size, "blob_hash": a.BlobHash}
	}
	s.Metadata["tool_attachments"] = list
	s.Metadata["screenshots"] = images
}

// Add adds the attachment rows staged in committed steps.
func Add(st store.Store, now func() time.Time, steps []*steptype.Step) {
	for _, s := range steps {
		list, _ := s.Metadata["tool_attachments"].([]any)
		for _, v := range list {
			m, _ := v.(map[string]any)
			id, _ := m["id"].(string)
			hash, _ := m["blob_hash"].(string)
			if id == "" || hash == "" {
				continue
			}
			name, _ := m["name"].(string)
			kind, _ := m["kind"].(string)
			_, err := st.AttachmentAdd(context.Background(), &store.AttachmentAddParams{Now: now(),
				Attachment: &store.Attachment{ID: id, StepID: s.ID, Name: name, Kind: kind, BlobHash: hash}})
			if err != nil {
				slog.Default().Error("stepwise: add tool attachment", "step", s.ID, "attachment", id, "err", err)
			}
		}
	}
}
