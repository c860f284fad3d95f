package rules

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// validStepStatus reports whether s is a known step status.
func validStepStatus(s steptype.StepStatus) bool {
	switch s {
	case steptype.StepCompleted, steptype.StepFailed, steptype.StepWaiting, steptype.StepExpired, steptype.StepCancelled:
		return true
	}
	return false
}

// CheckAppend validates the parameters of StepAppend before anything is read.
func CheckAppend(p *store.StepAppendParams) error {
	if p == nil {
		return Invalid("nil append params")
	}
	for i, s := range p.Steps {
		if s == nil {
			return Invalid("step %d is nil", i)
		}
		if s.ID == "" || s.SessionID == "" {
			return Invalid("step %d needs an id and a session id", i)
		}
		if !s.Kind.Valid() {
			return Invalid("step %q has unknown kind %q", s.ID, s.Kind)
		}
		if !validStepStatus(s.Status) {
			return Invalid("step %q has unknown status %q", s.ID, s.Status)
		}
		if s.Sequence < 0 {
			return Invalid("step %q has negative sequence %d", s.ID, s.Sequence)
		}
	}
	for _, r := range p.Runs {
		if err := CheckRunUpdate(r); err != nil {
			return err
		}
	}
	return nil
}

// CheckSequence fails with ErrConflict unless s may take sequence next of
// its session: Sequence 0 takes any, another value must equal next.
func CheckSequence(s *steptype.Step, next int64) error {
	if s.Sequence != 0 && s.Sequence != next {
		return Conflict("step %q asks for sequence %d of session %q, next is %d", s.ID, s.Sequence, s.SessionID, next)
	}
	return nil
}

// PlaceStep checks s against sequence next (CheckSequence) and returns the
// copy to store there. A zero CreatedAt becomes now; times are normalized
// to UTC.
func PlaceStep(s *steptype.Step, next int64, now time.Time) (*steptype.Step, error) {
	if err := CheckSequence(s, next); err != nil {
		return nil, err
	}
	return place(s, next, now), nil
}

// PlaceClone is PlaceStep returning a deep copy (CloneStep) of the placed
// step, without the intermediate shallow copy.
func PlaceClone(s *steptype.Step, next int64, now time.Time) (*steptype.Step, error) {
	if err := CheckSequence(s, next); err != nil {
		return nil, err
	}
	c := CloneStep(s)
	c.Sequence = next
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = c.CreatedAt.UTC().Round(0)
	return c, nil
}

func place(s *steptype.Step, seq int64, now time.Time) *steptype.Step {
	c := *s
	placeAt(&c, seq, now)
	return &c
}

// placeAt sets c's sequence and normalized creation time.
func placeAt(c *steptype.Step, seq int64, now time.Time) {
	c.Sequence = seq
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = c.CreatedAt.UTC().Round(0)
}

// EncodeStep returns the stored body of a step: its wire JSON. It calls
// MarshalJSON directly: json.Marshal would re-scan and compact the output.
func EncodeStep(s *steptype.Step) ([]byte, error) {
	b, err := s.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode step %q: %w", s.ID, err)
	}
	return b, nil
}

// DecodeStep reads a stored body. It calls UnmarshalJSON directly:
// json.Unmarshal would validate the whole body once more first.
func DecodeStep(b []byte) (*steptype.Step, error) {
	s := new(steptype.Step)
	if err := s.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%w: decode stored step: %v", store.ErrCorrupt, err)
	}
	return s, nil
}

// decodeShare is the fewest bodies a goroutine of DecodeSteps takes: below
// twice that, one goroutine decodes them all.
const decodeShare = 256

