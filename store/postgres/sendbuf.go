package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgx writes a batch's messages into its frontend's write buffer, which it
// replaces by a new 1 KB one after every flush of more than 1 KB: each
// group's write batch (~25 step bodies, tens of KB) regrew it from 1 KB by
// doubling, about twice its size allocated per round trip. A connection
// keeps a send buffer of its own instead (in its CustomData), which
// useSendBuffer hands to the frontend before a batch that will not fit in
// 1 KB: the frontend writes the batch into it, sends it, and drops it for
// a new 1 KB buffer (or keeps it, when the batch turned out smaller; either
// way only this connection ever writes into it, one batch at a time).

// sendBufferKey is the CustomData key of a connection's send buffer.
const sendBufferKey = "stepwise.sendBuffer"

// useSendBuffer hands pc's frontend the connection's send buffer, large
// enough for b, when b needs more than the frontend's own 1 KB.
func useSendBuffer(pc *pgconn.PgConn, b *pgx.Batch) {
	n := batchBytes(b)
	if n <= 1<<10 || n > maxScratch {
		return
	}
	data := pc.CustomData()
	sb, _ := data[sendBufferKey].(*[]byte)
	if sb == nil {
		sb = new([]byte)
		data[sendBufferKey] = sb
	}
	if cap(*sb) < n {
		*sb = make([]byte, 0, n+n/4)
	}
	pc.Frontend().Send(adoptBuffer{*sb})
}

// adoptBuffer is a message that sends nothing: the frontend appends it to
// its write buffer by taking what Encode returns as its buffer, which is
// buf holding what was pending.
type adoptBuffer struct{ buf []byte }

func (adoptBuffer) Frontend() {}

func (adoptBuffer) Decode([]byte) error { return errors.New("adoptBuffer: not a message") }

func (m adoptBuffer) Encode(dst []byte) ([]byte, error) { return append(m.buf[:0], dst...), nil }

// batchBytes estimates the bytes of b's messages (Bind, Describe, Execute
// per statement, the parameters in binary form): a little over the real
// size, so that the batch fits in one buffer.
func batchBytes(b *pgx.Batch) int {
	n := 64
	for _, q := range b.QueuedQueries {
		n += 96
		for _, a := range q.Arguments {
			n += 8 + argBytes(a)
		}
	}
	return n
}

// argBytes is the size of a parameter in binary form, at least (a pointer
// to a slice, a group's column, is the slice's).
func argBytes(a any) int {
	switch v := a.(type) {
	case *[]string:
		if v == nil {
			return 0
		}
		return argBytes(*v)
	case *[][]byte:
		if v == nil {
			return 0
		}
		return argBytes(*v)
	case *[]int64:
		if v == nil {
			return 0
		}
		return argBytes(*v)
	case *[]float64:
		if v == nil {
			return 0
		}
		return argBytes(*v)
	case *[]int32:
		if v == nil {
			return 0
		}
		return argBytes(*v)
	case nil:
		return 0
	case string:
		return len(v)
	case []byte:
		return len(v)
	case []string:
		n := 20
		for _, s := range v {
			n += 4 + len(s)
		}
		return n
	case [][]byte:
		n := 20
		for _, s := range v {
			n += 4 + len(s)
		}
		return n
	case []int64:
		return 20 + 12*len(v)
	case []float64:
		return 20 + 12*len(v)
	case []int32:
		return 20 + 8*len(v)
	default:
		return 16
	}
}
