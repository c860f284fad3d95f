package postgres

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The driver's multi-row statements pass one array per column (unnest of
// text[], bigint[], bytea[], float8[], int[]): a group commit of ~30
// appends sends ~40 arrays of ~30 elements. pgx's generic array codec
// encodes them element by element through an interface (one allocation
// per string or int64 element, ~30 per appended step, and a plan lookup
// per element); fastArrays encodes these five slice types straight into
// PostgreSQL's binary array format instead, with the bytes pgx's codec
// writes (TestFastArraysMatchPgx). A pointer to one of these slices is
// encoded as the slice (a nil pointer as NULL, as pgx does): the group's
// columns are passed so, since a slice boxed in an interface is an
// allocation and a pointer is not. Everything else, scanning included, is
// pgx's own codec.

// fastArrayOIDs are the array types encoded here, with their element type.
var fastArrayOIDs = map[uint32]uint32{
	pgtype.TextArrayOID:   pgtype.TextOID,
	pgtype.Int8ArrayOID:   pgtype.Int8OID,
	pgtype.Int4ArrayOID:   pgtype.Int4OID,
	pgtype.Float8ArrayOID: pgtype.Float8OID,
	pgtype.ByteaArrayOID:  pgtype.ByteaOID,
}

// registerFastArrays replaces, in the connection's type map, the codecs
// of the fastArrayOIDs by fastArrays wrapping them.
func registerFastArrays(_ context.Context, conn *pgx.Conn) error {
	useFastArrays(conn.TypeMap())
	return nil
}

// useFastArrays replaces, in m, the codecs of the fastArrayOIDs by
// fastArrays wrapping them, sharing one parameter buffer (m is one
// connection's map, used by one goroutine at a time).
func useFastArrays(m *pgtype.Map) {
	scratch := &paramScratch{}
	for oid := range fastArrayOIDs {
		if t, ok := m.TypeForOID(oid); ok {
			m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: fastArrays{Codec: t.Codec, scratch: scratch}})
		}
	}
}

// fastArrays is pgx's codec of an array type, with binary encode plans of
// its own for []string (text[]), []int64 (bigint[]), []int32 (int[]),
// []float64 (float8[]) and [][]byte (bytea[], a nil element is NULL).
type fastArrays struct {
	pgtype.Codec
	scratch *paramScratch
}

func (c fastArrays) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode {
		switch value.(type) {
		case []string, *[]string:
			if oid == pgtype.TextArrayOID {
				return stringsPlan{c.scratch}
			}
		case []int64, *[]int64:
			if oid == pgtype.Int8ArrayOID {
				return int64sPlan.with(c.scratch)
			}
		case []int32, *[]int32:
			if oid == pgtype.Int4ArrayOID {
				return int32sPlan.with(c.scratch)
			}
		case []float64, *[]float64:
			if oid == pgtype.Float8ArrayOID {
				return float64sPlan.with(c.scratch)
			}
		case [][]byte, *[][]byte:
			if oid == pgtype.ByteaArrayOID {
				return bytesPlan{c.scratch}
			}
		}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// maxScratch bounds the parameter buffer a connection keeps.
const maxScratch = 1 << 20

// paramScratch is a connection's parameter buffer, reused by every
// statement whose array parameters outgrow pgx's own. pgx encodes a
// statement's parameters into one buffer (appending to the one it passes
// to Encode and keeping the one returned), copies them into its Bind
// message, and before the next statement drops any buffer over 256 bytes
// for a new one: a group's insert (~25 bodies) regrew it array by array,
// and the next group started again from 256 bytes. An array that does not
// fit moves the parameters encoded so far into the scratch buffer instead
// (the buffer pgx goes on with for the rest of the statement); pgx drops
// it before the next statement, whose parameters may then reuse it. Its
// contents only live from a statement's encoding to its Bind, which on one
// connection is never interleaved with another statement's.
type paramScratch struct{ b []byte }

// room returns buf, or its contents moved to a larger buffer, with room for
// n more bytes: the scratch buffer when it is not in use (buf is not it),
// else a new one, which becomes the scratch buffer.
func (s *paramScratch) room(buf []byte, n int) []byte {
	if cap(buf)-len(buf) >= n {
		return buf
	}
	need := len(buf) + n
	if s == nil || need > maxScratch {
		return append(make([]byte, 0, need), buf...)
	}
	if cap(s.b) < need || sameArray(buf, s.b) {
		// Too small, or in use by this statement already: a larger one,
		// with room for the arrays that usually follow.
		s.b = make([]byte, 0, min(max(2*need, 4<<10), maxScratch))
	}
	s.b = append(s.b[:0], buf...)
	return s.b
}

// sameArray reports whether a and b share their backing array (both end
// at the same address).
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// arrayHeader appends the header of a one-dimensional array of n elements
// of type elem (an empty one too, as pgx writes it).
func arrayHeader(buf []byte, n int, hasNull bool, elem uint32) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 1)
	null := uint32(0)
	if hasNull {
		null = 1
	}
	buf = binary.BigEndian.AppendUint32(buf, null)
	buf = binary.BigEndian.AppendUint32(buf, elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1) // lower bound
}

