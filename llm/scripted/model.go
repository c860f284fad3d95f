package scripted

import (
	"encoding/json"
	"hash/maphash"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Model is a deterministic llm.Model that plays a script. It is safe for
// concurrent use; the only state it keeps is the failure counters of turns
// with a Failure.Times.
type Model struct {
	name      string // bare script name
	full      string // "scripted:" + name
	grouped   bool
	flat      seq     // flat form
	matched   []entry // grouped form: entries with Match, in script order
	plain     []seq   // grouped form: entries without Match, in order
	loop      bool    // grouped form: cycle plain entries
	strict    bool    // refuse malformed tool-call sequences
	exhausted cturn

	seed  maphash.Seed
	mu    sync.Mutex                         // guards fails and memo
	fails map[failKey]int                    // failures served per turn and request
	memo  map[weak.Pointer[llm.Message]]memo // tallies of recent requests, by their first message's address
}

var (
	_ llm.Model    = (*Model)(nil)
	_ llm.Provider = (*Model)(nil)
)

type entry struct {
	match string
	seq   seq
}

// seq is a compiled list of turns; ends[i] is the first position after turn i.
type seq struct {
	where string // field path of the list, for messages
	turns []cturn
	ends  []int
	total int
	loop  bool
}

// cturn is a turn prepared for serving.
type cturn struct {
	Turn
	where    string            // "turns[3]", for messages
	args     []string          // arguments per call, streamed
	raw      []json.RawMessage // the same bytes, for final responses
	outChars int
	finish   string
}

type failKey struct {
	t *cturn
	h uint64
}

// New returns a model playing s. Name() is "scripted:"+name. New does not
// validate: values out of range are normalised as documented on Turn.
func New(name string, s Script) *Model {
	m := &Model{name: name, full: "scripted:" + name, seed: maphash.MakeSeed(), strict: s.Strict}
	if len(s.UserTurns) > 0 {
		m.grouped, m.loop = true, s.Loop
		for i, u := range s.UserTurns {
			where := "user_turns[" + strconv.Itoa(i) + "].turns"
			q := compile(where, u.Turns, u.Loop)
			if u.Match != "" {
				m.matched = append(m.matched, entry{match: u.Match, seq: q})
			} else {
				m.plain = append(m.plain, q)
			}
		}
	} else {
		m.flat = compile("turns", s.Turns, s.Loop)
	}
	m.exhausted = prepare("", Turn{Text: ExhaustedText})
	return m
}

// Loop returns the benchmark model "scripted:loop": n turns that each call
// toolName with args (a JSON object; empty means {}), then one turn that
// answers final. Every text streams in one delta. It panics if args is not
// valid JSON.
func Loop(toolName, args string, n int, final string) *Model {
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		panic("scripted.Loop: args is not valid JSON: " + args)
	}
	call := Turn{ToolCalls: []steptype.ToolCall{{Name: toolName, Arguments: json.RawMessage(args)}}, Chunk: -1, Repeat: n}
	var turns []Turn
	if n > 0 {
		turns = append(turns, call)
	}
	turns = append(turns, Turn{Text: final, Chunk: -1})
	return New("loop", Script{Turns: turns})
}

// Name returns "scripted:" followed by the script name.
func (m *Model) Name() string { return m.full }

// Provider returns "scripted".
func (m *Model) Provider() string { return "scripted" }

func compile(where string, turns []Turn, loop bool) seq {
	q := seq{where: where, loop: loop, turns: make([]cturn, len(turns)), ends: make([]int, len(turns))}
	for i, t := range turns {
		q.turns[i] = prepare(where+"["+strconv.Itoa(i)+"]", t)
		q.total += q.turns[i].Repeat
		q.ends[i] = q.total
	}
	return q
}

func prepare(where string, t Turn) cturn {
	if t.Repeat < 1 {
		t.Repeat = 1
	}
	if t.Chunk == 0 {
		t.Chunk = DefaultChunk
	}
	if f := t.Fail; f != nil && f.Message == "" {
		c := *f
		c.Message = http.StatusText(c.Status)
		if c.Message == "" {
			c.Message = "simulated error"
		}
		t.Fail = &c
	}
	c := cturn{Turn: t, where: where, finish: "stop"}
	c.outChars = len(t.Text) + len(t.Reasoning)
	c.args = make([]string, len(t.ToolCalls))
	c.raw = make([]json.RawMessage, len(t.ToolCalls))
	for i, tc := range t.ToolCalls {
		a := strings.TrimSpace(string(tc.Arguments))
		if a == "" {
			a = "{}"
		}
		c.args[i] = a
		c.raw[i] = json.RawMessage(a)[:len(a):len(a)]
		c.outChars += len(tc.Name) + len(a)
	}
	if len(t.ToolCalls) > 0 {
		c.finish = "tool_calls"
	}
	return c
}

