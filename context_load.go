package stepwise

import (
	"context"
	"errors"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// threadBuild is a conversation built from the session's steps, with the
// tools the session allowed and the checkpoints the build took.
type threadBuild struct {
	conv    *conversation
	allowed map[string]bool
	saves   []*store.ContextCheckpoint
}

// loadThread builds the context of a top-level run: the session's hop-0
// messages up to x.before. Without context checkpoints it reads every step
// and saves checkpoints as it goes. With them:
//
//   - under a token budget, it starts from the newest checkpoint (reading
//     at most about checkpointEvery steps) and keeps only the messages
//     after it; when the next window may need older messages (see
//     conversation.sufficient) it starts again from the newest checkpoint
//     that leaves more than the budget after it, then from the trim point,
//     then from step 1;
//   - without a budget the model sees every message, so every step is read,
//     but the hash chain is not recomputed up to the newest checkpoint.
//
// Either way the conversation, its fingerprint chain and its trim point are
// the same as a build from step 1 (TestContextCheckpointExact).
func (x *execution) loadThread(ctx context.Context, sess *Session) error {
	end := sess.LastSequence
	if x.before > 0 {
		end = min(end, x.before-1)
	}
	cps, err := x.checkpoints(ctx, sess, end)
	if err != nil {
		return err
	}
	var b *threadBuild
	if budget := x.agent.Context.TokenBudget; budget > 0 && len(cps) > 0 {
		b, err = x.budgetBuild(ctx, cps, end, budget)
	} else {
		b, err = x.fullBuild(ctx, cps, end)
	}
	if err != nil {
		return err
	}
	x.conv, x.allowed = b.conv, b.allowed
	x.saveCheckpoints(ctx, b.saves)
	return nil
}

// budgetBuild builds from the newest checkpoint that suffices for a model
// that sees budget tokens (see loadThread).
func (x *execution) budgetBuild(ctx context.Context, cps []*store.ContextCheckpoint, end int64, budget int) (*threadBuild, error) {
	tried := map[int64]bool{}
	try := func(cp *store.ContextCheckpoint) (*threadBuild, bool, error) {
		tried[cp.Sequence] = true
		st, err := decodeState(cp)
		if err != nil {
			return nil, false, nil // not usable: try another
		}
		b, err := x.buildFrom(ctx, st, cp.Sequence, end)
		if err != nil {
			return nil, false, err
		}
		return b, b.conv.sufficient(budget, x.agent.Context.Strategy == "summarize" && x.agent.Model != nil), nil
	}
	b, ok, err := try(cps[0])
	if err != nil || ok {
		return b, err
	}
	if b != nil {
		// The newest checkpoint that leaves more than the budget after it,
		// then one at or before the trim point.
		c := b.conv
		total, extra := c.tokens(c.count()), 0
		if c.summary != "" {
			extra = EstimateTokens(summaryMessage(c.summary))
		}
		picks := []func(*store.ContextCheckpoint) bool{
			func(cp *store.ContextCheckpoint) bool { return total-int(cp.Tokens)+extra > budget },
			func(cp *store.ContextCheckpoint) bool { return c.trimSeq > 0 && cp.Sequence <= c.trimSeq },
		}
		for _, pick := range picks {
			for _, cp := range cps {
				if tried[cp.Sequence] || !pick(cp) {
					continue
				}
				if b, ok, err := try(cp); err != nil || ok {
					return b, err
				}
				break
			}
		}
	}
	return x.fullBuild(ctx, cps, end)
}

// sufficient reports whether the next window under budget needs no message
// before the loaded ones: the trim point is among them, or (trimming, not
// summarizing) the loaded messages are over the budget and hold a user
// message, so the window's cut lands among them.
func (c *conversation) sufficient(budget int, summarize bool) bool {
	if c.base == 0 || c.trimmed >= c.base {
		return true
	}
	if summarize {
		return false
	}
	extra := 0
	if c.summary != "" {
		extra = EstimateTokens(summaryMessage(c.summary))
	}
	if c.tokens(c.count())-c.baseTokens+extra <= budget {
		return false
	}
	for _, m := range c.msgs {
		if m.Role == steptype.RoleUser {
			return true
		}
	}
	return false
}

// buildFrom builds the conversation from a checkpoint at sequence seq.
func (x *execution) buildFrom(ctx context.Context, st *convState, seq, end int64) (*threadBuild, error) {
	c, allowed, err := x.restore(ctx, st)
	if err != nil {
		return nil, err
	}
	b := &threadBuild{conv: c, allowed: allowed}
	if seq >= end {
		return b, nil
	}
	steps, err := x.e.store.StepList(ctx, &store.StepListParams{SessionID: x.run.SessionID, StartSeq: seq + 1, EndSeq: end})
	if err != nil {
		return nil, err
	}
	return b, b.replay(steps, nil)
}

// fullBuild builds the conversation from step 1. The messages up to the
// newest checkpoint are not hashed: the checkpoint has their hash.
func (x *execution) fullBuild(ctx context.Context, cps []*store.ContextCheckpoint, end int64) (*threadBuild, error) {
	b := &threadBuild{conv: newConversation(), allowed: map[string]bool{}}
	if end <= 0 {
		return b, nil
	}
	steps, err := x.e.store.StepList(ctx, &store.StepListParams{SessionID: x.run.SessionID, EndSeq: end})
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		if st, err := decodeState(cp); err == nil {
			b.conv.hashing = false
			if err := b.replay(steps, &hashFrom{seq: cp.Sequence, st: st}); err == nil {
				return b, nil
			}
			// The checkpoint does not match this log: hash everything.
			b = &threadBuild{conv: newConversation(), allowed: map[string]bool{}}
			break
		}
	}
	return b, b.replay(steps, nil)
}

