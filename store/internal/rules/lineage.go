package rules

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// Link is one session of a fork lineage.
type Link struct {
	SessionID       string
	ParentSessionID string
	ForkSequence    int64 // 0 for a root session
	LastSequence    int64
}

// Segment is a run of sequences [From, To] stored under SessionID.
type Segment struct {
	SessionID string
	From, To  int64
}

// Segments cuts the visible log of chain[0] into the stored segments of
// each session, oldest first, restricted to sequences [start, end] (0 means
// unbounded). chain runs from the session itself up to its root.
//
// A session shows its ancestors' steps up to its fork sequence, then its
// own: walking up, each session contributes (ForkSequence, limit] and passes
// min(limit, ForkSequence) on to its parent.
func Segments(chain []Link, start, end int64) []Segment {
	if len(chain) == 0 {
		return nil
	}
	if start < 1 {
		start = 1
	}
	limit := chain[0].LastSequence
	if end > 0 && end < limit {
		limit = end
	}
	var segs []Segment
	for _, l := range chain {
		lo := max(l.ForkSequence+1, start)
		if limit >= lo {
			segs = append(segs, Segment{SessionID: l.SessionID, From: lo, To: limit})
		}
		limit = min(limit, l.ForkSequence)
		if limit < start {
			break
		}
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return segs
}

// SessionCursor is the position after a session in SessionList order
// (UpdatedAt descending, then ID descending).
type SessionCursor struct {
	UpdatedAt time.Time
	ID        string
}

// EncodeCursor returns the opaque cursor of c.
func EncodeCursor(c SessionCursor) string {
	raw := strconv.FormatInt(c.UpdatedAt.UnixNano(), 10) + ":" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor reads a cursor from EncodeCursor; "" means the first page.
func DecodeCursor(s string) (*SessionCursor, error) {
	if s == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, Invalid("malformed session cursor")
	}
	ns, id, ok := strings.Cut(string(raw), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil {
		return nil, Invalid("malformed session cursor")
	}
	return &SessionCursor{UpdatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}

// After reports whether a session at (updatedAt, id) comes after c in
// SessionList order.
func (c *SessionCursor) After(updatedAt time.Time, id string) bool {
	if c == nil {
		return true
	}
	if !updatedAt.Equal(c.UpdatedAt) {
		return updatedAt.Before(c.UpdatedAt)
	}
	return id < c.ID
}

// CheckSessionList validates p and returns its limit and decoded cursor.
func CheckSessionList(p *store.SessionListParams) (int, *SessionCursor, error) {
	if p == nil {
		return 0, nil, Invalid("nil session list params")
	}
	if p.Limit < 0 {
		return 0, nil, Invalid("negative session list limit %d", p.Limit)
	}
	limit := p.Limit
	if limit == 0 {
		limit = DefaultSessionLimit
	}
	limit = min(limit, MaxSessionLimit)
	c, err := DecodeCursor(p.Cursor)
	return limit, c, err
}

// MatchQuery reports whether q is an ASCII-case-insensitive substring of
// one of fields; an empty q matches everything.
func MatchQuery(q string, fields ...string) bool {
	if q == "" {
		return true
	}
	q = LowerASCII(q)
	for _, f := range fields {
		if strings.Contains(LowerASCII(f), q) {
			return true
		}
	}
	return false
}

// LowerASCII lowers ASCII letters only, like SQLite's lower().
func LowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
