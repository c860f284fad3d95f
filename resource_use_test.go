package stepwise_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

var resourceSink [][]byte

// TestStepResourceUse: each step records what it used while it ran — a
// custom step that allocates 2 MiB (64 large objects) and spins for 5 ms of CPU reads at
// least that — and two tool calls that run at once each count the other
// as an overlapping step. The user step, which runs no code of the agent,
// records none.
func TestStepResourceUse(t *testing.T) {
	var both sync.WaitGroup
	both.Add(2)
	meet := func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		both.Done()
		both.Wait() // both calls are running
		return &tool.Result{Content: "met"}, nil
	}
	def := func(name string) llm.ToolDef { return llm.ToolDef{Name: name, Parameters: []byte(`{"type":"object"}`)} }
	model := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			return &llm.Response{Content: "done"}, nil
		}
		return &llm.Response{ToolCalls: []stepwise.ToolCall{call("c1", "m1", `{}`), call("c2", "m2", `{}`)}}, nil
	}}
	a := &stepwise.Agent{Name: "res", Model: model, StartStep: "work",
		Tools: []tool.Tool{tool.Func(def("m1"), meet), tool.Func(def("m2"), meet)},
		Steps: map[string]stepwise.Handler{"work": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			// Large objects (over 32 KiB): the runtime counts each as it is
			// allocated, where small ones are counted a span at a time.
			for range 64 {
				resourceSink = append(resourceSink, make([]byte, 33<<10))
			}
			resourceSink = nil
			// Spin until the process has used 5 ms of CPU (not 5 ms of the
			// wall clock: a loaded host deschedules the spinning thread).
			spinCPU(5 * time.Millisecond)
			return &stepwise.Next{Step: stepwise.StepLLM, Content: "worked"}, nil
		})}}
	e, st := newEngine(t, a)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "res", Input: "go"}))
	if err != nil || run.Status != steptype.RunCompleted {
		t.Fatalf("%v %+v", err, run)
	}
	steps, err := st.StepList(ctx, &store.StepListParams{SessionID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	tools := 0
	for _, s := range steps {
		m := s.Metrics
		switch s.Kind {
		case steptype.KindUser:
			if m.CPUTime != 0 || m.AllocBytes != 0 {
				t.Errorf("user step: %v CPU, %d bytes", m.CPUTime, m.AllocBytes)
			}
		case steptype.KindCustom:
			if m.CPUTime < 4*time.Millisecond || m.AllocBytes < 2<<20 || m.AllocObjects < 64 {
				t.Errorf("custom step: %v CPU, %d bytes in %d objects; want ≥ 4ms, 2 MiB, 64", m.CPUTime, m.AllocBytes, m.AllocObjects)
			}
		case steptype.KindLLM:
			if m.CPUTime <= 0 {
				t.Errorf("llm step %d: no CPU time", s.Sequence)
			}
		case steptype.KindTool:
			tools++
			if m.OverlappingSteps < 1 || m.CPUTime <= 0 {
				t.Errorf("tool step %s: %d overlapping steps, %v CPU; want ≥ 1 (the other call), > 0", s.ToolName, m.OverlappingSteps, m.CPUTime)
			}
		}
	}
	if tools != 2 {
		t.Fatalf("%d tool steps", tools)
	}
}

// TestStepResourceUseOff: with Config.NoStepResources no step records
// resource use.
func TestStepResourceUseOff(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	st := memory.New()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{addAgent(&executed, nil)}, NoStepResources: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "adder", Input: "1+2"}))
	if err != nil || run.Status != steptype.RunCompleted {
		t.Fatalf("%v %+v", err, run)
	}
	for _, s := range steps(t, st, run.SessionID) {
		if m := s.Metrics; m.CPUTime != 0 || m.AllocBytes != 0 || m.AllocObjects != 0 || m.OverlappingSteps != 0 {
			t.Fatalf("step %d (%s) measured with NoStepResources: %+v", s.Sequence, s.Kind, m)
		}
	}
}

// spinCPU spins until the process has used d of CPU (cpuTime), or, where
// the CPU time is not measured, for d of the wall clock.
func spinCPU(d time.Duration) {
	start, t0 := cpuTime(), time.Now()
	for {
		if c := cpuTime(); c == 0 {
			if time.Since(t0) >= d {
				return
			}
		} else if c-start >= d {
			return
		}
	}
}
