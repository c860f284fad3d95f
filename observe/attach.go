package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// Attachment errors. Nothing is stored when an attachment is refused.
var (
	ErrTooLarge    = errors.New("stepwise: attachment too large")
	ErrContentType = errors.New("stepwise: attachment content type refused")
	ErrEmpty       = errors.New("stepwise: attachment is empty")
)

// Attachment kinds.
const (
	KindScreenshot = "screenshot"
	KindImage      = "image"
	KindFile       = "file"
)

// DefaultAllowedTypes are the media types accepted by default: images the
// dashboard can show, PDF and plain data. HTML, SVG and scripts are refused
// (they would run in the dashboard's origin).
var DefaultAllowedTypes = []string{
	"image/png", "image/jpeg", "image/gif", "image/webp",
	"application/pdf", "text/plain", "text/csv", "text/markdown", "application/json",
}

// sniffable are the types http.DetectContentType recognizes from content:
// a file declared as one of them must be one.
var sniffable = []string{"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/x-icon", "application/pdf"}

// AttachmentConfig configures Attachments.
type AttachmentConfig struct {
	// MaxSize is the largest attachment in bytes. Default 10 MiB.
	MaxSize int64
	// Allowed are the media types accepted. Default DefaultAllowedTypes.
	Allowed []string
}

// Attachments stores screenshots, images and files of steps, once per
// content (by SHA-256), with a size limit and a content-type check.
type Attachments struct {
	st  store.Store
	obs store.ObservationStore
	cfg AttachmentConfig
}

// NewAttachments returns the attachment API over st.
func NewAttachments(st store.Store, cfg AttachmentConfig) (*Attachments, error) {
	if st == nil {
		return nil, ErrNoStore
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = 10 << 20
	}
	if cfg.Allowed == nil {
		cfg.Allowed = DefaultAllowedTypes
	}
	return &Attachments{st: st, obs: st, cfg: cfg}, nil
}

// AttachParams describe one attachment: Data or Reader.
type AttachParams struct {
	StepID string // required
	Name   string // file name; default "attachment"
	// Kind is KindScreenshot, KindImage or KindFile; default KindImage for
	// images, else KindFile.
	Kind string
	// ContentType is the declared type (an upload's Content-Type); the
	// content decides, and a declaration it contradicts is refused.
	ContentType string
	Data        []byte
	Reader      io.Reader // read up to MaxSize+1 bytes when Data is nil
}

// Add checks and stores an attachment. It fails with ErrEmpty,
// ErrTooLarge, ErrContentType, or store.ErrNotFound for an unknown step.
func (a *Attachments) Add(ctx context.Context, p AttachParams) (*store.Attachment, error) {
	data := p.Data
	if data == nil && p.Reader != nil {
		var err error
		if data, err = io.ReadAll(io.LimitReader(p.Reader, a.cfg.MaxSize+1)); err != nil {
			return nil, fmt.Errorf("read attachment: %w", err)
		}
	}
	if len(data) == 0 {
		return nil, ErrEmpty
	}
	if int64(len(data)) > a.cfg.MaxSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, a.cfg.MaxSize)
	}
	ctype, err := a.DetectType(data, p.ContentType)
	if err != nil {
		return nil, err
	}
	kind := p.Kind
	switch {
	case kind == "" && strings.HasPrefix(ctype, "image/"):
		kind = KindImage
	case kind == "":
		kind = KindFile
	case kind != KindScreenshot && kind != KindImage && kind != KindFile:
		return nil, fmt.Errorf("%w: attachment kind %q: want screenshot, image or file", store.ErrInvalid, kind)
	}
	if _, err := a.st.StepGet(ctx, &store.StepGetParams{ID: p.StepID}); err != nil {
		return nil, fmt.Errorf("attach to step %q: %w", p.StepID, err)
	}
	b, err := a.obs.BlobPut(ctx, &store.BlobPutParams{Data: data, ContentType: ctype})
	if err != nil {
		return nil, fmt.Errorf("store attachment: %w", err)
	}
	att, err := a.obs.AttachmentAdd(ctx, &store.AttachmentAddParams{Attachment: &store.Attachment{
		ID: stepwise.NewID(), StepID: p.StepID, Name: cleanName(p.Name), Kind: kind, BlobHash: b.Hash,
	}})
	if err != nil {
		return nil, fmt.Errorf("store attachment: %w", err)
	}
	return att, nil
}

