package openai

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

var doneMarker = []byte("[DONE]")

// stream reads the server-sent events of raw, yields a partial response per
// chunk that carries a delta, then the final response. It owns raw.Body.
func (m *Model) stream(ctx, callCtx context.Context, raw *http.Response, yield func(*llm.Response, error) bool) {
	dec := sse.NewDecoder(raw.Body)
	defer dec.Close()

	var acc accumulator
	done := false
	for dec.Next() {
		if callCtx.Err() != nil {
			break // stop at once; reported below
		}
		data := bytes.TrimSpace(dec.Event().Data)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, doneMarker) {
			done = true
			break
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			yield(nil, badChunk(data, err))
			return
		}
		if raw := string(bytes.TrimSpace(c.Error)); raw != "" && raw != "null" {
			yield(nil, streamedError(raw))
			return
		}
		if c.Object == "error" { // vLLM's mid-stream error shape
			yield(nil, streamedError(string(data)))
			return
		}
		if p := acc.add(&c); p != nil && !yield(p, nil) {
			return
		}
	}
	if err := m.cancelled(ctx, callCtx); err != nil {
		yield(nil, err)
		return
	}
	if err := dec.Err(); err != nil {
		yield(nil, truncated(err))
		return
	}
	// A server that closes cleanly after the finish chunk but without
	// "[DONE]" lost at most the usage chunk: the message is whole.
	if !done && acc.finish == "" {
		yield(nil, truncated(nil))
		return
	}
	yield(acc.final(), nil)
}

// badChunk is the error of a chunk that is not JSON. It is transient: a
// server does not emit broken JSON for a given request deterministically —
// the usual causes are a proxy or load balancer mangling or splitting the
// stream, or a server bug under load — so another attempt is likely to
// succeed, and the engine's retry limit bounds the cost if it does not.
func badChunk(data []byte, err error) *llm.Error {
	const max = 200
	if len(data) > max {
		data = append(data[:max:max], "…"...)
	}
	return &llm.Error{
		Class:   steptype.ErrorTransient,
		Code:    "bad_chunk",
		Message: fmt.Sprintf("malformed stream chunk %q: %v", data, err),
		Err:     err,
	}
}
