package rules

import (
	"encoding/json"

	"github.com/stepwise-run/stepwise/store"
)

// CheckCheckpoints validates the checkpoints of a ContextCheckpointPut.
func CheckCheckpoints(p *store.ContextCheckpointPutParams) error {
	if p == nil {
		return Invalid("no checkpoints")
	}
	for _, c := range p.Checkpoints {
		if c == nil || c.SessionID == "" || c.StepID == "" || c.Sequence < 1 {
			return Invalid("a checkpoint needs a session id, a step id and a sequence >= 1")
		}
		if c.Messages < 0 || c.Tokens < 0 {
			return Invalid("checkpoint at %d: negative message or token count", c.Sequence)
		}
		if len(c.State) == 0 || !json.Valid(c.State) {
			return Invalid("checkpoint at %d: state is not JSON", c.Sequence)
		}
	}
	return nil
}
