package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// DefaultTemplates render steps as text for models and people, one numbered
// block per step (User, Assistant, Action, Decision, Call Program and End
// Program, …); a step or tool call a worker served ends with its worker's
// id. Each template receives a *Data.
var DefaultTemplates = map[steptype.Kind]string{
	steptype.KindUser: "--- Step {{.N}} ---\nUser: {{.Step.Content}}",
	steptype.KindLLM: "--- Step {{.N}} ---{{if or .Step.Content (not .Step.ToolCalls)}}\nAssistant: {{.Step.Content}}{{end}}" +
		"{{range .Step.ToolCalls}}\nTool Call: {{.Name}} {{printf \"%s\" .Arguments}}{{end}}",
	steptype.KindTool:     "--- Step {{.N}} ---\nAction Purpose: {{.Purpose}}\nAction: {{.JSON .Action}}{{if .Worker}}\nWorker: {{.Worker}}{{end}}",
	steptype.KindDecision: "--- Step {{.N}} ---\nDecision Purpose: {{.Purpose}}\nDecision: {{.Choice}}",
	steptype.KindAgent:    "--- Step {{.N}} ---\nCall Program: {{.Step.ToolName}}\nProgram Purpose: {{.Purpose}}\nEnd Program: {{.Step.ToolName}}\nProgram Result: {{.Step.Content}}",
	steptype.KindInput:    "--- Step {{.N}} ---\nHuman Input Request: {{.Purpose}}\nAnswer: {{if eq .Step.Status \"waiting\"}}(waiting){{else}}{{.Step.Content}}{{end}}",
	steptype.KindCustom: "--- Step {{.N}} ---\nStep: {{.Step.Name}}{{if .Step.Annotations.Action}}\nAction: {{.Step.Annotations.Action}}{{end}}" +
		"{{if .Step.Content}}\nSummary: {{.Step.Content}}{{end}}{{if .Step.Inputs}}\nInputs: {{printf \"%s\" .Step.Inputs}}{{end}}" +
		"{{if .Step.Outputs}}\nOutputs: {{printf \"%s\" .Step.Outputs}}{{end}}{{if .Step.StatePatch}}\nState Update: {{printf \"%s\" .Step.StatePatch}}{{end}}" +
		"{{if not (or .Step.Annotations.Action .Step.Content .Step.Inputs .Step.Outputs .Step.StatePatch)}}\n(no output){{end}}" +
		"{{if .Worker}}\nWorker: {{.Worker}}{{end}}",
	steptype.KindError:  "--- Step {{.N}} ---\nError in {{.Step.Name}}: {{.Step.Error.Message}} ({{.Step.Error.Class}}, attempt {{.Step.Error.Attempt}})",
	steptype.KindSystem: "--- Step {{.N}} ---\nNote: {{.Step.Content}}",
}

// Data is what a step template sees.
type Data struct {
	N       int64 // the step's sequence
	Step    *steptype.Step
	Purpose string // why the step happened (tool purpose, decision purpose, request prompt)
	Choice  string // a decision's choice
	Action  any    // a tool action: {"tool", "arguments", "result"}
	Worker  string // the worker process that served the step or tool call (metadata "worker"), if any
}

// JSON formats v as indented JSON.
func (Data) JSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Renderer renders steps as text with one template per kind.
type Renderer struct {
	tmpl map[steptype.Kind]*template.Template
}

// New compiles templates; kinds missing from overrides use
// DefaultTemplates.
func New(overrides map[steptype.Kind]string) (*Renderer, error) {
	r := &Renderer{tmpl: map[steptype.Kind]*template.Template{}}
	for k, src := range DefaultTemplates {
		if o, ok := overrides[k]; ok {
			src = o
		}
		t, err := template.New(string(k)).Parse(src)
		if err != nil {
			return nil, fmt.Errorf("stepwise: template for %s: %w", k, err)
		}
		r.tmpl[k] = t
	}
	return r, nil
}

var defaultRenderer, _ = New(nil)

// Steps renders steps with the default templates, indenting nested
// (sub-agent) steps by hop.
func Steps(steps []*steptype.Step) string { return defaultRenderer.Render(steps) }

// Render renders steps, separated by blank lines.
func (r *Renderer) Render(steps []*steptype.Step) string {
	var b strings.Builder
	for i, s := range steps {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(r.RenderStep(s))
	}
	return b.String()
}

// RenderStep renders one step.
func (r *Renderer) RenderStep(s *steptype.Step) string {
	d := &Data{N: s.Sequence, Step: s}
	d.Worker, _ = s.Metadata["worker"].(string)
	var in map[string]any
	_ = json.Unmarshal(s.Inputs, &in)
	switch s.Kind {
	case steptype.KindTool:
		d.Purpose = "call " + s.ToolName
		var args any
		_ = json.Unmarshal(s.Inputs, &args)
		d.Action = map[string]any{"tool": s.ToolName, "arguments": args, "result": s.Content}
	case steptype.KindDecision:
		d.Purpose, _ = in["purpose"].(string)
		var out map[string]any
		_ = json.Unmarshal(s.Outputs, &out)
		d.Choice, _ = out["choice"].(string)
	case steptype.KindAgent:
		d.Purpose, _ = in["input"].(string)
	case steptype.KindInput:
		d.Purpose, _ = in["prompt"].(string)
	}
	t := r.tmpl[s.Kind]
	if t == nil || (s.Kind == steptype.KindError && s.Error == nil) {
		return fmt.Sprintf("--- Step %d ---\n%s: %s", s.Sequence, s.Kind, s.Content)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, d); err != nil {
		return fmt.Sprintf("--- Step %d ---\n(render error: %v)", s.Sequence, err)
	}
	out := buf.String()
	if s.Hop > 0 {
		pad := strings.Repeat("  ", s.Hop)
		out = pad + strings.ReplaceAll(out, "\n", "\n"+pad)
	}
	return out
}

// TraceTool is a built-in tool that lets an agent read its own recent trace
// (its session's last steps rendered as text).
func TraceTool(st store.Store) tool.Tool {
	return &traceTool{st: st}
}

type traceTool struct{ st store.Store }

func (t *traceTool) Definition() llm.ToolDef {
	return llm.ToolDef{
		Name:        "trace",
		Description: "Read the recent steps of this session (your own trace) rendered as text.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"last":{"type":"integer","minimum":1,"maximum":200,"description":"How many recent steps (default 20)"}},"additionalProperties":false}`),
	}
}

func (t *traceTool) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	var args struct {
		Last int `json:"last"`
	}
	if len(c.Arguments) > 0 {
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			return &tool.Result{Content: "error: " + err.Error(), IsError: true}, nil
		}
	}
	if args.Last <= 0 || args.Last > 200 {
		args.Last = 20
	}
	steps, err := t.st.StepList(ctx, &store.StepListParams{SessionID: c.SessionID, Limit: args.Last, Desc: true})
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
		steps[i], steps[j] = steps[j], steps[i]
	}
	return &tool.Result{Content: Steps(steps)}, nil
}
