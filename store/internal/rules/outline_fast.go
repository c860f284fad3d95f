package rules

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// fastOutline decodes the members of a stored body into an outline without
// encoding/json for the plain members (unescaped strings, integers, times,
// metrics), which are most of a step. ok is false for anything unusual (an
// escaped string, a newer wire version, a value of an unexpected type): the
// caller then takes the encoding/json path, which decides.
func fastOutline(ml memberList, kind steptype.Kind) (s *steptype.Step, ok bool) {
	s = &steptype.Step{}
	for _, m := range ml.order {
		v := m.value
		if string(v) == "null" {
			continue // encoding/json leaves the zero value (or nil)
		}
		var good bool
		switch string(m.rawKey[1 : len(m.rawKey)-1]) {
		case "v":
			var n int64
			n, good = plainInt(v)
			good = good && n <= steptype.WireVersion
		case "id":
			s.ID, good = plainString(v)
		case "session_id":
			s.SessionID, good = plainString(v)
		case "run_id":
			s.RunID, good = plainString(v)
		case "sequence":
			s.Sequence, good = plainInt(v)
		case "parent_id":
			s.ParentID, good = plainString(v)
		case "hop":
			var n int64
			n, good = plainInt(v)
			s.Hop = int(n)
		case "kind":
			var k string
			k, good = plainString(v)
			s.Kind = steptype.Kind(k)
		case "name":
			s.Name, good = plainString(v)
		case "status":
			var st string
			st, good = plainString(v)
			s.Status = steptype.StepStatus(st)
		case "role":
			var r string
			r, good = plainString(v)
			s.Role = steptype.Role(r)
		case "content":
			if d := stringDigest(v); d != nil {
				s.Content, good = string(d[1:len(d)-1]), true
			}
		case "reasoning":
			if d := stringDigest(v); d != nil {
				s.Reasoning, good = string(d[1:len(d)-1]), true
			}
		case "tool_call_id":
			s.ToolCallID, good = plainString(v)
		case "tool_name":
			s.ToolName, good = plainString(v)
		case "replay":
			s.Replay, good = plainString(v)
		case "fingerprint":
			s.Fingerprint, good = plainString(v)
		case "created_at":
			good = s.CreatedAt.UnmarshalJSON(v) == nil
		case "metrics":
			s.Metrics, good = plainMetrics(v)
		case "inputs":
			s.Inputs, good = payload(v, kind), true
		case "outputs":
			s.Outputs, good = payload(v, kind), true
		case "tool_calls":
			var raw json.RawMessage
			if raw, good = toolCallsRaw(v); good {
				good = json.Unmarshal(raw, &s.ToolCalls) == nil
			}
		case "error":
			good = json.Unmarshal(v, &s.Error) == nil
		case "annotations":
			good = json.Unmarshal(v, &s.Annotations) == nil
		case "progress":
			good = json.Unmarshal(v, &s.Progress) == nil
		default:
			good = true // dropped (state_patch, vector, embedder, metadata) or unknown
		}
		if !good {
			return nil, false
		}
	}
	return s, true
}

// payload is an outline's Inputs or Outputs: the raw value for input and
// decision steps, else its digest.
func payload(v []byte, kind steptype.Kind) json.RawMessage {
	if keepsPayload(kind) {
		return bytes.Clone(v)
	}
	return digestJSON(v)
}

// toolCallsRaw is toolCallsOutline reporting success.
func toolCallsRaw(v []byte) (json.RawMessage, bool) {
	raw, err := toolCallsOutline(v)
	return raw, err == nil
}

// plainString decodes a JSON string without escapes.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || bytes.IndexByte(v[1:len(v)-1], '\\') >= 0 {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// plainInt decodes a JSON integer.
func plainInt(v []byte) (int64, bool) {
	if !jsonNumber(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// jsonNumber reports whether v starts like a JSON number (strconv also
// accepts "+1", "Inf" and "0x10", JSON does not).
func jsonNumber(v []byte) bool {
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// plainMetrics decodes the metrics object (see steptype's metricsWire).
func plainMetrics(v []byte) (steptype.Metrics, bool) {
	var m steptype.Metrics
	ml, err := topMembers(v)
	if err != nil {
		return m, false
	}
	for _, f := range ml.order {
		x := f.value
		if string(x) == "null" {
			continue
		}
		good := true
		var n int64
		switch string(f.rawKey[1 : len(f.rawKey)-1]) {
		case "started_at":
			good = m.StartedAt.UnmarshalJSON(x) == nil
		case "finished_at":
			good = m.FinishedAt.UnmarshalJSON(x) == nil
		case "duration_us":
			n, good = plainInt(x)
			m.Duration = time.Duration(n) * time.Microsecond
		case "first_token_latency_us":
			n, good = plainInt(x)
			m.FirstTokenLatency = time.Duration(n) * time.Microsecond
		case "input_tokens":
			m.InputTokens, good = plainInt(x)
		case "output_tokens":
			m.OutputTokens, good = plainInt(x)
		case "cached_tokens":
			m.CachedTokens, good = plainInt(x)
		case "reasoning_tokens":
			m.ReasoningTokens, good = plainInt(x)
		case "cost":
			var err error
			m.Cost, err = strconv.ParseFloat(string(x), 64)
			good = err == nil && jsonNumber(x)
		case "model":
			m.Model, good = plainString(x)
		case "provider":
			m.Provider, good = plainString(x)
		case "attempt":
			n, good = plainInt(x)
			m.Attempt = int(n)
		case "cpu_time_ns":
			n, good = plainInt(x)
			m.CPUTime = time.Duration(n)
		case "alloc_bytes":
			m.AllocBytes, good = plainInt(x)
		case "alloc_objects":
			m.AllocObjects, good = plainInt(x)
		case "overlapping_steps":
			n, good = plainInt(x)
			m.OverlappingSteps = int(n)
		}
		if !good {
			return m, false
		}
	}
	return m, true
}
