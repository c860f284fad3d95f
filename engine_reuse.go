package stepwise

import "github.com/stepwise-run/stepwise/steptype"

// What an execution keeps between steps so that a step allocates less
// (see docs/PERFORMANCE.md, "The durable step against its floor").

// expectRunning fences the writes of an execution (read only).
var expectRunning = []steptype.RunStatus{steptype.RunRunning}

// cursorLLM is the cursor of the built-in llm step (read only).
var cursorLLM = StepLLM

// one returns a slice holding just s, in a buffer of the execution that
// the next call reuses (commit keeps none of its steps slice).
func (x *execution) one(s *Step) []*Step {
	x.oneBuf[0] = s
	return x.oneBuf[:]
}

// boxed returns v as an interface value, the one of the previous call
// with the same slot when v is unchanged: a string in an interface is
// immutable, so steps can share it, and a model that answers with the same
// model name and finish reason every time costs no allocation for them.
func (x *execution) boxed(slot int, v string) any {
	b := &x.boxes[slot]
	if b.v != v || b.box == nil {
		b.v, b.box = v, v
	}
	return b.box
}

// builtinNext returns n from a built-in step handler: in a buffer of the
// execution, which the next step reuses, when no hook can see (and keep)
// it — the loop and record read a Next only until the step is recorded —
// or else as a new one.
func (x *execution) builtinNext(name string, n Next) *Next {
	if x.hooks(name) {
		c := new(Next) // not &n: n would move to the heap on every call
		*c = n
		return c
	}
	x.builtNext = n
	return &x.builtNext
}
