package otlpingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/steptype"
)

// LangSmith run trees (docs/otlp_ingest.md, "LangSmith"): the langsmith
// clients post each run when it starts and patch it when it ends, or send
// both at once. A run is recorded when both its create and its end are
// known, as a span of its trace would be: same ordering, session and
// idempotency rules (the step id is derived from the run id).

// ErrInvalidRun is returned for a run operation that cannot be recorded: no
// id, an unknown run type, a malformed time. Nothing of its batch is
// recorded.
var ErrInvalidRun = errors.New("stepwise: invalid langsmith run")

// maxPendingRuns bounds the runs held for their end (or their create).
const maxPendingRuns = 100_000

// lsRun is a LangSmith run: its create merged with its updates.
type lsRun struct {
	id, traceID, parentID string
	name, runType         string
	start, end            time.Time
	inputs, outputs       any
	errMsg                string
	metadata              map[string]any // extra.metadata
	invocation            map[string]any // extra.invocation_params
	created               bool           // the create (post) arrived
	since                 time.Time      // when it was first held
}

// lsRunTypes are the run types of the LangSmith API.
var lsRunTypes = map[string]bool{"llm": true, "chain": true, "tool": true, "retriever": true,
	"embedding": true, "prompt": true, "parser": true}

// RunOps is one batch of LangSmith run operations: creates and updates.
type RunOps struct {
	Post  []map[string]any `json:"post"`
	Patch []map[string]any `json:"patch"`
}

// IngestRuns records a batch of LangSmith run operations. Every operation
// is checked first: an invalid one (ErrInvalidRun) refuses the batch and
// records nothing. A run is recorded once both its create and its end
// time arrived; re-sent operations of a recorded run change nothing.
func (in *Ingester) IngestRuns(ctx context.Context, ops *RunOps) error {
	type op struct {
		m      map[string]any
		create bool
	}
	var all []op
	for _, m := range ops.Post {
		all = append(all, op{m, true})
	}
	for _, m := range ops.Patch {
		all = append(all, op{m, false})
	}
	for i, o := range all {
		if err := checkRunOp(o.m, o.create); err != nil {
			return fmt.Errorf("%w: operation %d: %v", ErrInvalidRun, i, err)
		}
	}
	now := time.Now()
	var done []*span
	in.lsMu.Lock()
	if len(in.ls)+len(all) > maxPendingRuns {
		in.lsMu.Unlock()
		return fmt.Errorf("%w: %d runs wait for their end already", ErrUnavailable, len(in.ls))
	}
	for _, o := range all {
		id := asString(o.m["id"])
		r := in.ls[id]
		if r == nil {
			r = &lsRun{id: id, since: now}
		}
		r.merge(o.m, o.create)
		if r.created && !r.end.IsZero() {
			delete(in.ls, id)
			done = append(done, r.span())
			continue
		}
		in.ls[id] = r
	}
	in.lsMu.Unlock()
	if len(done) == 0 {
		return nil
	}
	return in.ingestSpans(ctx, done)
}

// sweepRuns records the runs that waited for their end longer than
// TraceIdle as they are (an unfinished run ends when it was last seen),
// and forgets updates whose create never came.
func (in *Ingester) sweepRuns(ctx context.Context, now time.Time) {
	var done []*span
	in.lsMu.Lock()
	for id, r := range in.ls {
		if now.Sub(r.since) < in.cfg.TraceIdle {
			continue
		}
		delete(in.ls, id)
		if !r.created {
			in.cfg.Logger.Warn("stepwise: langsmith ingest: dropped an update of a run never created", "run", id)
			continue
		}
		if r.end.IsZero() {
			r.end = r.start
			if r.errMsg == "" {
				r.errMsg = "the run never ended"
			}
		}
		done = append(done, r.span())
	}
	in.lsMu.Unlock()
	if len(done) > 0 {
		if err := in.ingestSpans(ctx, done); err != nil {
			in.cfg.Logger.Error("stepwise: langsmith ingest: record unfinished runs", "err", err)
		}
	}
}

// checkRunOp validates one create or update.
func checkRunOp(m map[string]any, create bool) error {
	id, ok := m["id"].(string)
	if !ok || id == "" || len(id) > 128 || !utf8.ValidString(id) {
		return errors.New("id must be a non-empty string")
	}
	for _, k := range []string{"trace_id", "parent_run_id", "name", "run_type", "error", "dotted_order"} {
		if v, ok := m[k]; ok && v != nil {
			if _, ok := v.(string); !ok {
				return fmt.Errorf("%s must be a string", k)
			}
		}
	}
	if create && asString(m["run_type"]) == "" {
		return errors.New("run_type is required on a create")
	}
	if t := asString(m["run_type"]); t != "" && !lsRunTypes[t] {
		return fmt.Errorf("unknown run_type %q", t)
	}
	for _, k := range []string{"start_time", "end_time"} {
		if v, ok := m[k]; ok && v != nil {
			if _, err := lsTime(v); err != nil {
				return fmt.Errorf("%s: %v", k, err)
			}
		}
	}
	if create && m["start_time"] == nil {
		return errors.New("start_time is required on a create")
	}
	return nil
}