// hashFrom is the checkpoint from which a build that did not hash the
// messages before it takes over their hash.
type hashFrom struct {
	seq int64
	st  *convState
}

// errCheckpointMismatch: a checkpoint does not match the steps before it.
var errCheckpointMismatch = errors.New("stepwise: context checkpoint does not match the step log")

// replay extends the build with steps (in sequence order, every hop): the
// hop-0 messages, the latest trim and the session's allowed tools, taking
// a checkpoint every checkpointEvery steps while no step so far waits (a
// waiting step changes when answered; the steps before it never do).
func (b *threadBuild) replay(steps []*Step, from *hashFrom) error {
	c, since, waiting := b.conv, 0, false
	for _, s := range steps {
		if name, ok := allowedBy(s); ok {
			b.allowed[name] = true
		}
		if s.Status == steptype.StepWaiting {
			waiting = true
		}
		if s.Hop == 0 {
			c.add(s)
			if s.Kind == steptype.KindSystem && s.Name == "context" {
				c.restoreTrim(s)
			}
		}
		if from != nil && s.Sequence == from.seq {
			if !c.adopt(from.st) {
				return errCheckpointMismatch
			}
			since = 0
			continue
		}
		if since++; since >= checkpointEvery && c.hashing && !waiting && c.trimmed >= 0 {
			cp, err := c.snapshot(s, b.allowed)
			if err != nil {
				return err
			}
			b.saves = append(b.saves, cp)
			since = 0
		}
	}
	if !c.hashing {
		return errCheckpointMismatch // the checkpoint's step was not read
	}
	return nil
}

// fullConversation rebuilds the whole conversation when only its tail was
// loaded (Scope.Messages, a last answer before the loaded messages).
func (x *execution) fullConversation() *conversation {
	if x.conv.base == 0 {
		return x.conv
	}
	sess, err := x.e.store.SessionGet(x.ctx, &store.SessionGetParams{ID: x.run.SessionID})
	if err != nil {
		return x.conv
	}
	end := sess.LastSequence
	if x.before > 0 {
		end = min(end, x.before-1)
	}
	cps, _ := x.checkpoints(x.ctx, sess, end)
	b, err := x.fullBuild(x.ctx, cps, end)
	if err == nil && b.conv.open && !x.conv.open {
		b.conv.closeCalls() // as the model call did on x.conv
	}
	if err != nil || b.conv.headBytes() == nil || string(b.conv.headBytes()) != string(x.conv.headBytes()) {
		return x.conv // the tail is all there is
	}
	b.conv.trimmed, b.conv.trimSeq, b.conv.summary = x.conv.trimmed, x.conv.trimSeq, x.conv.summary
	x.conv = b.conv
	return x.conv
}

// allMessages returns every message of the run's context.
func (x *execution) allMessages() []llm.Message { return x.fullConversation().messages() }

// lastAssistantText returns the content of the latest assistant message.
func (x *execution) lastAssistantText() string {
	if t, ok := x.conv.lastAssistantText(); ok {
		return t
	}
	t, _ := x.fullConversation().lastAssistantText()
	return t
}
