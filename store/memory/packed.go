package memory

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"time"
	"unsafe"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// packedStep is a stored step in a pointer-light form. The store keeps
// every step for its lifetime, and the garbage collector marks all of them
// in every cycle: a steptype.Step is a 704-byte struct of about thirty
// pointer words plus its own slices and metadata map, while a packed step
// is its numbers in place and everything of variable length (strings, raw
// JSON, tool calls, a metadata map of scalars) concatenated in one byte
// slice the collector marks without scanning.
//
// A packedStep is immutable once built: b is never written again, so the
// strings of an unpacked step alias it (see str). A stored step is
// replaced by packing a new one, never changed in place.
type packedStep struct {
	b    []byte         // the variable-length fields, in packOrder
	meta map[string]any // metadata that is not a flat map of scalars (a deep copy), else nil
	vec  []float32      // Vector (a copy)
	prog *steptype.Progress
	packedNums
}

// packedNums are a packed step's fixed-size fields: no pointers, so that
// a row (stepRow) keeps them without giving the collector anything to
// follow.
type packedNums struct {
	seq int64
	hop int
	// Metrics and CreatedAt.
	started, finished, created packedTime
	dur, ftl                   time.Duration
	in, out, cached, reasoning int64
	cost                       float64
	attempt                    int
	errAttempt                 int
	cpu                        time.Duration
	allocBytes, allocObjects   int64
	overlapping                int32 // shares its word with flags
	flags                      uint8
}

const (
	packErr         uint8 = 1 << iota // Error is set (its strings are in b)
	packErrRecover                    // Error.Recoverable
	packMetaFlat                      // Metadata is a flat map of scalars, in b
	packMetaPointer                   // Metadata is meta
)

// packedTime is a time.Time as the wire keeps it: UTC, no monotonic
// reading (rules.NormalizeStep), in seconds and nanoseconds.
type packedTime struct {
	sec  int64
	nsec int32
	set  bool
}

func packTime(t time.Time) packedTime {
	if t.IsZero() {
		return packedTime{}
	}
	return packedTime{sec: t.Unix(), nsec: int32(t.Nanosecond()), set: true}
}

func (p packedTime) time() time.Time {
	if !p.set {
		return time.Time{}
	}
	return time.Unix(p.sec, int64(p.nsec)).UTC()
}

// Metadata value tags of a flat map in b.
const (
	tagNil byte = iota
	tagString
	tagFloat
	tagFalse
	tagTrue
)

// pack returns the stored form of s, a deep copy: s is not changed and
// nothing of the result is shared with it but the immutable Progress
// (which rules.CloneStep shares too). Its times are kept as the wire keeps
// them (UTC, no monotonic reading) and its metadata as decoded JSON, as in
// every stored step; normalized also truncates its durations, to complete
// what rules.NormalizeStep does.
//
// Its bytes come from ar (nil: allocated on their own).
func pack(s *steptype.Step, ar *arena) packedStep {
	var p packedStep
	packTo(&p, s, ar)
	return p
}

