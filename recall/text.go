package recall

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// DefaultKinds are the step kinds embedded by default: what the user
// asked, what the model said and called, tool actions and their results,
// sub-agent calls and routing decisions. Error, input, custom and system
// steps are left out unless configured.
var DefaultKinds = []steptype.Kind{steptype.KindLLM, steptype.KindTool, steptype.KindDecision, steptype.KindAgent, steptype.KindUser}

// DefaultMaxTextLen bounds the text embedded per step, in bytes.
const DefaultMaxTextLen = 8000

// StepText is the default text embedded for a step: its content in plain
// words, without the rendering boilerplate that every step shares. By kind:
//
//	user     the message
//	llm      the message, then "call NAME ARGS" per tool call
//	tool     "NAME ARGS", then the result
//	agent    "NAME INPUT", then the sub-agent's answer
//	decision the purpose, the options and the choice
//	input    the prompt, then the answer
//	custom   the step name, the content, the outputs
//	error    the step name and the error message
//	system   the content
//
// followed by the goal, state and action annotations when set. A step
// with nothing to say gives "KIND NAME", never an empty text.
func StepText(s *stepwise.Step) string {
	var b strings.Builder
	put := func(parts ...string) {
		for _, p := range parts {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p)
		}
	}
	switch s.Kind {
	case steptype.KindLLM:
		put(s.Content)
		for _, c := range s.ToolCalls {
			put("call " + c.Name + " " + compact(c.Arguments))
		}
	case steptype.KindTool, steptype.KindAgent:
		put(s.ToolName+" "+compact(s.Inputs), s.Content)
	case steptype.KindDecision:
		var in struct {
			Purpose string `json:"purpose"`
			Options []any  `json:"options"`
		}
		var out struct {
			Choice any `json:"choice"`
		}
		_ = json.Unmarshal(s.Inputs, &in)
		_ = json.Unmarshal(s.Outputs, &out)
		put(in.Purpose)
		if len(in.Options) > 0 {
			opts, _ := json.Marshal(in.Options)
			put("options " + string(opts))
		}
		if out.Choice != nil {
			c, _ := json.Marshal(out.Choice)
			put("choice " + strings.Trim(string(c), `"`))
		}
		put(s.Content)
	case steptype.KindInput:
		var in struct {
			Prompt string `json:"prompt"`
		}
		_ = json.Unmarshal(s.Inputs, &in)
		put(in.Prompt, s.Content)
	case steptype.KindCustom:
		put(s.Name, s.Content, compact(s.Outputs))
	case steptype.KindError:
		if s.Error != nil {
			put(s.Name, s.Error.Message)
		}
	default:
		put(s.Content)
	}
	a := s.Annotations
	put(a.Goal, a.State, a.Action)
	if b.Len() == 0 {
		put(string(s.Kind) + " " + s.Name)
	}
	return truncate(b.String(), DefaultMaxTextLen)
}

// compact returns JSON without insignificant space, or the raw text when
// it is not JSON.
func compact(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
