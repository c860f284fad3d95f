// Package demo defines the built-in demo agent of `stepwise demo`: an
// analyst on the scripted model with several tools (run in parallel), a
// custom triage step that records a decision, a sub-agent, a rate-limit
// error that is retried, and a custom review step.
package demo

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/tool/builtin"
)

//go:embed analyst.yaml
var analystScript []byte

//go:embed summarizer.yaml
var summarizerScript []byte

// Input is the demo's user message.
const Input = "What is the combined population of Paris and Berlin, and what time is it in Paris?"

// Options tune the demo agents.
type Options struct {
	// Fast removes the simulated latency (tests, benchmarks).
	Fast bool
	// Now is the clock tool's clock; default time.Now.
	Now func() time.Time
}

// Agents returns the demo agent ("analyst") and its sub-agent.
func Agents(o Options) (*stepwise.Agent, error) {
	as, ss := analystScript, summarizerScript
	if o.Fast {
		as, ss = fast(as), fast(ss)
	}
	am, err := scripted.Parse("analyst", as)
	if err != nil {
		return nil, err
	}
	sm, err := scripted.Parse("summarizer", ss)
	if err != nil {
		return nil, err
	}
	calc, err := builtin.NewCalculator(builtin.CalculatorConfig{})
	if err != nil {
		return nil, err
	}
	clock, err := builtin.NewClock(builtin.ClockConfig{Now: o.Now})
	if err != nil {
		return nil, err
	}
	summarizer := &stepwise.Agent{
		Name:         "summarizer",
		Description:  "Rewrites findings as one clear sentence.",
		Instructions: "You rewrite findings as one clear sentence.",
		Model:        sm,
	}
	return &stepwise.Agent{
		Name:         "analyst",
		Description:  "Answers questions with tools, a sub-agent and a review step.",
		Instructions: "You are a careful analyst. Use tools for facts and arithmetic; delegate phrasing to the summarizer.",
		Model:        am,
		Tools:        []tool.Tool{calc, clock, lookupTool()},
		SubAgents:    []*stepwise.Agent{summarizer},
		StartStep:    "triage",
		AfterLLM:     "review",
		Steps: map[string]stepwise.Handler{
			"triage": stepwise.StepFunc(triage),
			"review": stepwise.StepFunc(review),
		},
		Retry: stepwise.RetryPolicy{MaxAttempts: 3, InitialInterval: 100 * time.Millisecond},
	}, nil
}

var latency = regexp.MustCompile(`(?m)^\s*(delay|chunk_delay): .*$`)

// fast strips the simulated latency from a script.
func fast(script []byte) []byte {
	out := latency.ReplaceAll(script, nil)
	return bytes.ReplaceAll(out, []byte("retry_after: 300ms"), []byte("retry_after: 1ms"))
}

// triage is a custom step: it routes the request and records a decision.
func triage(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
	msgs := s.Messages()
	q := ""
	if len(msgs) > 0 {
		q = strings.ToLower(msgs[len(msgs)-1].Content)
	}
	choice := "research"
	if !strings.Contains(q, "population") && !strings.Contains(q, "time") {
		choice = "chat"
	}
	s.Annotate(stepwise.Annotations{State: "new question", Goal: "answer with sourced numbers", Action: "route to " + choice})
	return &stepwise.Next{
		Step:     stepwise.StepLLM,
		State:    map[string]any{"route": choice, "question": q},
		Decision: &stepwise.Decision{Purpose: "Route the request", Options: []string{"research", "chat"}, Choice: choice},
	}, nil
}

// review is a custom step after the final answer: it checks the answer and
// records its verdict in the run state.
func review(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
	msgs := s.Messages()
	answer := ""
	if len(msgs) > 0 {
		answer = msgs[len(msgs)-1].Content
	}
	ok := strings.Contains(answer, "5,980,750")
	s.Annotate(stepwise.Annotations{State: "answer drafted", Goal: "check the answer", Action: fmt.Sprintf("verdict ok=%v", ok)})
	return &stepwise.Next{Step: stepwise.StepEnd, State: map[string]any{"reviewed": true, "answer_ok": ok}, Output: map[string]any{"answer_ok": ok}, Content: "review passed"}, nil
}

type lookupArgs struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

type lookupResult struct {
	City       string `json:"city"`
	Population int    `json:"population"`
	Source     string `json:"source"`
}

var populations = map[string]int{"paris": 2102650, "berlin": 3878100, "madrid": 3332035, "rome": 2749031}

func lookupTool() tool.Tool {
	return tool.New("lookup_population", "Look up the population of a European capital.",
		func(ctx context.Context, a lookupArgs) (lookupResult, error) {
			n, ok := populations[strings.ToLower(a.City)]
			if !ok {
				return lookupResult{}, fmt.Errorf("no data for %q", a.City)
			}
			return lookupResult{City: a.City, Population: n, Source: "demo census table"}, nil
		})
}
