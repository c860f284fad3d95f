// Package observation is the engine's observation machinery: the observers
// registered with an engine, each with its own queue and goroutine; the
// mask functions applied to steps before they are persisted; and the events
// recorded inside a step (provider requests and responses, tool
// invocations, HTTP exchanges) through the step a context executes.
//
// Package stepwise exports its types under their own names (Observer,
// StepEvent, StepRef …); this package holds the state and the delivery.
package observation
