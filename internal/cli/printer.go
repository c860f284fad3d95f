package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// printer renders events for a terminal: one line per committed step, and
// while a step is in flight a progress line (step n, kind, tokens, elapsed)
// that is redrawn in place on terminals.
type printer struct {
	w        io.Writer
	live     bool // redraw a progress line
	jsonMode bool
	start    time.Time
	steps    int64
	tokens   int64
	cost     float64
	current  string
	deltas   int
	progress bool // a progress line is on screen
}

func newPrinter(w io.Writer, live, jsonMode bool) *printer {
	return &printer{w: w, live: live, jsonMode: jsonMode, start: time.Now()}
}

func (p *printer) event(ev *stepwise.Event) {
	if p.jsonMode {
		if ev.Type == stepwise.EventStepCompleted {
			b, _ := json.Marshal(ev.Step)
			fmt.Fprintln(p.w, string(b))
		}
		return
	}
	switch ev.Type {
	case stepwise.EventStepStarted:
		p.current, p.deltas = ev.StepName, 0
		p.drawProgress()
	case stepwise.EventStepDelta:
		p.deltas++
		if p.deltas%4 == 0 {
			p.drawProgress()
		}
	case stepwise.EventStepCompleted:
		p.clearProgress()
		s := ev.Step
		p.steps++
		p.tokens += s.Metrics.InputTokens + s.Metrics.OutputTokens
		p.cost += s.Metrics.Cost
		fmt.Fprintln(p.w, stepLine(s))
	case stepwise.EventRunWaiting:
		p.clearProgress()
		fmt.Fprintf(p.w, "⏸  run %s is waiting for input\n", ev.RunID)
	case stepwise.EventRunFinished:
		p.clearProgress()
		r := ev.Run
		if r.Hop > 0 {
			return
		}
		took := time.Since(p.start).Round(time.Millisecond)
		if r.StepCount > p.steps {
			// A resumed run: this execution saw only its last steps.
			fmt.Fprintf(p.w, "■  run %s %s — %d steps; this execution: %d steps, %d tokens, $%.6f, %s\n", r.ID, r.Status, r.StepCount, p.steps, p.tokens, p.cost, took)
		} else {
			fmt.Fprintf(p.w, "■  run %s %s — %d steps, %d tokens, $%.6f, %s\n", r.ID, r.Status, p.steps, p.tokens, p.cost, took)
		}
		if r.Error != nil {
			fmt.Fprintf(p.w, "   error: %s\n", r.Error.Message)
		}
	}
}

func (p *printer) drawProgress() {
	if !p.live {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K… step %d | %s | %d tokens | %s", p.steps+1, p.current, p.tokens, time.Since(p.start).Round(100*time.Millisecond))
	p.progress = true
}

func (p *printer) clearProgress() {
	if p.progress {
		fmt.Fprint(p.w, "\r\033[K")
		p.progress = false
	}
}

// stepLine is the one-line rendering of a committed step.
func stepLine(s *stepwise.Step) string {
	indent := strings.Repeat("  ", s.Hop)
	head := fmt.Sprintf("%s#%-4d %-8s %-10s", indent, s.Sequence, s.Kind, s.Name)
	var body string
	switch s.Kind {
	case steptype.KindUser:
		body = quote(s.Content)
	case steptype.KindLLM:
		body = quote(s.Content)
		if len(s.ToolCalls) > 0 {
			var names []string
			for _, c := range s.ToolCalls {
				names = append(names, c.Name)
			}
			body += " → " + strings.Join(names, ", ")
		}
		body += fmt.Sprintf("  [%d→%d tok, %s]", s.Metrics.InputTokens, s.Metrics.OutputTokens, s.Metrics.Duration.Round(time.Millisecond))
	case steptype.KindTool, steptype.KindAgent:
		body = s.ToolName + " → " + clip(s.Content, 90)
		if s.Error != nil {
			body = s.ToolName + " ✗ " + clip(s.Content, 90)
		}
		if n, ok := s.Metadata["screenshots"].(float64); ok && n > 0 {
			body += fmt.Sprintf("  [%g image attachment(s)]", n)
		} else if n, ok := s.Metadata["screenshots"].(int); ok && n > 0 {
			body += fmt.Sprintf("  [%d image attachment(s)]", n)
		}
	case steptype.KindError:
		body = fmt.Sprintf("%s (%s, attempt %d): %s", s.Error.Code, s.Error.Class, s.Error.Attempt, clip(s.Error.Message, 100))
	case steptype.KindDecision:
		var in struct{ Purpose string }
		var out struct{ Choice string }
		_ = json.Unmarshal(s.Inputs, &in)
		_ = json.Unmarshal(s.Outputs, &out)
		body = in.Purpose + " → " + out.Choice
	case steptype.KindInput:
		var req stepwise.InputRequest
		_ = json.Unmarshal(s.Inputs, &req)
		body = quote(req.Prompt)
		if s.Status == steptype.StepWaiting {
			body += "  (waiting, request " + s.ID + ")"
		} else {
			body += " ⇒ " + quote(s.Content)
		}
	case steptype.KindCustom:
		switch {
		case s.Content != "":
			body = clip(s.Content, 100)
		case len(s.Outputs) > 0:
			body = "→ " + clip(string(s.Outputs), 100)
		case len(s.StatePatch) > 0:
			body = "state " + clip(string(s.StatePatch), 100)
		default:
			body = clip(s.Annotations.Action, 100)
		}
	default:
		body = clip(s.Content, 100)
		if body == "" && len(s.Outputs) > 0 {
			body = clip(string(s.Outputs), 100)
		}
	}
	if w, ok := s.Metadata["worker"].(string); ok && w != "" {
		body += "  [worker " + w + "]" // served by a worker process (docs/workers.md)
	}
	return head + " " + body
}

func quote(s string) string { return fmt.Sprintf("%q", clip(s, 100)) }

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
