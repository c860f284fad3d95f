package convo

import (
	"context"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// CheckpointEvery is how many steps a context build reads between two
// context checkpoints it saves: a later build reads at most about this many
// steps after the newest checkpoint (plus what the model can see).
var CheckpointEvery = 512

// Loader builds the context of a top-level run from a session's steps and
// its context checkpoints.
type Loader struct {
	Store store.Store
	// Budget is the agent's token budget (0: none); Summarize is set when
	// the agent folds what is trimmed into a summary with its model.
	Budget    int
	Summarize bool
	// Allowed returns the tool an answered approval step allowed "always"
	// for the session.
	Allowed func(*steptype.Step) (string, bool)
}

// threadBuild is a conversation built from the session's steps, with the
// tools the session allowed and the checkpoints the build took.
type threadBuild struct {
	conv    *Conversation
	allowed map[string]bool
	saves   []*store.ContextCheckpoint
	every   func(*steptype.Step) (string, bool)
}

// Load builds the context of a top-level run of sess: the session's hop-0
// messages up to step end, and the tools the session allowed. Without
// context checkpoints it reads every step and saves checkpoints as it
// goes. With them:
//
//   - under a token budget, it starts from the newest checkpoint (reading
//     at most about CheckpointEvery steps) and keeps only the messages
//     after it; when the next window may need older messages (see
//     Conversation.Sufficient) it starts again from the newest checkpoint
//     that leaves more than the budget after it, then from the trim point,
//     then from step 1;
//   - without a budget the model sees every message, so every step is read,
//     but the hash chain is not recomputed up to the newest checkpoint.
//
// Either way the conversation, its fingerprint chain and its trim point are
// the same as a build from step 1 (TestContextCheckpointExact).
func (l *Loader) Load(ctx context.Context, sess *steptype.Session, end int64) (*Conversation, map[string]bool, error) {
	cps, err := l.checkpoints(ctx, sess, end)
	if err != nil {
		return nil, nil, err
	}
	var b *threadBuild
	if l.Budget > 0 && len(cps) > 0 {
		b, err = l.budgetBuild(ctx, sess.ID, cps, end)
	} else {
		b, err = l.fullBuild(ctx, sess.ID, cps, end)
	}
	if err != nil {
		return nil, nil, err
	}
	l.saveCheckpoints(ctx, b.saves)
	return b.conv, b.allowed, nil
}

// Full builds the whole conversation of sess up to step end, every message
// loaded (for a conversation Load returned with only its tail).
func (l *Loader) Full(ctx context.Context, sess *steptype.Session, end int64) (*Conversation, error) {
	cps, _ := l.checkpoints(ctx, sess, end)
	b, err := l.fullBuild(ctx, sess.ID, cps, end)
	if err != nil {
		return nil, err
	}
	return b.conv, nil
}

// budgetBuild builds from the newest checkpoint that suffices for a model
// that sees l.Budget tokens (see Load).
func (l *Loader) budgetBuild(ctx context.Context, sessionID string, cps []*store.ContextCheckpoint, end int64) (*threadBuild, error) {
	tried := map[int64]bool{}
	try := func(cp *store.ContextCheckpoint) (*threadBuild, bool, error) {
		tried[cp.Sequence] = true
		st, err := decodeState(cp)
		if err != nil {
			return nil, false, nil // not usable: try another
		}
		b, err := l.buildFrom(ctx, sessionID, st, cp.Sequence, end)
		if err != nil {
			return nil, false, err
		}
		return b, b.conv.Sufficient(l.Budget, l.Summarize), nil
	}
	b, ok, err := try(cps[0])
	if err != nil || ok {
		return b, err
	}
	if b != nil {
		// The newest checkpoint that leaves more than the budget after it,
		// then one at or before the trim point.
		c := b.conv
		total, extra := c.Tokens(c.Count()), c.summaryTokens()
		picks := []func(*store.ContextCheckpoint) bool{
			func(cp *store.ContextCheckpoint) bool { return total-int(cp.Tokens)+extra > l.Budget },
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
	return l.fullBuild(ctx, sessionID, cps, end)
}

// Sufficient reports whether the next window under budget needs no message
// before the loaded ones: the trim point is among them, or (trimming, not
// summarizing) the loaded messages are over the budget and hold a user
// message, so the window's cut lands among them.
func (c *Conversation) Sufficient(budget int, summarize bool) bool {
	if c.base == 0 || c.trimmed >= c.base {
		return true
	}
	if summarize {
		return false
	}
	if c.Tokens(c.Count())-c.baseTokens+c.summaryTokens() <= budget {
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
func (l *Loader) buildFrom(ctx context.Context, sessionID string, st *convState, seq, end int64) (*threadBuild, error) {
	c, allowed, err := l.restore(ctx, sessionID, st)
	if err != nil {
		return nil, err
	}
	b := &threadBuild{conv: c, allowed: allowed, every: l.Allowed}
	if seq >= end {
		return b, nil
	}
	steps, err := l.Store.StepList(ctx, &store.StepListParams{SessionID: sessionID, StartSeq: seq + 1, EndSeq: end})
	if err != nil {
		return nil, err
	}
	return b, b.replay(steps, nil)
}

// fullBuild builds the conversation from step 1. The messages up to the
// newest checkpoint are not hashed: the checkpoint has their hash.
func (l *Loader) fullBuild(ctx context.Context, sessionID string, cps []*store.ContextCheckpoint, end int64) (*threadBuild, error) {
	b := &threadBuild{conv: New(), allowed: map[string]bool{}, every: l.Allowed}
	if end <= 0 {
		return b, nil
	}
	steps, err := l.Store.StepList(ctx, &store.StepListParams{SessionID: sessionID, EndSeq: end})
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
			b = &threadBuild{conv: New(), allowed: map[string]bool{}, every: l.Allowed}
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
// a checkpoint every CheckpointEvery steps while no step so far waits (a
// waiting step changes when answered; the steps before it never do).
func (b *threadBuild) replay(steps []*steptype.Step, from *hashFrom) error {
	c, since, waiting := b.conv, 0, false
	for _, s := range steps {
		if b.every != nil {
			if name, ok := b.every(s); ok {
				b.allowed[name] = true
			}
		}
		if s.Status == steptype.StepWaiting {
			waiting = true
		}
		if s.Hop == 0 {
			c.Add(s)
			if s.Kind == steptype.KindSystem && s.Name == "context" {
				c.RestoreTrim(s)
			}
		}
		if from != nil && s.Sequence == from.seq {
			if !c.adopt(from.st) {
				return errCheckpointMismatch
			}
			since = 0
			continue
		}
		if since++; since >= CheckpointEvery && c.hashing && !waiting && c.trimmed >= 0 {
			cp, err := c.Snapshot(s, b.allowed)
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

// restore returns the conversation of a checkpoint: no messages loaded
// (base is its message count), its hash, tool-call and trim state. The
// latest assistant step with tool calls is re-read from the session.
func (l *Loader) restore(ctx context.Context, sessionID string, st *convState) (*Conversation, map[string]bool, error) {
	c := New()
	c.base, c.baseTokens, c.baseSeq, c.firstSeq = st.Messages, st.Tokens, st.LastSeq, st.FirstSeq
	copy(c.head[:], st.Head)
	c.open, c.blockAt, c.trimmed, c.trimSeq, c.summary = st.Open, st.BlockAt, st.Trimmed, st.TrimSeq, st.Summary
	for _, id := range st.Answered {
		c.answered[id] = true
	}
	copy(c.blockHash[:], st.BlockHash)
	for _, b := range st.Block {
		c.block = append(c.block, blockResult{pos: b.Pos, msg: b.Msg})
	}
	if st.Assistant > 0 {
		s, err := l.Store.StepGet(ctx, &store.StepGetParams{SessionID: sessionID, Sequence: st.Assistant})
		if err != nil {
			return nil, nil, fmt.Errorf("context checkpoint: step %d: %w", st.Assistant, err)
		}
		c.lastAssistant = s
	}
	allowed := map[string]bool{}
	for _, name := range st.Allowed {
		allowed[name] = true
	}
	return c, allowed, nil
}

// checkpoints returns the context checkpoints valid for a session's steps
// up to end, newest first: its own, then those of its ancestors up to the
// fork points (a fork's first steps are its parent's).
func (l *Loader) checkpoints(ctx context.Context, sess *steptype.Session, end int64) ([]*store.ContextCheckpoint, error) {
	var out []*store.ContextCheckpoint
	for depth := 0; end > 0 && depth < 64; depth++ {
		list, err := l.Store.ContextCheckpointList(ctx, &store.ContextCheckpointListParams{SessionID: sess.ID, MaxSeq: end})
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			if sess.ParentSessionID == "" || c.Sequence > sess.ForkSequence {
				out = append(out, c)
			}
		}
		if sess.ParentSessionID == "" {
			break
		}
		end = min(end, sess.ForkSequence)
		p, err := l.Store.SessionGet(ctx, &store.SessionGetParams{ID: sess.ParentSessionID})
		if err != nil {
			return nil, err
		}
		sess = p
	}
	return out, nil
}

// saveCheckpoints stores the checkpoints a build took. They are derived
// data: a failure to save them costs the next build time, nothing else.
func (l *Loader) saveCheckpoints(ctx context.Context, cps []*store.ContextCheckpoint) {
	if len(cps) == 0 {
		return
	}
	_ = l.Store.ContextCheckpointPut(context.WithoutCancel(ctx), &store.ContextCheckpointPutParams{Checkpoints: cps})
}