// DecodeSteps decodes stored step bodies, in order. A long list (a model
// context of thousands of steps, a session page) is decoded by up to
// GOMAXPROCS goroutines in contiguous shares: decoding is most of such a
// read's time, and the first model request of a long session waits for it.
func DecodeSteps(bodies [][]byte) ([]*steptype.Step, error) {
	out := make([]*steptype.Step, len(bodies))
	n := min(runtime.GOMAXPROCS(0), len(bodies)/decodeShare)
	if n <= 1 {
		for i, b := range bodies {
			s, err := DecodeStep(b)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	errs := make([]error, n)
	share := (len(bodies) + n - 1) / n
	var wg sync.WaitGroup
	for w := range n {
		lo, hi := w*share, min((w+1)*share, len(bodies))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				s, err := DecodeStep(bodies[i])
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = s
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// seqZero is the sequence field of a body encoded with Sequence 0.
var seqZero = []byte(`,"sequence":0,`)

// seqField is the start of the sequence field, up to its number.
const seqField = `,"sequence":`

// PreEncoded is a step encoded before its sequence is known, so a driver
// can do the JSON work outside its critical section.
type PreEncoded struct {
	In   *steptype.Step // the step as given, for CheckSequence
	Step *steptype.Step // placed at sequence 0, CreatedAt set
	body []byte         // wire JSON of Step, its sequence number num digits long
	at   int            // offset of seqZero in body, or -1
	num  int            // digits of the sequence written in body
	// verbatim: body holds Step verbatim (Verbatim).
	verbatim bool
	// placed is Step when PreEncode made a shallow copy: part of p, so
	// that a released PreEncoded serves the next step whole.
	placed steptype.Step
}

// prePool holds the PreEncoded given back by Release, with their body
// buffers.
var prePool sync.Pool // of *PreEncoded

// maxPooledBody bounds the buffers kept in prePool.
const maxPooledBody = 64 << 10

// Release gives p, and its body's buffer, back for a later PreEncode: a
// driver calls it when it no longer needs p (after its last Body call, and
// when nothing reads what Sequenced returned); p must not be used after.
// The bodies Body returned are copies and stay valid.
func (p *PreEncoded) Release() {
	if p.body == nil || cap(p.body) > maxPooledBody {
		return
	}
	// The placed copy shares the given step's memory: not kept alive.
	p.placed = steptype.Step{}
	p.In, p.Step, p.body, p.at, p.num, p.verbatim = nil, nil, p.body[:0], -1, 0, false
	prePool.Put(p)
}

// newPre returns a PreEncoded for s, a released one when there is one.
func newPre(s *steptype.Step) *PreEncoded {
	p, _ := prePool.Get().(*PreEncoded)
	if p == nil {
		p = new(PreEncoded)
	}
	p.In = s
	return p
}

// PreEncode places s at sequence 0 and encodes it.
func PreEncode(s *steptype.Step, now time.Time) (*PreEncoded, error) {
	p := newPre(s)
	p.placed = *s
	placeAt(&p.placed, 0, now)
	p.Step = &p.placed
	return p, p.encode()
}

// PreEncodeClone is PreEncode with Step a deep copy of s (CloneStep), so
// that a driver can return it, its sequence set, without copying it again.
func PreEncodeClone(s *steptype.Step, now time.Time) (*PreEncoded, error) {
	c := CloneStep(s)
	c.Sequence = 0
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = c.CreatedAt.UTC().Round(0)
	p := newPre(s)
	p.Step = c
	return p, p.encode()
}

// encode encodes p.Step into p's buffer (a released body's, when p was).
func (p *PreEncoded) encode() error {
	var err error
	if p.body != nil {
		p.body, p.verbatim, err = p.Step.AppendJSONVerbatim(p.body[:0])
		if err != nil {
			err = fmt.Errorf("encode step %q: %w", p.Step.ID, err)
		}
	} else if p.body, err = EncodeStep(p.Step); err == nil {
		// A first body, made at its size; the check on its own (a
		// released PreEncoded, the usual case, has it from the encoder).
		p.verbatim = WireStable(p.Step)
	}
	if err != nil {
		p.body, p.verbatim = nil, false
		return err
	}
	// Sequence is always written, after the version and three strings:
	// a quote inside a JSON string is escaped (\"), so no string holds
	// `,"sequence":` and its first occurrence is the field itself, within
	// the body's first bytes, whatever nested metadata repeats later.
	p.at, p.num = bytes.Index(p.body, seqZero), 1
	return nil
}

// Verbatim reports whether Step comes back from its body equal to
// NormalizeStep(CloneStep(Step)), as WireStable does (or is false where
// WireStable is true, in cases no engine makes), from what the encoder saw
// while it wrote the body (steptype.Step.AppendJSONVerbatim) instead of a
// second pass over the step's text: a driver may then return the step it
// placed instead of decoding its body.
func (p *PreEncoded) Verbatim() bool { return p.verbatim }

// Body returns the wire JSON of the step at sequence seq: the pre-encoded
// body with its sequence field replaced, byte for byte what EncodeStep
// would return, in a new slice.
func (p *PreEncoded) Body(seq int64) ([]byte, error) {
	if p.at < 0 {
		c := *p.Step
		c.Sequence = seq
		return EncodeStep(&c)
	}
	var nb [20]byte
	num := strconv.AppendInt(nb[:0], seq, 10)
	start := p.at + len(seqField)
	out := make([]byte, 0, len(p.body)-p.num+len(num))
	out = append(out, p.body[:start]...)
	out = append(out, num...)
	return append(out, p.body[start+p.num:]...), nil
}

// Sequenced is Body written into p's own buffer instead of a new slice:
// the sequence's digits replace the previous ones in place (the rest of
// the body moves only when their number changes). What it returns is
// valid until the next Sequenced or Release of p: a driver that keeps it
// longer (an idempotent re-append that returns another append's body, say)
// copies it.
func (p *PreEncoded) Sequenced(seq int64) ([]byte, error) {
	if p.at < 0 {
		return p.Body(seq)
	}
	var nb [20]byte
	num := strconv.AppendInt(nb[:0], seq, 10)
	start := p.at + len(seqField)
	end, n := start+p.num, len(p.body)
	if d := len(num) - p.num; d > 0 {
		p.body = append(p.body, num[:d]...) // room; overwritten below
		copy(p.body[end+d:], p.body[end:n])
	} else if d < 0 {
		copy(p.body[end+d:], p.body[end:n])
		p.body = p.body[:n+d]
	}
	copy(p.body[start:], num)
	p.num = len(num)
	return p.body, nil
}

// AddTotals adds (sign +1) or removes (sign -1) a step's metrics to its
// session's totals.
func AddTotals(sess *steptype.Session, s *steptype.Step, sign int64) {
	sess.InputTokens += sign * s.Metrics.InputTokens
	sess.OutputTokens += sign * s.Metrics.OutputTokens
	sess.Cost += float64(sign) * s.Metrics.Cost
}

// CheckList validates StepList parameters; lineage reports whether the read
// follows the session's fork lineage (no RunID and no Status filter).
func CheckList(p *store.StepListParams) (lineage bool, err error) {
	if p == nil {
		return false, Invalid("nil list params")
	}
	if p.SessionID == "" && p.RunID == "" && p.Status == "" {
		return false, Invalid("step list needs a session id, a run id or a status")
	}
	if p.Status != "" && !validStepStatus(p.Status) {
		return false, Invalid("unknown step status %q", p.Status)
	}
	for _, k := range p.Kinds {
		if !k.Valid() {
			return false, Invalid("unknown step kind %q", k)
		}
	}
	if p.StartSeq < 0 || p.EndSeq < 0 || p.Limit < 0 {
		return false, Invalid("negative sequence bound or limit")
	}
	return p.RunID == "" && p.Status == "", nil
}

// MatchKinds reports whether k is in kinds, or kinds is empty.
func MatchKinds(kinds []steptype.Kind, k steptype.Kind) bool {
	if len(kinds) == 0 {
		return true
	}
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// CheckResolve validates StepResolve parameters.
func CheckResolve(p *store.StepResolveParams) error {
	if p == nil || p.ID == "" {
		return Invalid("resolve needs a step id")
	}
	if p.Status == steptype.StepWaiting || !validStepStatus(p.Status) {
		return Invalid("resolve to status %q: want completed, failed, expired or cancelled", p.Status)
	}
	return validJSON("resolve outputs", p.Outputs)
}

// Resolve checks that s can be resolved by p and applies it: the status, the
// finish time and duration, the content when not empty, the outputs when not
// nil.
func Resolve(s *steptype.Step, p *store.StepResolveParams) error {
	if p.RunID != "" && p.RunID != s.RunID {
		return NotFound("step of run "+p.RunID, p.ID)
	}
	if s.Status != steptype.StepWaiting {
		return Conflict("step %q is %s, not waiting", s.ID, s.Status)
	}
	s.Status = p.Status
	// The request's wait ends now: its duration is the time it waited.
	s.Metrics.FinishedAt = Now(p.Now)
	if !s.Metrics.StartedAt.IsZero() && s.Metrics.FinishedAt.After(s.Metrics.StartedAt) {
		s.Metrics.Duration = s.Metrics.FinishedAt.Sub(s.Metrics.StartedAt)
	}
	if p.Content != "" {
		s.Content = p.Content
	}
	if p.Outputs != nil {
		s.Outputs = Raw(p.Outputs)
	}
	return nil
}