// packTo is pack into the zero *p (a new row's), field by field: without
// a copy of the packed step, write barriers included.
func packTo(p *packedStep, s *steptype.Step, ar *arena) {
	m := &s.Metrics
	p.prog, p.seq, p.hop = s.Progress, s.Sequence, s.Hop
	p.started, p.finished, p.created = packTime(m.StartedAt), packTime(m.FinishedAt), packTime(s.CreatedAt)
	p.dur, p.ftl = m.Duration, m.FirstTokenLatency
	p.in, p.out, p.cached, p.reasoning = m.InputTokens, m.OutputTokens, m.CachedTokens, m.ReasoningTokens
	p.cost, p.attempt = m.Cost, m.Attempt
	p.cpu, p.allocBytes, p.allocObjects = m.CPUTime, m.AllocBytes, m.AllocObjects
	p.overlapping = int32(min(m.OverlappingSteps, math.MaxInt32))
	if s.Vector != nil {
		p.vec = slices.Clone(s.Vector)
	}
	// A flat map of scalars is JSON already (NormalizeMetadata would
	// return it as it is): one pass tells so and sizes it. Any other map is
	// normalized first, and may be flat then (an int becomes a float64).
	meta := s.Metadata
	metaSize := 0
	if meta != nil {
		flat := false
		if metaSize, flat = flatSize(meta); !flat {
			meta = rules.NormalizeMetadata(meta)
			metaSize, flat = flatSize(meta)
		}
		if flat {
			p.flags |= packMetaFlat
		} else {
			p.flags |= packMetaPointer
			p.meta = rules.CloneMetadata(meta)
		}
	}
	// A bound of the size (exact but for a byte per raw field and count):
	// b is allocated once.
	an := &s.Annotations
	n := 1 + sizeOf(len(s.ID)) + sizeOf(len(s.SessionID)) + sizeOf(len(s.RunID)) + sizeOf(len(s.Kind)) +
		sizeOf(len(s.Status)) + sizeOf(len(s.Role)) + sizeOf(len(s.ParentID)) + sizeOf(len(s.Name)) +
		sizeOf(len(s.Content)) + sizeOf(len(s.Reasoning)) + sizeOf(len(s.ToolCallID)) + sizeOf(len(s.ToolName)) +
		sizeOf(len(s.Inputs)+1) + sizeOf(len(s.Outputs)+1) + sizeOf(len(s.StatePatch)+1) +
		sizeOf(len(m.Model)) + sizeOf(len(m.Provider)) + sizeOf(len(an.State)) + sizeOf(len(an.StateSummary)) +
		sizeOf(len(an.Goal)) + sizeOf(len(an.GoalSummary)) + sizeOf(len(an.Action)) + sizeOf(len(an.ActionSummary)) +
		sizeOf(len(s.Embedder)) + sizeOf(len(s.Replay)) + sizeOf(len(s.Fingerprint)) + sizeOf(len(s.ToolCalls)+1)
	for _, tc := range s.ToolCalls {
		n += sizeOf(len(tc.ID)) + sizeOf(len(tc.Name)) + sizeOf(len(tc.Arguments)+1)
	}
	if e := s.Error; e != nil {
		n += sizeOf(len(e.Message)) + sizeOf(len(e.Cause)) + sizeOf(len(e.Class)) + sizeOf(len(e.Code))
	}
	if p.flags&packMetaFlat != 0 {
		n += metaSize
	}
	a := an
	b := ar.bytes(n)
	for _, f := range [...]string{s.ID, s.SessionID, s.RunID, string(s.Kind), string(s.Status), string(s.Role),
		s.ParentID, s.Name, s.Content, s.Reasoning, s.ToolCallID, s.ToolName} {
		b = putString(b, f)
	}
	b = putRaw(putRaw(putRaw(b, s.Inputs), s.Outputs), s.StatePatch)
	for _, f := range [...]string{m.Model, m.Provider, a.State, a.StateSummary, a.Goal, a.GoalSummary,
		a.Action, a.ActionSummary, s.Embedder, s.Replay, s.Fingerprint} {
		b = putString(b, f)
	}
	if e := s.Error; e != nil {
		p.flags |= packErr
		if e.Recoverable {
			p.flags |= packErrRecover
		}
		p.errAttempt = e.Attempt
		b = putString(putString(putString(putString(b, e.Message), e.Cause), string(e.Class)), e.Code)
	}
	b = putCount(b, s.ToolCalls == nil, len(s.ToolCalls))
	for _, tc := range s.ToolCalls {
		b = putRaw(putString(putString(b, tc.ID), tc.Name), tc.Arguments)
	}
	if p.flags&packMetaFlat != 0 {
		b = binary.AppendUvarint(b, uint64(len(meta)))
		for k, v := range meta {
			b = putString(b, k)
			switch v := v.(type) {
			case nil:
				b = append(b, tagNil)
			case string:
				b = putString(append(b, tagString), v)
			case float64:
				b = binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(v))
			case bool:
				if v {
					b = append(b, tagTrue)
				} else {
					b = append(b, tagFalse)
				}
			}
		}
	}
	p.b = b
}

