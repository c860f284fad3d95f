package convo

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// convState is the state of a conversation after a step, saved as a
// store.ContextCheckpoint: everything that decides how later steps extend
// it, so a build that starts from it is the same as one from step 1 (see
// TestContextCheckpointExact). It is versioned by V; a state of another
// version is not used.
type convState struct {
	V        int    `json:"v"`
	Messages int    `json:"messages"`
	Tokens   int    `json:"tokens"`
	Head     []byte `json:"head,omitempty"`
	FirstSeq int64  `json:"first_seq,omitempty"`
	LastSeq  int64  `json:"last_seq,omitempty"` // of message Messages-1
	// Assistant is the sequence of the latest assistant step with tool
	// calls (re-read on restore), Open and Answered its calls' state.
	Assistant int64    `json:"assistant,omitempty"`
	Open      bool     `json:"open,omitempty"`
	Answered  []string `json:"answered,omitempty"`
	// The open tool-result block (see conversation.nextHash).
	BlockAt   int          `json:"block_at"`
	BlockHash []byte       `json:"block_hash,omitempty"`
	Block     []blockState `json:"block,omitempty"`
	// The trim point: an index, the ToSequence it came from, and the
	// summary.
	Trimmed int    `json:"trimmed"`
	TrimSeq int64  `json:"trim_seq,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Allowed are the tools allowed "always" for the session so far.
	Allowed []string `json:"allowed,omitempty"`
}

// blockState is a blockResult in a convState.
type blockState struct {
	Pos int         `json:"pos"`
	Msg llm.Message `json:"msg"`
}

const convStateVersion = 1

// Snapshot returns the checkpoint of c after step s.
func (c *Conversation) Snapshot(s *steptype.Step, allowed map[string]bool) (*store.ContextCheckpoint, error) {
	n := c.Count()
	st := convState{V: convStateVersion, Messages: n, Tokens: c.Tokens(n), FirstSeq: c.firstSeq,
		Open: c.open, BlockAt: c.blockAt, Trimmed: c.trimmed, TrimSeq: c.trimSeq, Summary: c.summary,
		Allowed: slices.Sorted(maps.Keys(allowed))}
	if n > 0 {
		st.Head, st.LastSeq = c.HeadBytes(), c.SeqAt(n-1)
	}
	if c.lastAssistant != nil {
		st.Assistant = c.lastAssistant.Sequence
	}
	if c.open {
		for id, ok := range c.answered {
			if ok {
				st.Answered = append(st.Answered, id)
			}
		}
		slices.Sort(st.Answered)
	}
	if c.blockAt >= 0 {
		st.BlockHash = slices.Clone(c.blockHash[:])
		for _, r := range c.block {
			st.Block = append(st.Block, blockState{Pos: r.pos, Msg: r.msg})
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	return &store.ContextCheckpoint{SessionID: s.SessionID, Sequence: s.Sequence, StepID: s.ID,
		Messages: int64(n), Tokens: int64(st.Tokens), State: bytes.TrimSpace(b.Bytes())}, nil
}

// decodeState decodes a checkpoint's state.
func decodeState(cp *store.ContextCheckpoint) (*convState, error) {
	var st convState
	if err := json.Unmarshal(cp.State, &st); err != nil {
		return nil, fmt.Errorf("context checkpoint at %d: %w", cp.Sequence, err)
	}
	if st.V != convStateVersion || st.Messages != int(cp.Messages) ||
		st.Messages > 0 && len(st.Head) != sha256.Size || st.BlockAt >= 0 && len(st.BlockHash) != sha256.Size {
		return nil, fmt.Errorf("context checkpoint at %d: state of another version or malformed", cp.Sequence)
	}
	return &st, nil
}

// adopt makes c continue, with hashing, from the state st it reached
// without hashing (the messages a checkpoint already hashed): ok is false
// when c does not match st.
func (c *Conversation) adopt(st *convState) bool {
	n := c.Count()
	if n != st.Messages || c.Tokens(n) != st.Tokens || c.trimmed != st.Trimmed || c.open != st.Open ||
		n > 0 && c.SeqAt(n-1) != st.LastSeq {
		return false
	}
	copy(c.head[:], st.Head)
	c.blockAt = st.BlockAt
	copy(c.blockHash[:], st.BlockHash)
	c.block = nil
	for _, b := range st.Block {
		c.block = append(c.block, blockResult{pos: b.Pos, msg: b.Msg})
	}
	c.hashing = true
	return true
}