// at returns the turn at position p, or nil past the end.
func (q *seq) at(p int) *cturn {
	if p >= q.total {
		if !q.loop || q.total == 0 {
			return nil
		}
		p %= q.total
	}
	lo, hi := 0, len(q.ends)
	for lo < hi { // first i with ends[i] > p
		mid := int(uint(lo+hi) >> 1)
		if q.ends[mid] > p {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return &q.turns[lo]
}

// pick chooses the turn for msgs: a pure function of the messages.
func (m *Model) pick(msgs []llm.Message, c *tally) *cturn {
	var t *cturn
	if !m.grouped {
		t = m.flat.at(c.assistants)
	} else {
		t = m.pickGrouped(msgs, c.lastUser, c.after)
	}
	if t == nil {
		t = &m.exhausted
	}
	return t
}

func (m *Model) pickGrouped(msgs []llm.Message, lastUser, after int) *cturn {
	last := ""
	if lastUser >= 0 {
		last = msgs[lastUser].Content
	}
	if q := m.matching(last); q != nil {
		return q.at(after)
	}
	// The current user message takes the next entry without Match: count
	// the earlier user messages that no Match claimed.
	n := 0
	for i := 0; i < lastUser; i++ {
		if msgs[i].Role == steptype.RoleUser && m.matching(msgs[i].Content) == nil {
			n++
		}
	}
	if n >= len(m.plain) {
		if !m.loop || len(m.plain) == 0 {
			return nil
		}
		n %= len(m.plain)
	}
	return m.plain[n].at(after)
}

func (m *Model) matching(s string) *seq {
	for i := range m.matched {
		if strings.Contains(s, m.matched[i].match) {
			return &m.matched[i].seq
		}
	}
	return nil
}

// fail reports whether this call of t fails, counting it.
func (m *Model) fail(t *cturn, req *llm.Request) bool {
	if t.Fail.Times <= 0 {
		return true
	}
	k := failKey{t: t, h: m.hash(req)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fails == nil {
		m.fails = make(map[failKey]int)
	}
	if m.fails[k] >= t.Fail.Times {
		return false
	}
	m.fails[k]++
	return true
}

// hash identifies a request by its messages.
func (m *Model) hash(req *llm.Request) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	h.WriteString(req.System)
	for _, msg := range req.Messages {
		h.WriteByte(0)
		h.WriteString(string(msg.Role))
		h.WriteByte(0)
		h.WriteString(msg.Content)
		h.WriteByte(0)
		h.WriteString(msg.Reasoning)
		h.WriteByte(0)
		h.WriteString(msg.ToolCallID)
		for _, tc := range msg.ToolCalls {
			h.WriteByte(1)
			h.WriteString(tc.ID)
			h.WriteByte(0)
			h.WriteString(tc.Name)
			h.WriteByte(0)
			h.Write(tc.Arguments)
		}
	}
	return h.Sum64()
}

// failure returns the error of a failing turn.
func (t *cturn) failure() *llm.Error {
	class, code := llm.ClassifyHTTP(t.Fail.Status)
	return &llm.Error{Class: class, StatusCode: t.Fail.Status, Code: code, RetryAfter: t.Fail.RetryAfter, Message: t.Fail.Message}
}

// mismatch returns the error of a turn whose Match guard failed.
func (t *cturn) mismatch(name string) *llm.Error {
	at := t.where
	if t.Line > 0 {
		at += " (line " + strconv.Itoa(t.Line) + ")"
	}
	return &llm.Error{Class: steptype.ErrorPermanent, Code: "script_mismatch",
		Message: "script " + name + ": " + at + " expects the last user message to contain " + strconv.Quote(t.Match)}
}

// baseName is the script name derived from a file name: the base name
// without a .yaml, .yml or .json extension.
func baseName(file string) string {
	b := path.Base(strings.ReplaceAll(file, "\\", "/"))
	switch ext := path.Ext(b); strings.ToLower(ext) {
	case ".yaml", ".yml", ".json":
		b = strings.TrimSuffix(b, ext)
	}
	if b == "" || b == "." || b == "/" {
		return "script"
	}
	return b
}
