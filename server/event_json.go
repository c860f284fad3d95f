package server

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/jsonstr"
)

// eventEncoder appends the JSON of an SSE event (the shape of wire.EventData).
// It is written by hand because it runs once per event per subscriber: no
// reflection, and the step is encoded once, not re-validated. A stream
// keeps one for its events, and with it what they share from one event to
// the next: the encoded session and run ids (a stream's events mostly come
// from one run) and the time's date, clock to the second and zone (many
// events a second). The zero value is ready to use.
type eventEncoder struct {
	sessionID, runID string
	ids              []byte // `,"session_id":…,"run_id":…`
	sec              int64  // the second of date, with loc
	loc              *time.Location
	date, zone       []byte // "2006-01-02T15:04:05", "Z07:00"
}

func (e *eventEncoder) append(b []byte, ev *stepwise.Event) ([]byte, error) {
	b = append(b, `{"id":"`...)
	b = strconv.AppendInt(b, ev.Position.Seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, ev.Position.Idx, 10)
	b = append(b, `","type":`...)
	b = jsonstr.Append(b, string(ev.Type))
	if e.ids == nil || ev.SessionID != e.sessionID || ev.RunID != e.runID {
		e.sessionID, e.runID = ev.SessionID, ev.RunID
		e.ids = append(e.ids[:0], `,"session_id":`...)
		e.ids = jsonstr.Append(e.ids, ev.SessionID)
		e.ids = append(e.ids, `,"run_id":`...)
		e.ids = jsonstr.Append(e.ids, ev.RunID)
	}
	b = append(b, e.ids...)
	b = append(b, `,"time":"`...)
	b = e.appendTime(b, ev.Time)
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

// appendTime appends t as time.RFC3339Nano does: the date, clock and zone
// formatted once per second (and location), the fraction by hand.
func (e *eventEncoder) appendTime(b []byte, t time.Time) []byte {
	sec, ns, loc := t.Unix(), t.Nanosecond(), t.Location()
	if e.date == nil || sec != e.sec || loc != e.loc {
		y := t.Year()
		if y < 0 || y > 9999 {
			return t.AppendFormat(b, time.RFC3339Nano) // its own rules
		}
		e.sec, e.loc = sec, loc
		e.date = t.AppendFormat(e.date[:0], "2006-01-02T15:04:05")
		e.zone = t.AppendFormat(e.zone[:0], "Z07:00")
	}
	b = append(b, e.date...)
	if ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, e.zone...)
}