// normalized truncates the durations to whole microseconds (see pack).
func (p *packedNums) normalized() {
	p.dur, p.ftl = p.dur.Truncate(time.Microsecond), p.ftl.Truncate(time.Microsecond)
}

// sizeOf is the size of a length-prefixed field of n bytes (a count
// prefixed field with n-1 elements, a raw field of n-1 bytes: the prefix
// of n).
func sizeOf(n int) int {
	return (bits.Len64(uint64(n)|1)+6)/7 + n // the uvarint's bytes: 7 bits each
}

// flatSize reports whether m holds only what a flat map in b holds: nil,
// strings, float64 and bools (as decoded JSON has them), and if so its
// size in b.
func flatSize(m map[string]any) (int, bool) {
	n := sizeOf(len(m))
	for k, v := range m {
		n += sizeOf(len(k)) + 1
		switch v := v.(type) {
		case nil, bool:
		case string:
			n += sizeOf(len(v))
		case float64:
			n += 8
		default:
			return 0, false
		}
	}
	return n, true
}

func putString(b []byte, s string) []byte {
	if len(s) < 0x80 { // the common short field: a one-byte length
		return append(append(b, byte(len(s))), s...)
	}
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// putRaw writes raw JSON, telling nil from empty.
func putRaw(b []byte, r json.RawMessage) []byte {
	if r == nil {
		return append(b, 0)
	}
	return append(binary.AppendUvarint(b, uint64(len(r))+1), r...)
}

func putCount(b []byte, isNil bool, n int) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

// reader decodes b in packOrder.
type reader struct {
	b []byte
	i int
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.i:])
	r.i += n
	return v
}

// str returns the next string, aliasing b: b is never written once
// packed, so the string is as immutable as any.
func (r *reader) str() string {
	n := int(r.uvarint())
	if n == 0 {
		return ""
	}
	s := unsafe.String(&r.b[r.i], n)
	r.i += n
	return s
}

// raw returns the next raw JSON as a window of b (not a copy): the
// caller copies it.
func (r *reader) raw() (w []byte, isNil bool) {
	n := int(r.uvarint())
	if n == 0 {
		return nil, true
	}
	n--
	w = r.b[r.i : r.i+n]
	r.i += n
	return w, false
}

func (r *reader) count() (n int, isNil bool) {
	v := r.uvarint()
	if v == 0 {
		return 0, true
	}
	return int(v - 1), false
}

// role is the step's Role.
func (p *packedStep) role() steptype.Role {
	r := reader{b: p.b}
	for range 5 {
		r.i += int(r.uvarint())
	}
	return steptype.Role(r.str())
}

