package stepwise

import (
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/runstate"
)

// MergePatch applies an RFC 7386 JSON merge patch to doc and returns the
// result. A nil or empty doc is treated as {}. A patch that is not an object
// replaces doc entirely, as the RFC says.
func MergePatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	return runstate.MergePatch(doc, patch)
}

type (
	// Reducer combines the current value of a run-state key with an
	// update of it (a per-key state reducer). current is nil when the key
	// is absent; update is never JSON null (null deletes the key whatever
	// its reducer). The result becomes the key's value.
	Reducer = runstate.Reducer
	// ReducerFunc adapts a function to a Reducer.
	ReducerFunc = runstate.ReducerFunc
)

// The built-in reducers, by the names agent files use.
var (
	// ReduceReplace sets the key to the update (an object is not merged).
	ReduceReplace = runstate.ReduceReplace
	// ReduceAppend appends to a list: an array update adds its elements,
	// any other value is added as one element.
	ReduceAppend = runstate.ReduceAppend
	// ReduceMerge merges the update into the current value (RFC 7386), the
	// behaviour of keys without a reducer.
	ReduceMerge = runstate.ReduceMerge
	// ReduceSum adds numbers.
	ReduceSum = runstate.ReduceSum
)

// Reducers lists the built-in reducers by name.
var Reducers = runstate.Reducers

// applyState applies a state update to the run state by the agent's
// reducers (see runstate.Apply): the new state and the merge patch the
// step records.
func (a *Agent) applyState(state, update json.RawMessage) (json.RawMessage, json.RawMessage, error) {
	return runstate.Apply(a.Reducers, state, update)
}

// checkState refuses a state update that does not apply to the run state
// (an invalid patch, a reducer error): the step fails, nothing commits.
func (x *execution) checkState(v any) error {
	patch, err := toRaw(v)
	if err == nil {
		_, _, err = x.agent.applyState(x.Run.State, patch)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	return nil
}

func toRaw(v any) (json.RawMessage, error) { return runstate.ToRaw(v) }
