package scripted

import (
	"context"
	"iter"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Generate plays the turn that the script assigns to req (see
// docs/scripted_model.md): after the turn's Delay it streams the reasoning,
// then the content, then each tool call's arguments in deltas of Chunk
// characters, separated by ChunkDelay, and ends with the final response. A
// failing turn yields its *llm.Error instead. Cancelling ctx during a delay
// yields ctx.Err() at once. Nothing runs before iteration begins.
func (m *Model) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(nil, err)
			return
		}
		r := req
		if r == nil {
			r = &llm.Request{}
		}
		if m.strict {
			if err := llm.CheckSequence(r.Messages); err != nil {
				yield(nil, err)
				return
			}
		}
		c := m.tally(r.Messages)
		t, p := m.pick(r.Messages, &c), c.assistants
		if t.Match != "" && (c.lastUser < 0 || !strings.Contains(r.Messages[c.lastUser].Content, t.Match)) {
			yield(nil, t.mismatch(m.full))
			return
		}
		if err := sleep(ctx, t.Delay); err != nil {
			yield(nil, err)
			return
		}
		s := stream{ctx: ctx, yield: yield, chunkDelay: t.ChunkDelay}
		if t.Fail != nil && m.fail(t, r) {
			if t.Fail.After > 0 {
				head, _ := cut(t.Text, t.Fail.After)
				if !s.text(head, t.Chunk, false) || !s.pause() {
					return
				}
			}
			yield(nil, t.failure())
			return
		}
		if !s.text(t.Reasoning, t.Chunk, true) || !s.text(t.Text, t.Chunk, false) {
			return
		}
		// One allocation holds the final response and, commonly, its only call.
		f := &finalResponse{}
		if n := len(t.ToolCalls); n == 1 {
			f.ToolCalls = f.one[:]
		} else if n > 1 {
			f.ToolCalls = make([]steptype.ToolCall, n)
		}
		for i, tc := range t.ToolCalls {
			id := tc.ID
			if id == "" {
				var b [48]byte // one allocation: "call_" + p + "_" + i
				id = string(strconv.AppendInt(append(strconv.AppendInt(append(b[:0], "call_"...), int64(p), 10), '_'), int64(i), 10))
			}
			// Arguments share the script's bytes (capacity clipped): read-only.
			f.ToolCalls[i] = steptype.ToolCall{ID: id, Name: tc.Name, Arguments: t.raw[i]}
			if !s.call(i, id, tc.Name, t.args[i], t.Chunk) {
				return
			}
		}
		if !s.pause() {
			return
		}
		f.Content, f.Reasoning, f.FinishReason, f.Model = t.Text, t.Reasoning, t.finish, m.name
		f.Usage = usage(t, len(r.System)+c.chars)
		yield(&f.Response, nil)
	}
}

type finalResponse struct {
	llm.Response
	one [1]steptype.ToolCall
}

type callDelta struct {
	llm.Response
	one [1]llm.ToolCallDelta
}

// stream yields partial responses, pausing between them.
type stream struct {
	ctx        context.Context
	yield      func(*llm.Response, error) bool
	chunkDelay time.Duration
	started    bool
}

// pause waits ChunkDelay unless nothing was yielded yet; false ends the stream.
func (s *stream) pause() bool {
	if !s.started {
		return true
	}
	if err := sleep(s.ctx, s.chunkDelay); err != nil {
		s.yield(nil, err)
		return false
	}
	return true
}

func (s *stream) send(r *llm.Response) bool {
	if !s.pause() {
		return false
	}
	s.started = true
	return s.yield(r, nil)
}

func (s *stream) text(text string, chunk int, reasoning bool) bool {
	for text != "" {
		var part string
		part, text = cut(text, chunk)
		r := &llm.Response{Partial: true}
		if reasoning {
			r.Reasoning = part
		} else {
			r.Content = part
		}
		if !s.send(r) {
			return false
		}
	}
	return true
}

func (s *stream) call(i int, id, name, args string, chunk int) bool {
	first := true
	for first || args != "" {
		var part string
		part, args = cut(args, chunk)
		d := &callDelta{}
		d.Partial, d.ToolCallDeltas = true, d.one[:]
		d.one[0] = llm.ToolCallDelta{Index: i, Arguments: part}
		if first {
			d.one[0].ID, d.one[0].Name, first = id, name, false
		}
		if !s.send(&d.Response) {
			return false
		}
	}
	return true
}

// cut splits s after n characters (runes); n <= 0 takes everything.
func cut(s string, n int) (head, tail string) {
	if n <= 0 || len(s) <= n {
		return s, ""
	}
	i := 0
	for c := 0; c < n && i < len(s); c++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], s[i:]
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func usage(t *cturn, inChars int) llm.Usage {
	u := t.Usage
	if u.InputTokens == 0 {
		u.InputTokens = tokens(inChars)
	}
	if u.OutputTokens == 0 {
		u.OutputTokens = tokens(t.outChars)
	}
	if u.ReasoningTokens == 0 {
		u.ReasoningTokens = tokens(len(t.Reasoning))
	}
	return u
}

func tokens(chars int) int64 { return int64((chars + 3) / 4) }
