package stepwise

import (
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// The record types are defined in package steptype, shared with the store
// drivers; these aliases make them part of the root API.
type (
	// Step is one durable unit of work; see steptype.Step.
	Step = steptype.Step
	// Session is an ordered log of steps; see steptype.Session.
	Session = steptype.Session
	// Run is one invocation of an agent in a session; see steptype.Run.
	Run = steptype.Run
	// Kind is a step kind.
	Kind = steptype.Kind
	// Role is a message role.
	Role = steptype.Role
	// RunStatus is the status of a run.
	RunStatus = steptype.RunStatus
	// StepStatus is the status of a step.
	StepStatus = steptype.StepStatus
	// ToolCall is a call a model asked for.
	ToolCall = steptype.ToolCall
	// StepError describes a failed attempt.
	StepError = steptype.StepError
	// Annotations are the state/goal/action observation strings of a step.
	Annotations = steptype.Annotations
)

// Built-in step names. A custom step may route to any of them.
const (
	StepLLM   = "llm"   // call the model with the session context
	StepTools = "tools" // execute the tool calls of the last model response
	StepEnd   = "end"   // finish the run
)

// Tool is something a model can call; see package tool.
type Tool = tool.Tool