// lsTime reads a LangSmith time: an ISO 8601 string (with or without a
// zone; none means UTC) or milliseconds since the epoch.
func lsTime(v any) (time.Time, error) {
	switch x := v.(type) {
	case float64:
		return time.UnixMilli(int64(x)).UTC(), nil
	case json.Number:
		f, err := x.Float64()
		return time.UnixMilli(int64(f)).UTC(), err
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
			if t, err := time.Parse(layout, x); err == nil {
				return t.UTC(), nil
			}
		}
		if ms, err := strconv.ParseInt(x, 10, 64); err == nil {
			return time.UnixMilli(ms).UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a time: %v", v)
}

// merge applies a create or an update; fields it does not carry are kept.
func (r *lsRun) merge(m map[string]any, create bool) {
	r.created = r.created || create
	str := func(k string, dst *string) {
		if s := asString(m[k]); s != "" {
			*dst = s
		}
	}
	str("trace_id", &r.traceID)
	str("parent_run_id", &r.parentID)
	str("name", &r.name)
	str("run_type", &r.runType)
	str("error", &r.errMsg)
	if v := m["start_time"]; v != nil {
		r.start, _ = lsTime(v)
	}
	if v := m["end_time"]; v != nil {
		r.end, _ = lsTime(v)
	}
	if v, ok := m["inputs"]; ok && v != nil {
		r.inputs = v
	}
	if v, ok := m["outputs"]; ok && v != nil {
		r.outputs = v
	}
	if extra, ok := m["extra"].(map[string]any); ok {
		if md, ok := extra["metadata"].(map[string]any); ok {
			if r.metadata == nil {
				r.metadata = map[string]any{}
			}
			for k, v := range md {
				r.metadata[k] = v
			}
		}
		if ip, ok := extra["invocation_params"].(map[string]any); ok {
			r.invocation = ip
		}
	}
	if r.traceID == "" && r.parentID == "" {
		r.traceID = r.id // a root run is its own trace
	}
}

// span is the run as a span of its trace, with its mapping.
func (r *lsRun) span() *span {
	s := &span{traceID: r.traceID, spanID: r.id, parentID: r.parentID, name: r.name, start: r.start, end: r.end,
		failed: r.errMsg != "", statusMsg: r.errMsg, a: attrs{}, res: attrs{}}
	if s.traceID == "" {
		s.traceID = r.id
	}
	s.mapped = r.unit()
	return s
}

// unit maps the run by its type.
func (r *lsRun) unit() *unit {
	md := attrs(r.metadata)
	u := &unit{convention: "langsmith", session: md.first("session_id", "thread_id", "conversation_id")}
	switch {
	case r.runType == "llm":
		u.role = roleLLM
		u.model = firstNonEmpty(asString(field(r.invocation, "model")), firstNonEmpty(md.str("ls_model_name"), asString(field(r.inputs, "model"))))
		u.provider = md.str("ls_provider")
		r.llmMessages(u)
		r.usage(u)
	case r.parentID == "":
		u.role = roleRun
		u.agent = r.name
	case r.runType == "tool":
		u.role = roleTool
		u.toolName = r.name
		u.callID = firstNonEmpty(md.str("tool_call_id"), firstNonEmpty(asString(field(r.inputs, "tool_call_id")), asString(field(field(r.inputs, "tool_call"), "id"))))
		u.args = argsJSON(r.inputs)
		out := r.outputs
		if o := firstOf(field(out, "output"), field(out, "outputs")); o != nil {
			out = o // LangChain's {output}, traceable's {outputs} around a non-object result
		}
		if kw := lcKwargs(out); kw != nil { // a LangChain ToolMessage
			out = contentText(kw["content"])
			u.callID = firstNonEmpty(u.callID, asString(kw["tool_call_id"]))
		}
		u.result = rawJSON(out)
	case r.runType == "chain" || r.runType == "retriever":
		u.role = roleCustom
		u.stepName = r.name
		u.args = rawJSON(r.inputs)
		u.result = rawJSON(r.outputs)
	default: // prompt, parser, embedding: plumbing
		u.role = roleIgnore
	}
	return u
}

// llmMessages reads the messages of a model call: OpenAI's chat format
// (inputs.messages, outputs.choices — wrapOpenAI), LangChain's serialized
// messages (inputs.messages as a list of lists, outputs.generations), or
// plain prompts.
func (r *lsRun) llmMessages(u *unit) {
	msgs := list(field(r.inputs, "messages"))
	if len(msgs) > 0 {
		if inner, ok := msgs[0].([]any); ok { // LangChain: one list per prompt
			msgs = inner
		}
	}
	for _, m := range msgs {
		u.input = append(u.input, lsMessage(m, "user"))
	}
	for _, p := range list(field(r.inputs, "prompts")) {
		u.input = append(u.input, message{role: "user", content: asString(p)})
	}
	var out any
	if cs := list(field(r.outputs, "choices")); len(cs) > 0 {
		out = field(cs[0], "message")
		if fr := asString(field(cs[0], "finish_reason")); fr != "" {
			u.finish = []string{fr}
		}
	} else if gs := list(field(r.outputs, "generations")); len(gs) > 0 {
		g := gs[0]
		if l := list(g); len(l) > 0 {
			g = l[0]
		}
		if m := field(g, "message"); m != nil {
			out = m
		} else {
			out = map[string]any{"role": "assistant", "content": field(g, "text")}
		}
	} else if r.outputs != nil {
		out = r.outputs
		if m := field(out, "output"); m != nil {
			out = m
		}
	}
	if out != nil {
		m := lsMessage(out, "assistant")
		u.output = &m
	}
}

// lsMessage reads one chat message: OpenAI's {role, content, tool_calls,
// tool_call_id}, LangChain's {type, content, tool_calls} or its serialized
// constructor form, or a bare string.
func lsMessage(v any, role string) message {
	if s, ok := v.(string); ok {
		return message{role: role, content: s}
	}
	if kw := lcKwargs(v); kw != nil {
		ids := list(field(v, "id"))
		kind := ""
		if len(ids) > 0 {
			kind = asString(ids[len(ids)-1])
		}
		m := lcMessage(kw, strings.TrimSuffix(kind, "Chunk"))
		return m
	}
	if t := asString(field(v, "type")); t != "" && field(v, "role") == nil {
		return lcMessage(v.(map[string]any), t)
	}
	m := message{role: firstNonEmpty(asString(field(v, "role")), role), content: contentText(field(v, "content")),
		callID: asString(field(v, "tool_call_id")), name: asString(field(v, "name"))}
	for _, c := range list(field(v, "tool_calls")) {
		fn := field(c, "function")
		m.calls = append(m.calls, steptype.ToolCall{ID: asString(field(c, "id")), Name: asString(field(fn, "name")), Arguments: argsJSON(field(fn, "arguments"))})
	}
	if m.role != "tool" {
		m.callID = ""
	}
	return m
}

// lcMessage reads a LangChain message of the given type ("HumanMessage" or
// "human", "AIMessage" or "ai", …) from its fields.
func lcMessage(f map[string]any, kind string) message {
	role := "user"
	switch strings.ToLower(strings.TrimSuffix(kind, "Message")) {
	case "ai", "assistant":
		role = "assistant"
	case "system":
		role = "system"
	case "tool", "function":
		role = "tool"
	}
	m := message{role: role, content: contentText(f["content"]), name: asString(f["name"])}
	if role == "tool" {
		m.callID = asString(f["tool_call_id"])
	}
	for _, c := range list(f["tool_calls"]) {
		m.calls = append(m.calls, steptype.ToolCall{ID: asString(field(c, "id")), Name: asString(field(c, "name")), Arguments: argsJSON(field(c, "args"))})
	}
	return m
}

// usage reads token counts: LangSmith's usage_metadata (on the outputs or
// in the metadata), OpenAI's usage, or LangChain's llm_output.token_usage.
func (r *lsRun) usage(u *unit) {
	num := func(v any, keys ...string) int64 {
		for _, k := range keys {
			if n, ok := field(v, k).(float64); ok {
				return int64(n)
			}
		}
		return 0
	}
	if um := firstOf(field(r.outputs, "usage_metadata"), r.metadata["usage_metadata"]); um != nil {
		u.inTokens, u.outTokens = num(um, "input_tokens"), num(um, "output_tokens")
		u.cached = num(field(um, "input_token_details"), "cache_read")
		u.reasoning = num(field(um, "output_token_details"), "reasoning")
		return
	}
	if us := firstOf(field(r.outputs, "usage"), field(field(r.outputs, "llm_output"), "token_usage")); us != nil {
		u.inTokens, u.outTokens = num(us, "prompt_tokens", "input_tokens"), num(us, "completion_tokens", "output_tokens")
		u.cached = num(field(us, "prompt_tokens_details"), "cached_tokens")
		u.reasoning = num(field(us, "completion_tokens_details"), "reasoning_tokens")
	}
}

func firstOf(vs ...any) any {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}
