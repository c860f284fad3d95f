package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strconv"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// digestSeed makes digests comparable within this process (never stored).
var digestSeed = maphash.MakeSeed()

// digest is the outline's stand-in for a bulky value.
func digest(b []byte) string {
	return "#" + strconv.FormatUint(maphash.Bytes(digestSeed, b), 16)
}

// digestString is digest of a string's bytes.
func digestString(s string) string {
	return "#" + strconv.FormatUint(maphash.String(digestSeed, s), 16)
}

// keepsPayload reports whether an outline keeps a step's Inputs and
// Outputs whole: input requests and decisions carry small payloads that
// name what was asked or chosen.
func keepsPayload(k steptype.Kind) bool {
	return k == steptype.KindInput || k == steptype.KindDecision
}

// OutlineOf returns the outline of a step (see store.StepOutliner): a
// copy with Content, Reasoning, the tool calls' arguments and, except for
// input and decision steps, Inputs and Outputs replaced by digests, and
// StatePatch, Vector, Embedder and Metadata dropped.
func OutlineOf(s *steptype.Step) *steptype.Step {
	c := *s
	if c.Content != "" {
		c.Content = digestString(c.Content)
	}
	if c.Reasoning != "" {
		c.Reasoning = digestString(c.Reasoning)
	}
	if len(c.ToolCalls) > 0 {
		c.ToolCalls = make([]steptype.ToolCall, len(s.ToolCalls))
		for i, tc := range s.ToolCalls {
			c.ToolCalls[i] = steptype.ToolCall{ID: tc.ID, Name: tc.Name}
			c.ToolCalls[i].Arguments = argsOutline(tc.Arguments)
		}
	}
	if !keepsPayload(c.Kind) {
		if len(c.Inputs) > 0 {
			c.Inputs = digestJSON(c.Inputs)
		}
		if len(c.Outputs) > 0 {
			c.Outputs = digestJSON(c.Outputs)
		}
	} else {
		c.Inputs, c.Outputs = bytes.Clone(c.Inputs), bytes.Clone(c.Outputs)
	}
	if s.Error != nil {
		e := *s.Error
		c.Error = &e
	}
	if s.Progress != nil {
		p := *s.Progress
		c.Progress = &p
	}
	c.StatePatch, c.Vector, c.Embedder, c.Metadata = nil, nil, "", nil
	return &c
}

// argsOutline is the digest of a tool call's arguments; absent and null
// arguments stay as they are.
func argsOutline(a json.RawMessage) json.RawMessage {
	if len(a) == 0 || bytes.Equal(a, []byte("null")) {
		return bytes.Clone(a)
	}
	return digestJSON(a)
}

// digestJSON is the digest of a raw JSON value, as a JSON string.
func digestJSON(raw []byte) json.RawMessage {
	return json.RawMessage(`"` + digest(raw) + `"`)
}

// DecodeOutline reads the outline of a stored body without decoding its
// bulky members: it equals OutlineOf(DecodeStep(b)), at a fraction of the
// cost, since only the small members go through encoding/json.
func DecodeOutline(b []byte) (*steptype.Step, error) {
	members, err := topMembers(b)
	if err != nil {
		return nil, fmt.Errorf("%w: decode stored step outline: %v", store.ErrCorrupt, err)
	}
	kind := steptype.Kind("")
	if v, ok := members.get("kind"); ok {
		if k, plain := plainString(v); plain {
			kind = steptype.Kind(k)
		} else {
			_ = json.Unmarshal(v, &kind)
		}
	}
	if s, ok := fastOutline(members, kind); ok {
		return s, nil
	}
	out := make([]byte, 0, 512)
	out = append(out, '{')
	for _, m := range members.order {
		v := m.value
		switch string(m.rawKey[1 : len(m.rawKey)-1]) {
		case "state_patch", "vector", "embedder", "metadata":
			continue
		case "content", "reasoning":
			if v = stringDigest(v); v == nil {
				return nil, fmt.Errorf("%w: decode stored step outline: %s is not a string", store.ErrCorrupt, m.key())
			}
		case "inputs", "outputs":
			if !keepsPayload(kind) {
				v = digestJSON(v)
			}
		case "tool_calls":
			if v, err = toolCallsOutline(v); err != nil {
				return nil, fmt.Errorf("%w: decode stored step outline: %v", store.ErrCorrupt, err)
			}
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, m.rawKey...)
		out = append(out, ':')
		out = append(out, v...)
	}
	out = append(out, '}')
	return DecodeStep(out)
}

// stringDigest returns the digest, as a JSON string, of the JSON string
// raw, or nil when raw is not a string.
func stringDigest(raw []byte) json.RawMessage {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return json.RawMessage(`"` + digest(inner) + `"`)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return json.RawMessage(`"` + digestString(s) + `"`)
}

// toolCallsOutline keeps the ids and names of tool calls and digests
// their arguments.
func toolCallsOutline(raw []byte) (json.RawMessage, error) {
	var calls []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, err
	}
	out := make([]steptype.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = steptype.ToolCall{ID: c.ID, Name: c.Name}
		out[i].Arguments = argsOutline(c.Arguments)
	}
	return json.Marshal(out)
}
