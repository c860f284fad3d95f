package convo

import (
	"github.com/stepwise-run/stepwise/internal/jsonstr"
	"github.com/stepwise-run/stepwise/llm"
)

// appendMessageJSON appends what encoding/json writes for m (field order,
// omitempty, escaping), without reflection, and reports whether it could:
// tool-call arguments that are not canonical (see IsCanonical: compact,
// written back unchanged) make it return false, and the caller encodes
// with encoding/json. The message hash chain is built from these bytes, so
// they must never differ (TestAppendMessageJSONMatchesEncoder).
func appendMessageJSON(dst []byte, m *llm.Message) ([]byte, bool) {
	dst = append(dst, `{"role":`...)
	dst = jsonstr.Append(dst, string(m.Role))
	for _, f := range [...]struct{ key, v string }{{`,"content":`, m.Content}, {`,"reasoning":`, m.Reasoning}} {
		if f.v != "" {
			dst = jsonstr.Append(append(dst, f.key...), f.v)
		}
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			tc := &m.ToolCalls[i]
			if !IsCanonical(tc.Arguments) {
				return dst, false
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonstr.Append(append(dst, `{"id":`...), tc.ID)
			dst = jsonstr.Append(append(dst, `,"name":`...), tc.Name)
			dst = append(append(append(dst, `,"arguments":`...), tc.Arguments...), '}')
		}
		dst = append(dst, ']')
	}
	for _, f := range [...]struct{ key, v string }{{`,"tool_call_id":`, m.ToolCallID}, {`,"tool_name":`, m.ToolName}} {
		if f.v != "" {
			dst = jsonstr.Append(append(dst, f.key...), f.v)
		}
	}
	return append(dst, '}'), true
}
