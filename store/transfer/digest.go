package transfer

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"slices"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Digest is what a session holds in one store: counts of its rows and a
// SHA-256 over their content (the session row, its own steps in sequence
// order, its runs without their leases, its evals, annotations,
// attachments and step events, and its vectors).
type Digest struct {
	Steps, Runs, Evals, Annotations, Attachments, Events, Vectors int64
	Hash                                                          string // lowercase hex, over everything but the vectors
	// VectorHash is the SHA-256 of the vectors.
	VectorHash string
}

// Equal reports whether two digests agree.
func (d *Digest) Equal(o *Digest) bool { return *d == *o }

// String renders the counts and the hash, as stepwise copy prints them.
func (d *Digest) String() string {
	return fmt.Sprintf("steps=%d runs=%d evals=%d annotations=%d attachments=%d events=%d vectors=%d sha256=%s",
		d.Steps, d.Runs, d.Evals, d.Annotations, d.Attachments, d.Events, d.Vectors, d.Hash)
}

// hasher accumulates a digest. Steps are hashed as they stream; the other
// parts, loaded whole, are sorted by id first so that both stores hash the
// same bytes whatever order they list in.
type hasher struct {
	h hash.Hash
	d Digest
	// vec hashes the vectors apart, into VectorHash.
	vec hash.Hash
}

func newHasher(s *steptype.Session) *hasher {
	h := &hasher{h: sha256.New(), vec: sha256.New()}
	h.part("session", s)
	return h
}

func (h *hasher) part(tag string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(err.Error())
	}
	h.h.Write([]byte(tag))
	h.h.Write(b)
	h.h.Write([]byte{'\n'})
}

func (h *hasher) step(s *steptype.Step) error {
	b, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	h.h.Write([]byte("step"))
	h.h.Write(b)
	h.h.Write([]byte{'\n'})
	h.d.Steps++
	return nil
}

func (h *hasher) runs(rs []*steptype.Run) {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b *steptype.Run) int { return cmp.Compare(a.ID, b.ID) })
	for _, r := range rs {
		c := *r
		clearLease(&c)
		h.part("run", &c)
	}
	h.d.Runs = int64(len(rs))
}

func sortedBy[T any](xs []T, key func(T) string) []T {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return xs
}

func (h *hasher) evals(es []*store.Eval) {
	for _, e := range sortedBy(es, func(e *store.Eval) string { return e.ID }) {
		h.part("eval", e)
	}
	h.d.Evals = int64(len(es))
}

func (h *hasher) annotations(as []*store.Annotation) {
	for _, a := range sortedBy(as, func(a *store.Annotation) string { return a.StepID }) {
		h.part("annotation", a)
	}
	h.d.Annotations = int64(len(as))
}

func (h *hasher) attachments(as []*store.Attachment) {
	for _, a := range sortedBy(as, func(a *store.Attachment) string { return a.ID }) {
		h.part("attachment", a)
	}
	h.d.Attachments = int64(len(as))
}

func (h *hasher) events(es []*store.StepEvent) {
	for _, e := range sortedBy(es, func(e *store.StepEvent) string { return e.ID }) {
		h.part("event", e)
	}
	h.d.Events = int64(len(es))
}

func (h *hasher) vector(v *store.ExportedVector) {
	h.vec.Write([]byte(v.Embedder + "\x00" + v.StepID + "\x00"))
	var b [4]byte
	for _, x := range v.Vector {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h.vec.Write(b[:])
	}
	h.d.Vectors++
}

func (h *hasher) sum() *Digest {
	d := h.d
	if d.Vectors >= 0 {
		d.VectorHash = hex.EncodeToString(h.vec.Sum(nil))
	}
	d.Hash = hex.EncodeToString(h.h.Sum(nil))
	return &d
}

// digest reads a session back from a store, the way write reads its
// source.
func digest(ctx context.Context, st store.Store, s *steptype.Session) (*Digest, error) {
	got, err := st.SessionGet(ctx, &store.SessionGetParams{ID: s.ID})
	if err != nil {
		return nil, err
	}
	h := newHasher(got)
	for start := got.ForkSequence + 1; start <= got.LastSequence; {
		steps, err := st.StepList(ctx, &store.StepListParams{SessionID: got.ID, StartSeq: start, EndSeq: got.LastSequence, Limit: 1000})
		if err != nil {
			return nil, err
		}
		if len(steps) == 0 {
			break
		}
		for _, s := range steps {
			if err := h.step(s); err != nil {
				return nil, err
			}
		}
		start = steps[len(steps)-1].Sequence + 1
	}
	if err := digestObservation(ctx, st, got.ID, h); err != nil {
		return nil, err
	}
	if err := digestVectors(ctx, st, got.ID, h); err != nil {
		return nil, err
	}
	runs, err := st.RunList(ctx, &store.RunListParams{SessionID: got.ID})
	if err != nil {
		return nil, err
	}
	h.runs(runs)
	return h.sum(), nil
}

func digestObservation(ctx context.Context, obs store.ObservationStore, id string, h *hasher) error {
	evals, err := obs.EvalList(ctx, &store.EvalListParams{SessionID: id})
	if err != nil {
		return err
	}
	h.evals(evals)
	anns, err := obs.AnnotationList(ctx, &store.AnnotationListParams{SessionID: id})
	if err != nil {
		return err
	}
	h.annotations(anns)
	atts, err := obs.AttachmentList(ctx, &store.AttachmentListParams{SessionID: id})
	if err != nil {
		return err
	}
	h.attachments(atts)
	evs, err := obs.StepEventList(ctx, &store.StepEventListParams{SessionID: id})
	if err != nil {
		return err
	}
	h.events(evs)
	return nil
}

func digestVectors(ctx context.Context, ve store.VectorExporter, id string, h *hasher) error {
	p := &store.VectorExportParams{SessionID: id, Limit: 1000}
	for {
		page, err := ve.VectorExport(ctx, p)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		for _, v := range page {
			h.vector(v)
		}
		last := page[len(page)-1]
		p.AfterStepID, p.AfterEmbedder = last.StepID, last.Embedder
	}
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