// DetectType returns the media type of data: sniffed from the content,
// refined by the declared type only where content cannot tell (text
// formats); it fails with ErrContentType when the declaration contradicts
// the content or the type is not allowed.
func (a *Attachments) DetectType(data []byte, declared string) (string, error) {
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(data))
	decl := ""
	if declared != "" {
		var err error
		if decl, _, err = mime.ParseMediaType(declared); err != nil {
			return "", fmt.Errorf("%w: declared type %q: %v", ErrContentType, declared, err)
		}
	}
	if sniffed == "text/plain" {
		sniffed = markup(data)
	}
	ctype := sniffed
	switch {
	case sniffed == "text/plain" && decl == "application/json":
		if !json.Valid(bytes.TrimSpace(data)) {
			return "", fmt.Errorf("%w: declared application/json but the content is not JSON", ErrContentType)
		}
		ctype = decl
	case sniffed == "text/plain" && strings.HasPrefix(decl, "text/"):
		ctype = decl
	case sniffed == "application/octet-stream" && decl != "" && !slices.Contains(sniffable, decl) && !strings.HasPrefix(decl, "text/"):
		ctype = decl
	case decl != "" && decl != sniffed:
		return "", fmt.Errorf("%w: declared %s but the content is %s", ErrContentType, decl, sniffed)
	}
	if !slices.Contains(a.cfg.Allowed, ctype) {
		return "", fmt.Errorf("%w: %s is not allowed (allowed: %s)", ErrContentType, ctype, strings.Join(a.cfg.Allowed, ", "))
	}
	return ctype, nil
}

// markup returns the type of text content that a browser could render as
// active markup (SVG, HTML, XML), so that it is refused unless allowed;
// "text/plain" otherwise.
func markup(data []byte) string {
	head := bytes.ToLower(bytes.TrimSpace(data[:min(len(data), 1024)]))
	switch {
	case !bytes.HasPrefix(head, []byte("<")):
		return "text/plain"
	case bytes.Contains(head, []byte("<svg")):
		return "image/svg+xml"
	case bytes.Contains(head, []byte("<html")) || bytes.Contains(head, []byte("<script")) || bytes.Contains(head, []byte("<!doctype")):
		return "text/html"
	case bytes.HasPrefix(head, []byte("<?xml")):
		return "text/xml"
	}
	return "text/plain"
}

// cleanName keeps the base name of a file name, without control characters.
func cleanName(name string) string {
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, name)
	if name == "" || name == "." || name == "/" {
		return "attachment"
	}
	if len(name) > 255 {
		name = name[:255]
	}
	return name
}

// Open returns an attachment and its content.
func (a *Attachments) Open(ctx context.Context, id string) (*store.Attachment, []byte, error) {
	att, err := a.obs.AttachmentGet(ctx, &store.AttachmentGetParams{ID: id})
	if err != nil {
		return nil, nil, err
	}
	b, err := a.obs.BlobGet(ctx, &store.BlobGetParams{Hash: att.BlobHash})
	if err != nil {
		return nil, nil, fmt.Errorf("attachment %q content: %w", id, err)
	}
	return att, b.Data, nil
}

// List returns the attachments of a step.
func (a *Attachments) List(ctx context.Context, stepID string) ([]*store.Attachment, error) {
	return a.obs.AttachmentList(ctx, &store.AttachmentListParams{StepID: stepID})
}
