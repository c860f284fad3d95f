package stepwise

import "github.com/stepwise-run/stepwise/steptype"

// retryCursor is where a run regenerating a session from step s starts (the
// session keeps the steps before s): the graph step that produced s, so the
// run follows the step graph from there.
//
//   - a tool, agent or input step of a tool call (a result, a sub-agent
//     call, an approval, an ask_human) — and any step of a sub-agent's own
//     run — was produced by "tools": the tools step runs again every call of
//     the last assistant message that has no result in the kept steps, so
//     a retry inside a parallel tool call re-runs the missing calls and the
//     next model call sees every result;
//   - an llm step, and the "context" system step an llm step records, by
//     "llm";
//   - an error step by the step whose attempt failed (its name);
//   - a custom or decision step, or an input step a custom step asked for,
//     by that step;
//   - anything else, or a step the agent does not have, restarts at the
//     agent's start step.
//
// (A user step is not routed: the run gets its content as input.)
func retryCursor(a *Agent, s *Step) string {
	switch {
	case s.Hop > 0:
		return StepTools
	case s.Kind == steptype.KindSystem && s.Name == "context":
		return StepLLM
	case s.Kind == steptype.KindLLM:
		return StepLLM
	case s.Kind == steptype.KindTool || s.Kind == steptype.KindAgent:
		return StepTools
	}
	if s.Name != "" && s.Name != StepEnd && a.hasStep(s.Name) {
		return s.Name
	}
	return a.StartStep
}
