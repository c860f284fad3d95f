package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/internal/sse"
	"github.com/stepwise-run/stepwise/steptype"
)

// stream reads the server-sent events of raw, yields a partial response per
// event that carries a delta, then the final response once message_stop
// arrives. It owns raw.Body.
func (m *Model) stream(ctx, callCtx context.Context, raw *http.Response, yield func(*llm.Response, error) bool) {
	dec := sse.NewDecoder(raw.Body)
	defer dec.Close()

	var acc accumulator
	stopped := false
	for !stopped && dec.Next() {
		if callCtx.Err() != nil {
			break // stop at once; reported below
		}
		ev := dec.Event()
		data := bytes.TrimSpace(ev.Data)
		if ev.Type == "ping" || len(data) == 0 {
			continue
		}
		if ev.Type == "error" {
			yield(nil, streamedError(data))
			return
		}
		var e event
		if err := json.Unmarshal(data, &e); err != nil {
			yield(nil, badChunk(data, err))
			return
		}
		switch e.Type {
		case "error": // an error event without its "event:" line
			yield(nil, streamedError(data))
			return
		case "message_stop":
			stopped = true
			continue
		}
		p, err := acc.add(&e)
		if err != nil {
			yield(nil, badChunk(data, err))
			return
		}
		if p != nil && !yield(p, nil) {
			return
		}
	}
	if err := m.cancelled(ctx, callCtx); err != nil {
		yield(nil, err)
		return
	}
	if !stopped {
		yield(nil, truncated(dec.Err()))
		return
	}
	yield(acc.final(), nil)
}

// badChunk is the error of an event that is not the JSON it should be. It is
// transient: the API does not emit broken JSON for a given request
// deterministically — the usual causes are a proxy mangling or splitting the
// stream, or a server fault under load — so another attempt is likely to
// succeed, and the engine's retry limit bounds the cost if it does not.
func badChunk(data []byte, err error) *llm.Error {
	const max = 200
	if len(data) > max {
		data = append(data[:max:max], "…"...)
	}
	return &llm.Error{
		Class:   steptype.ErrorTransient,
		Code:    "bad_chunk",
		Message: fmt.Sprintf("malformed stream event %q: %v", data, err),
		Err:     err,
	}
}
