package otlpingest

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// derivedID returns a UUID-shaped id (version 8, RFC 9562) that is a
// function of parts: the same span always maps to the same step, session
// or run, whichever export carries it and however often.
func derivedID(parts ...string) string {
	h := sha256.Sum256([]byte("stepwise-otlp\x00" + strings.Join(parts, "\x00")))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// SessionID returns the id of the session that spans with the given
// conversation id (gen_ai.conversation.id, session.id) are recorded in.
func SessionID(conversation string) string { return derivedID("session", "conv", conversation) }

// TraceSessionID returns the id of the session of a trace that names no
// conversation; traceID is the lower-case hex trace id.
func TraceSessionID(traceID string) string { return derivedID("session", "trace", traceID) }

// RunID returns the id of the run of a trace (lower-case hex trace id).
func RunID(traceID string) string { return derivedID("run", traceID) }

func spanStepID(traceID, spanID string) string { return derivedID("span", traceID, spanID) }

func toolStepID(session, callID string) string { return derivedID("tool", session, callID) }

func messageStepID(session, anchor string, offset int, role string) string {
	return derivedID("msg", session, anchor, itoa(offset), role)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
