package server

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// The step endpoints of observe.go: attachments and their content, the
// events inside a step, annotations.

// multipartOverhead is what a multipart upload may add to the attachment
// limit (boundaries, part headers, small fields).
const multipartOverhead = 64 << 10

// attachmentFeature returns the attachment API.
func (o *observationAPI) attachmentFeature() (*observe.Attachments, error) {
	return observe.NewAttachments(o.s.eng.Store(), o.att)
}

// attachments: GET /v1/steps/{id}/attachments, oldest first.
func (o *observationAPI) attachments(w http.ResponseWriter, r *http.Request) error {
	a, err := o.attachmentFeature()
	if err != nil {
		return err
	}
	step, err := o.stepByPath(r)
	if err != nil {
		return err
	}
	atts, err := a.List(r.Context(), step.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.AttachmentList{Attachments: nonNil(atts)})
	return nil
}

// upload: POST /v1/steps/{id}/attachments. Either multipart/form-data
// with a "file" part (and optional "name", "kind" fields), or the raw
// content with its Content-Type and ?name=&kind=. The content decides the
// type (observe.Attachments.DetectType): 415 for a refused or contradicted
// type, 413 above the size limit; 201 with the attachment.
func (o *observationAPI) upload(w http.ResponseWriter, r *http.Request) error {
	a, err := o.attachmentFeature()
	if err != nil {
		return err
	}
	step, err := o.stepByPath(r)
	if err != nil {
		return err
	}
	limit := o.att.MaxSize
	if limit == 0 {
		limit = 10 << 20
	}
	q := r.URL.Query()
	p := observe.AttachParams{StepID: step.ID, Name: q.Get("name"), Kind: q.Get("kind")}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		r.Body = http.MaxBytesReader(w, r.Body, limit+multipartOverhead)
		if err := readMultipart(r, &p, limit); err != nil {
			return err
		}
	} else {
		p.ContentType = declaredType(r.Header.Get("Content-Type"))
		p.Reader = http.MaxBytesReader(w, r.Body, limit+1)
	}
	att, err := a.Add(r.Context(), p)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "attachment larger than %d bytes", limit)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, att)
	return nil
}

// readMultipart reads the "file" part (its data, file name and declared
// type) and the optional "name" and "kind" fields into p.
func readMultipart(r *http.Request, p *observe.AttachParams, limit int64) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return errorf(http.StatusBadRequest, CodeInvalidParam, "multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return multipartError(err)
		}
		switch part.FormName() {
		case "file":
			data, err := io.ReadAll(io.LimitReader(part, limit+1))
			if err != nil {
				return multipartError(err)
			}
			if int64(len(data)) > limit {
				return errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "attachment larger than %d bytes", limit)
			}
			p.Data = data
			if p.Name == "" {
				p.Name = part.FileName()
			}
			p.ContentType = declaredType(part.Header.Get("Content-Type"))
		case "name", "kind":
			v, err := io.ReadAll(io.LimitReader(part, 1024))
			if err != nil {
				return multipartError(err)
			}
			if part.FormName() == "name" {
				p.Name = string(v)
			} else {
				p.Kind = string(v)
			}
		}
		_ = part.Close()
	}
	if p.Data == nil {
		return errorf(http.StatusBadRequest, CodeInvalidParam, `multipart body: a "file" part is required`)
	}
	return nil
}

func multipartError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return err
	}
	return errorf(http.StatusBadRequest, CodeInvalidParam, "multipart body: %v", err)
}

// declaredType is the declared type of an upload; the generic
// application/octet-stream (what browsers send for unknown files) declares
// nothing, and the content decides.
func declaredType(ct string) string {
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/octet-stream" {
		return ""
	}
	return ct
}

// inlineTypes are the types served inline: raster images. Everything else
// is served as a download.
var inlineTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// content: GET /v1/attachments/{id}/content serves the stored bytes with
// their type, nosniff, a sandboxing CSP, and an attachment disposition for
// anything but a raster image.
func (o *observationAPI) content(w http.ResponseWriter, r *http.Request) error {
	a, err := o.attachmentFeature()
	if err != nil {
		return err
	}
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	att, data, err := a.Open(r.Context(), id)
	if err != nil {
		return err
	}
	disp := "attachment"
	if inlineTypes[att.ContentType] {
		disp = "inline"
	}
	h := w.Header()
	h.Set("Content-Type", att.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Content-Disposition", mime.FormatMediaType(disp, map[string]string{"filename": att.Name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("ETag", `"`+att.BlobHash+`"`)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
	return nil
}

// events: GET /v1/steps/{id}/events?type=, the events inside a step in
// order, payloads stored out of line fetched and inlined.
func (o *observationAPI) events(w http.ResponseWriter, r *http.Request) error {
	obs := o.s.eng.Store()
	step, err := o.stepByPath(r)
	if err != nil {
		return err
	}
	evs, err := obs.StepEventList(r.Context(), &store.StepEventListParams{StepID: step.ID, Types: r.URL.Query()["type"]})
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if ev.Payload != nil || ev.BlobHash == "" {
			continue
		}
		b, err := obs.BlobGet(r.Context(), &store.BlobGetParams{Hash: ev.BlobHash})
		if err != nil {
			return err
		}
		if json.Valid(b.Data) {
			ev.Payload = b.Data
		}
	}
	writeJSON(w, http.StatusOK, wire.StepEventList{Events: nonNil(evs)})
	return nil
}

// annotations: GET /v1/steps/{id}/annotations.
func (o *observationAPI) annotations(w http.ResponseWriter, r *http.Request) error {
	step, err := o.stepByPath(r)
	if err != nil {
		return err
	}
	if err := observe.ApplyAnnotations(r.Context(), o.s.eng.Store(), []*steptype.Step{step}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.AnnotationView{StepID: step.ID, Annotations: step.Annotations})
	return nil
}

// annotate: PUT /v1/steps/{id}/annotations sets state, goal or action of
// a committed step (the step row is not rewritten) and returns the
// effective annotations.
func (o *observationAPI) annotate(w http.ResponseWriter, r *http.Request) error {
	var req wire.AnnotationRequest
	if err := o.s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.State == nil && req.Goal == nil && req.Action == nil {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "set at least one of state, goal, action")
	}
	step, err := o.stepByPath(r)
	if err != nil {
		return err
	}
	st := o.s.eng.Store()
	if _, err := observe.Annotate(r.Context(), st, &store.AnnotationPutParams{StepID: step.ID, State: req.State, Goal: req.Goal, Action: req.Action}); err != nil {
		return err
	}
	if err := observe.ApplyAnnotations(r.Context(), st, []*steptype.Step{step}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.AnnotationView{StepID: step.ID, Annotations: step.Annotations})
	return nil
}
