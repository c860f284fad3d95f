package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Position orders the events of a session. A committed step with sequence N
// is at (N, 0); every other event emitted after it and before the next
// commit is at (N, 1), (N, 2)… So a step's deltas always come before its
// completion, and a client that reconnects with its last position gets
// every later event exactly once.
type Position struct {
	Seq int64
	Idx int64
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.Seq < q.Seq || (p.Seq == q.Seq && p.Idx < q.Idx)
}

// String formats the position as "SEQ:IDX", the SSE event id.
func (p Position) String() string {
	return strconv.FormatInt(p.Seq, 10) + ":" + strconv.FormatInt(p.Idx, 10)
}

// ParsePosition parses "SEQ:IDX" (or a bare "SEQ", meaning "SEQ:0").
func ParsePosition(s string) (Position, error) {
	seqPart, idxPart, hasIdx := strings.Cut(strings.TrimSpace(s), ":")
	seq, err := strconv.ParseInt(seqPart, 10, 64)
	if err != nil || seq < 0 {
		return Position{}, fmt.Errorf("stepwise: invalid event position %q: want SEQ:IDX with non-negative integers", s)
	}
	var idx int64
	if hasIdx {
		idx, err = strconv.ParseInt(idxPart, 10, 64)
		if err != nil || idx < 0 {
			return Position{}, fmt.Errorf("stepwise: invalid event position %q: want SEQ:IDX with non-negative integers", s)
		}
	}
	return Position{Seq: seq, Idx: idx}, nil
}
