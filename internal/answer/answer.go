// Package answer checks what a human answers: an answer against its
// request (free text, a JSON Schema, a tool-call approval, a breakpoint's
// action), giving the text the model or the step sees; and the selectors
// of breakpoints, which pause a run for such an answer.
package answer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// ApprovalSchema is the answer schema of a tool-call approval.
var ApprovalSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"message":{"type":"string"},"always":{"type":"boolean"}},"required":["approved"],"additionalProperties":false}`)

// BreakSchema is the answer schema of a breakpoint's pause.
var BreakSchema = json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["continue","step"]},"state":{"type":"object"}},"additionalProperties":false}`)

// The actions of a breakpoint's answer.
const (
	Continue = "continue"
	Step     = "step"
)

// Check validates an answer to req and returns the text the model sees.
func Check(req *wire.InputRequest, answer json.RawMessage) (string, error) {
	if len(answer) == 0 || !json.Valid(answer) {
		return "", fmt.Errorf("%w: the answer must be JSON (a string for free text)", wire.ErrInvalidAnswer)
	}
	if req.Breakpoint != nil {
		return checkBreak(answer)
	}
	if req.Approval != nil {
		var a wire.ApprovalAnswer
		dec := json.NewDecoder(strings.NewReader(string(answer)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return "", fmt.Errorf(`%w: an approval is {"approved": true|false, "message": "...", "always": bool}: %v`, wire.ErrInvalidAnswer, err)
		}
		if err := Validate(ApprovalSchema, answer); err != nil {
			return "", fmt.Errorf("%w: %v", wire.ErrInvalidAnswer, err)
		}
		if a.Approved {
			return "approved", nil
		}
		return "rejected: " + a.Message, nil
	}
	if len(req.Schema) > 0 {
		if err := Validate(req.Schema, answer); err != nil {
			return "", fmt.Errorf("%w: %v", wire.ErrInvalidAnswer, err)
		}
		return string(convo.CanonicalJSON(answer)), nil
	}
	var text string
	if err := json.Unmarshal(answer, &text); err != nil {
		return string(convo.CanonicalJSON(answer)), nil
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("%w: an empty answer; this request needs text", wire.ErrInvalidAnswer)
	}
	return text, nil
}

// Compile parses and resolves a JSON Schema.
func Compile(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve schema: %w", err)
	}
	return r, nil
}

// Validate checks a JSON value against a schema.
func Validate(schema, value json.RawMessage) error {
	r, err := Compile(schema)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	return r.Validate(v)
}

// CheckSelectors refuses breakpoint selectors that select nothing.
func CheckSelectors(b *wire.Breakpoints) error {
	if b == nil {
		return nil
	}
	var errs []error
	for _, list := range [][]string{b.Before, b.After} {
		for _, sel := range list {
			typ, v, ok := strings.Cut(sel, ":")
			switch {
			case strings.TrimSpace(sel) == "":
				errs = append(errs, errors.New("breakpoint: an empty selector"))
			case ok && v == "":
				errs = append(errs, fmt.Errorf("breakpoint %q: nothing after %q", sel, typ+":"))
			case ok && typ != "step" && typ != "kind" && typ != "tool":
				errs = append(errs, fmt.Errorf("breakpoint %q: want step:NAME, kind:KIND, tool:NAME, a bare name or *", sel))
			case ok && typ == "kind" && !knownKind(v):
				errs = append(errs, fmt.Errorf("breakpoint %q: unknown kind %q (llm, tool, custom, decision, agent)", sel, v))
			}
		}
	}
	return errors.Join(errs...)
}

func knownKind(k string) bool {
	switch steptype.Kind(k) {
	case steptype.KindLLM, steptype.KindTool, steptype.KindCustom, steptype.KindDecision, steptype.KindAgent:
		return true
	}
	return k == "tools"
}

