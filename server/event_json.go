package server

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/jsonstr"
)

// appendEvent appends the JSON of an SSE event (the shape of eventJSON) to
// b. It is written by hand because it runs once per event per subscriber:
// no reflection, and the step is encoded once, not re-validated.
func appendEvent(b []byte, ev *stepwise.Event) ([]byte, error) {
	b = append(b, `{"id":"`...)
	b = strconv.AppendInt(b, ev.Position.Seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, ev.Position.Idx, 10)
	b = append(b, `","type":`...)
	b = jsonstr.Append(b, string(ev.Type))
	b = append(b, `,"session_id":`...)
	b = jsonstr.Append(b, ev.SessionID)
	b = append(b, `,"run_id":`...)
	b = jsonstr.Append(b, ev.RunID)
	b = append(b, `,"time":"`...)
	b = ev.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if ev.StepName != "" {
		b = append(b, `,"step_name":`...)
		b = jsonstr.Append(b, ev.StepName)
	}
	if d := ev.Delta; d != nil {
		b = append(b, `,"delta":{`...)
		sep := ""
		if d.Content != "" {
			b = append(b, `"content":`...)
			b = jsonstr.Append(b, d.Content)
			sep = ","
		}
		if d.Reasoning != "" {
			b = append(b, sep+`"reasoning":`...)
			b = jsonstr.Append(b, d.Reasoning)
			sep = ","
		}
		if tc := d.ToolCall; tc != nil {
			b = append(b, sep+`"tool_call":{"index":`...)
			b = strconv.AppendInt(b, int64(tc.Index), 10)
			if tc.ID != "" {
				b = append(b, `,"id":`...)
				b = jsonstr.Append(b, tc.ID)
			}
			if tc.Name != "" {
				b = append(b, `,"name":`...)
				b = jsonstr.Append(b, tc.Name)
			}
			if tc.Arguments != "" {
				b = append(b, `,"arguments":`...)
				b = jsonstr.Append(b, tc.Arguments)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if ev.Step != nil {
		var err error
		if b, err = ev.Step.AppendJSON(append(b, `,"step":`...)); err != nil {
			return b, err
		}
	}
	if ev.Run != nil {
		run, err := json.Marshal(ev.Run)
		if err != nil {
			return b, err
		}
		b = append(append(b, `,"run":`...), run...)
	}
	// Progress, yields and resets are rare next to deltas: encoding/json.
	for _, f := range [...]struct {
		name string
		v    any
		set  bool
	}{{`,"progress":`, ev.Progress, ev.Progress != nil}, {`,"yield":`, ev.Yield, ev.Yield != nil}, {`,"reset":`, ev.Reset, ev.Reset != nil}} {
		if !f.set {
			continue
		}
		raw, err := json.Marshal(f.v)
		if err != nil {
			return b, err
		}
		b = append(append(b, f.name...), raw...)
	}
	return append(b, '}'), nil
}