// step returns a new Step equal to what was packed, normalized as
// rules.NormalizeStep leaves it: a deep copy as rules.CloneStep makes one
// (its raw JSON, tool calls, error, vector and metadata are its own; its
// strings alias the packed bytes, which are never written).
func (p *packedStep) step() *steptype.Step {
	s := &steptype.Step{Sequence: p.seq, Hop: p.hop, Progress: p.prog, CreatedAt: p.created.time()}
	m := &s.Metrics
	m.StartedAt, m.FinishedAt = p.started.time(), p.finished.time()
	m.Duration, m.FirstTokenLatency = p.dur, p.ftl
	m.InputTokens, m.OutputTokens, m.CachedTokens, m.ReasoningTokens = p.in, p.out, p.cached, p.reasoning
	m.Cost, m.Attempt = p.cost, p.attempt
	m.CPUTime, m.AllocBytes, m.AllocObjects, m.OverlappingSteps = p.cpu, p.allocBytes, p.allocObjects, int(p.overlapping)
	r := reader{b: p.b}
	s.ID, s.SessionID, s.RunID = r.str(), r.str(), r.str()
	s.Kind, s.Status, s.Role = steptype.Kind(r.str()), steptype.StepStatus(r.str()), steptype.Role(r.str())
	s.ParentID, s.Name, s.Content, s.Reasoning, s.ToolCallID, s.ToolName = r.str(), r.str(), r.str(), r.str(), r.str(), r.str()
	// The raw JSON of the step and of its tool calls is copied into one
	// allocation, each window capped so that appending to one cannot
	// reach the next.
	in, inNil := r.raw()
	out, outNil := r.raw()
	patch, patchNil := r.raw()
	m.Model, m.Provider = r.str(), r.str()
	a := &s.Annotations
	a.State, a.StateSummary, a.Goal, a.GoalSummary, a.Action, a.ActionSummary = r.str(), r.str(), r.str(), r.str(), r.str(), r.str()
	s.Embedder, s.Replay, s.Fingerprint = r.str(), r.str(), r.str()
	if p.flags&packErr != 0 {
		s.Error = &steptype.StepError{Message: r.str(), Cause: r.str(), Class: steptype.ErrorClass(r.str()), Code: r.str(),
			Attempt: p.errAttempt, Recoverable: p.flags&packErrRecover != 0}
	}
	calls, callsNil := r.count()
	rawLen := len(in) + len(out) + len(patch)
	callsAt := r.i
	if !callsNil {
		s.ToolCalls = make([]steptype.ToolCall, calls)
		for i := range s.ToolCalls {
			s.ToolCalls[i].ID, s.ToolCalls[i].Name = r.str(), r.str()
			args, _ := r.raw()
			rawLen += len(args)
		}
	}
	var buf []byte
	if rawLen > 0 {
		buf = make([]byte, 0, rawLen)
	}
	s.Inputs, buf = copyRaw(buf, in, inNil)
	s.Outputs, buf = copyRaw(buf, out, outNil)
	s.StatePatch, buf = copyRaw(buf, patch, patchNil)
	if !callsNil {
		cr := reader{b: p.b, i: callsAt}
		for i := range s.ToolCalls {
			cr.str()
			cr.str()
			args, isNil := cr.raw()
			s.ToolCalls[i].Arguments, buf = copyRaw(buf, args, isNil)
		}
		r.i = cr.i
	}
	switch {
	case p.flags&packMetaFlat != 0:
		n := int(r.uvarint())
		meta := make(map[string]any, n)
		for range n {
			k := r.str()
			tag := r.b[r.i]
			r.i++
			switch tag {
			case tagNil:
				meta[k] = nil
			case tagString:
				meta[k] = r.str()
			case tagFloat:
				meta[k] = math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.i:]))
				r.i += 8
			case tagFalse:
				meta[k] = false
			case tagTrue:
				meta[k] = true
			}
		}
		s.Metadata = meta
	case p.flags&packMetaPointer != 0:
		s.Metadata = rules.CloneMetadata(p.meta)
	}
	if p.vec != nil {
		s.Vector = slices.Clone(p.vec)
	}
	return s
}

// copyRaw appends w to buf and returns the copy, capped at its length (nil
// stays nil, empty stays empty).
func copyRaw(buf, w []byte, isNil bool) (json.RawMessage, []byte) {
	if isNil {
		return nil, buf
	}
	if len(w) == 0 {
		return json.RawMessage{}, buf
	}
	at := len(buf)
	buf = append(buf, w...)
	return json.RawMessage(buf[at:len(buf):len(buf)]), buf
}

// addTotals adds the step's usage to a session's totals (sign 1) or takes
// it out (-1), as rules.AddTotals does for a Step.
func (p *packedNums) addTotals(sess *steptype.Session, sign int64) {
	sess.InputTokens += sign * p.in
	sess.OutputTokens += sign * p.out
	sess.Cost += float64(sign) * p.cost
}