// Match returns the first selector of sels that selects the step name of
// kind (with the tool calls of a tools step), or "".
func Match(sels []string, name string, kind steptype.Kind, tools []string) string {
	kindIs := func(v string) bool { return string(kind) == v || (kind == steptype.KindTool && v == "tools") }
	for _, sel := range sels {
		typ, v, ok := strings.Cut(sel, ":")
		var hit bool
		switch {
		case !ok:
			hit = sel == "*" || sel == name || kindIs(sel) || slices.Contains(tools, sel)
		case typ == "step":
			hit = v == name
		case typ == "kind":
			hit = kindIs(v)
		case typ == "tool":
			hit = slices.Contains(tools, v)
		}
		if hit {
			return sel
		}
	}
	return ""
}

// ParseBreak reads a recorded (valid) answer to a pause.
func ParseBreak(raw json.RawMessage) wire.BreakpointAnswer {
	var a wire.BreakpointAnswer
	var s string
	if json.Unmarshal(raw, &s) == nil {
		a.Action = s
	} else {
		_ = json.Unmarshal(raw, &a)
	}
	if a.Action == "" {
		a.Action = Continue
	}
	return a
}

// checkBreak validates the answer to a pause and returns the text the
// step records.
func checkBreak(answer json.RawMessage) (string, error) {
	var a wire.BreakpointAnswer
	var s string
	if json.Unmarshal(answer, &s) == nil {
		a.Action = s
	} else {
		dec := json.NewDecoder(bytes.NewReader(answer))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return "", fmt.Errorf(`%w: a breakpoint is answered "continue", "step" or {"action": "continue"|"step", "state": {...}}: %v`, wire.ErrInvalidAnswer, err)
		}
	}
	switch a.Action {
	case "", Continue, Step:
	default:
		return "", fmt.Errorf(`%w: breakpoint action %q: want "continue" or "step"`, wire.ErrInvalidAnswer, a.Action)
	}
	if len(a.State) > 0 {
		if t := bytes.TrimSpace(a.State); len(t) == 0 || t[0] != '{' {
			return "", fmt.Errorf("%w: breakpoint state must be a JSON object (merged into the run's state)", wire.ErrInvalidAnswer)
		}
	}
	text := a.Action
	if text == "" {
		text = Continue
	}
	if len(a.State) > 0 {
		text += " with state " + string(a.State)
	}
	return text, nil
}

// Expire applies the expiry outcome of overdue requests, found by the
// store's index on expiry time (StepExpiring): a request with a default
// answer is answered with it (answered is called), any other expires and
// fails its run (failed is called with the finished run).
func Expire(ctx context.Context, st store.Store, now time.Time, answered func(), failed func(*steptype.Run, *steptype.StepError)) {
	due, err := st.StepExpiring(ctx, &store.StepExpiringParams{Before: now, Limit: 256})
	if err != nil {
		return
	}
	for _, s := range due {
		var req wire.InputRequest
		if json.Unmarshal(s.Inputs, &req) != nil || req.ExpiresAt.IsZero() || now.Before(req.ExpiresAt) {
			continue
		}
		if req.OnExpire == "default" && len(req.Default) > 0 {
			content, err := Check(&req, req.Default)
			if err == nil {
				_, _ = st.StepResolve(ctx, &store.StepResolveParams{ID: s.ID, RunID: s.RunID, Status: steptype.StepCompleted, Content: content, Outputs: req.Default, Now: now, QueueRun: true})
				answered()
				continue
			}
		}
		// One transaction: the request expires and its run fails (closing
		// its other requests). The update is conditional on the request
		// still waiting, so of the instances expiring it at once exactly
		// one does it, and an answer racing the expiry has one winner too.
		serr := &steptype.StepError{Message: "input request " + s.ID + " expired", Class: steptype.ErrorPermanent, Code: "input_expired"}
		if _, err := st.StepResolve(ctx, &store.StepResolveParams{ID: s.ID, RunID: s.RunID, Status: steptype.StepExpired, Now: now, FailRun: serr}); err != nil {
			continue
		}
		if r, err := st.RunGet(ctx, &store.RunGetParams{ID: s.RunID}); err == nil && r.Status.Terminal() {
			failed(r, serr)
		}
	}
}
