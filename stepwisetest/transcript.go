package stepwisetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// Transcript is the normalised text of events: one JSON object per event,
// keys sorted, indented, with what changes from run to run masked or put
// in a canonical order:
//
//   - ids (keys "id" and "…_id") become "<id1>", "<id2>"… in the order they
//     first appear, so that references stay checkable; times ("time",
//     "…_at", "lease_expires") become "<time>"; durations ("…_us") and a step's
//     resource use (CPU time, allocations, overlapping steps) are left
//     out; the lease owner becomes "<owner>";
//   - consecutive step_delta events of one step become one, with the
//     content, the reasoning and each tool call's arguments joined, so that
//     the transcript does not depend on how a stream was chunked;
//   - the results of parallel tool calls, committed in the order the tools
//     finished, are listed in the order of the calls; each keeps the id,
//     parent, sequence number and position of its slot, so that the step
//     chain reads the same.
//
// Each event's position is written as "position".
func Transcript(events []*stepwise.Event) ([]byte, error) {
	events = orderToolResults(events)
	var objs []map[string]any
	for _, ev := range events {
		raw, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("stepwisetest: encode event: %w", err)
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("stepwisetest: decode event: %w", err)
		}
		v["position"] = ev.Position.String()
		objs = append(objs, v)
	}
	objs = mergeDeltas(objs)
	m := masker{ids: map[string]string{}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	for _, v := range objs {
		if err := enc.Encode(m.mask("", v)); err != nil {
			return nil, fmt.Errorf("stepwisetest: encode transcript: %w", err)
		}
	}
	return b.Bytes(), nil
}

// isToolResult reports whether ev commits the result of a tool call.
func isToolResult(ev *stepwise.Event) bool {
	return ev.Type == stepwise.EventStepCompleted && ev.Step != nil && ev.Step.Kind == steptype.KindTool && ev.Step.ToolCallID != ""
}

// orderToolResults lists each block of consecutive tool results of a run
// in the order of the calls, each keeping its slot's id, parent, sequence
// number and position (so the step chain stays intact). The events are
// copied, never changed.
func orderToolResults(events []*stepwise.Event) []*stepwise.Event {
	index := map[string]int{} // tool call id → its index in its assistant step
	out := slices.Clone(events)
	for i := 0; i < len(out); {
		ev := out[i]
		j := i + 1
		if isToolResult(ev) {
			for j < len(out) && isToolResult(out[j]) && out[j].RunID == ev.RunID {
				j++
			}
		}
		if j-i > 1 {
			block := slices.Clone(out[i:j])
			slices.SortStableFunc(block, func(a, b *stepwise.Event) int {
				return index[a.Step.ToolCallID] - index[b.Step.ToolCallID]
			})
			for k, b := range block {
				slot := out[i+k]
				c, s := *b, *b.Step
				c.Position = slot.Position
				s.ID, s.ParentID, s.Sequence = slot.Step.ID, slot.Step.ParentID, slot.Step.Sequence
				c.Step = &s
				out[i+k] = &c
			}
		}
		for _, e := range out[i:j] {
			if e.Step != nil {
				for k, c := range e.Step.ToolCalls {
					index[c.ID] = k
				}
			}
		}
		i = j
	}
	return out
}

// mergeDeltas joins consecutive step_delta events of one step.
func mergeDeltas(objs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, v := range objs {
		if n := len(out); n > 0 && v["type"] == string(stepwise.EventStepDelta) {
			prev := out[n-1]
			if prev["type"] == v["type"] && prev["run_id"] == v["run_id"] && prev["step_name"] == v["step_name"] {
				joinDelta(prev, v)
				continue
			}
		}
		if v["type"] == string(stepwise.EventStepDelta) {
			joinDelta(v, nil) // the tool call becomes a list
		}
		out = append(out, v)
	}
	return out
}

// joinDelta appends the delta of next to the merged delta of into; with
// next nil it turns into's single tool call into a list.
func joinDelta(into, next map[string]any) {
	d, _ := into["delta"].(map[string]any)
	if d == nil {
		d = map[string]any{}
		into["delta"] = d
	}
	if next == nil {
		if tc, ok := d["tool_call"].(map[string]any); ok {
			d["tool_calls"] = []any{tc}
			delete(d, "tool_call")
		}
		return
	}
	nd, _ := next["delta"].(map[string]any)
	for _, k := range []string{"content", "reasoning"} {
		if s, ok := nd[k].(string); ok {
			prev, _ := d[k].(string)
			d[k] = prev + s
		}
	}
	tc, ok := nd["tool_call"].(map[string]any)
	if !ok {
		return
	}
	list, _ := d["tool_calls"].([]any)
	for _, x := range list {
		if c := x.(map[string]any); c["index"] == tc["index"] {
			for _, k := range []string{"id", "name"} {
				if s, ok := tc[k].(string); ok && c[k] == nil {
					c[k] = s
				}
			}
			if s, ok := tc["arguments"].(string); ok {
				prev, _ := c["arguments"].(string)
				c["arguments"] = prev + s
			}
			return
		}
	}
	d["tool_calls"] = append(list, tc)
}
