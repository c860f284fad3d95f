package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/steptype"
)

// maxLabel bounds node and action labels (in runes).
const maxLabel = 80

// stateOf returns the clustering fingerprint of a step and its label: the
// annotated state when set, else the tool name, the decision choice, the
// error code, or the kind.
func stateOf(s *steptype.Step) (fp, label string) {
	if st := strings.TrimSpace(s.Annotations.State); st != "" {
		return hash("state", st), clip(st)
	}
	switch s.Kind {
	case steptype.KindTool, steptype.KindAgent:
		if s.ToolName != "" {
			return hash(string(s.Kind), s.ToolName), clip(s.ToolName)
		}
	case steptype.KindDecision:
		if c := choiceOf(s); c != "" {
			return hash("choice", c), clip("choice: " + c)
		}
	case steptype.KindInput:
		if t := approvalTool(s); t != "" {
			return hash("approval", t), clip("approve " + t)
		}
	case steptype.KindError:
		code := ""
		if s.Error != nil {
			code = s.Error.Code
			if code == "" {
				code = string(s.Error.Class)
			}
		}
		if s.ToolName != "" {
			code = s.ToolName + " " + code
		}
		if code = strings.TrimSpace(code); code != "" {
			return hash("error", code), clip("error: " + code)
		}
	}
	return hash("kind", string(s.Kind)), string(s.Kind)
}

// actionOf returns the action a step took, or "" when the step names none
// (then the edge is labelled by the next step).
func actionOf(s *steptype.Step) string {
	if a := strings.TrimSpace(s.Annotations.Action); a != "" {
		return clip(a)
	}
	switch {
	case len(s.ToolCalls) > 0:
		names := make([]string, 0, len(s.ToolCalls))
		for _, c := range s.ToolCalls {
			names = append(names, c.Name)
		}
		slices.Sort(names)
		return clip("call " + strings.Join(slices.Compact(names), ", "))
	case s.Kind == steptype.KindDecision:
		if c := choiceOf(s); c != "" {
			return clip("choose " + c)
		}
	case s.Kind == steptype.KindInput && s.Status != steptype.StepWaiting:
		if s.Status == steptype.StepCompleted && approvalTool(s) != "" {
			var a struct {
				Approved bool `json:"approved"`
			}
			if json.Unmarshal(s.Outputs, &a) == nil && !a.Approved {
				return "rejected"
			}
			return "approved"
		}
		return "answered"
	}
	return ""
}

// signatureOf identifies "the same thing done again" for the stuck
// heuristic: a tool with the same arguments, a model with the same output, a
// decision with the same choice, an error with the same message.
func signatureOf(s *steptype.Step) string {
	switch s.Kind {
	case steptype.KindTool, steptype.KindAgent:
		if s.Fingerprint != "" {
			return "t" + s.Fingerprint
		}
		return hash("tool", s.ToolName, string(s.Inputs))
	case steptype.KindLLM:
		parts := []string{"llm", s.Content}
		for _, c := range s.ToolCalls {
			parts = append(parts, c.Name, string(c.Arguments))
		}
		return hash(parts...)
	case steptype.KindError:
		msg := ""
		if s.Error != nil {
			msg = s.Error.Code + "\x00" + s.Error.Message
		}
		return hash("error", s.Name, s.ToolName, msg)
	case steptype.KindDecision:
		return hash("decision", s.Name, choiceOf(s))
	}
	return hash(string(s.Kind), s.Name, s.Content, string(s.Inputs), string(s.Outputs))
}

func choiceOf(s *steptype.Step) string {
	var out struct {
		Choice string `json:"choice"`
	}
	if len(s.Outputs) == 0 || json.Unmarshal(s.Outputs, &out) != nil {
		return ""
	}
	return out.Choice
}

func approvalTool(s *steptype.Step) string {
	var in struct {
		Approval *steptype.ToolCall `json:"approval"`
	}
	if len(s.Inputs) == 0 || json.Unmarshal(s.Inputs, &in) != nil || in.Approval == nil {
		return ""
	}
	return in.Approval.Name
}

// nodeKey is the clustering key of a step: hop, name and fingerprint.
func nodeKey(hop int, name, fp string) string {
	return strconv.Itoa(hop) + "\x00" + name + "\x00" + fp
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// clip shortens s to maxLabel runes on one line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= maxLabel {
		return s
	}
	r := []rune(s)
	return string(r[:maxLabel-1]) + "…"
}