type stringsPlan struct{ s *paramScratch }

// sliceArg returns the slice value holds: value itself, or what it points
// to (nil for a nil pointer).
func sliceArg[S any](value any) S {
	if p, ok := value.(*S); ok {
		if p == nil {
			var zero S
			return zero
		}
		return *p
	}
	return value.(S)
}

func (p stringsPlan) Encode(value any, buf []byte) ([]byte, error) {
	v := sliceArg[[]string](value)
	if v == nil {
		return nil, nil
	}
	size := 20
	for _, s := range v {
		size += 4 + len(s)
	}
	buf = p.s.room(buf, size) // one growth for the whole array
	buf = arrayHeader(buf, len(v), false, pgtype.TextOID)
	for _, s := range v {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	return buf, nil
}

// fixedPlan encodes a slice of fixed-width numbers: each element is its
// width (4 bytes) and its big-endian bytes, put by put.
type fixedPlan[T int64 | int32 | float64] struct {
	elem  uint32 // the element type's OID
	width uint32
	put   func(buf []byte, x T) []byte
	s     *paramScratch
}

// with returns p growing its buffer with s.
func (p fixedPlan[T]) with(s *paramScratch) fixedPlan[T] {
	p.s = s
	return p
}

func (p fixedPlan[T]) Encode(value any, buf []byte) ([]byte, error) {
	v := sliceArg[[]T](value)
	if v == nil {
		return nil, nil
	}
	buf = p.s.room(buf, 20+len(v)*int(4+p.width)) // one growth for the whole array
	buf = arrayHeader(buf, len(v), false, p.elem)
	for _, x := range v {
		buf = binary.BigEndian.AppendUint32(buf, p.width)
		buf = p.put(buf, x)
	}
	return buf, nil
}

var (
	int64sPlan = fixedPlan[int64]{pgtype.Int8OID, 8, func(b []byte, x int64) []byte {
		return binary.BigEndian.AppendUint64(b, uint64(x))
	}, nil}
	int32sPlan = fixedPlan[int32]{pgtype.Int4OID, 4, func(b []byte, x int32) []byte {
		return binary.BigEndian.AppendUint32(b, uint32(x))
	}, nil}
	float64sPlan = fixedPlan[float64]{pgtype.Float8OID, 8, func(b []byte, x float64) []byte {
		return binary.BigEndian.AppendUint64(b, math.Float64bits(x))
	}, nil}
)

type bytesPlan struct{ s *paramScratch }

func (p bytesPlan) Encode(value any, buf []byte) ([]byte, error) {
	v := sliceArg[[][]byte](value)
	if v == nil {
		return nil, nil
	}
	hasNull := false
	size := 0
	for _, b := range v {
		hasNull = hasNull || b == nil
		size += 4 + len(b)
	}
	buf = p.s.room(buf, 20+size) // one growth for the whole array (bodies of many steps)
	buf = arrayHeader(buf, len(v), hasNull, pgtype.ByteaOID)
	for _, b := range v {
		if b == nil {
			buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1: NULL
			continue
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	return buf, nil
}
