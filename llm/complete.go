package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
)

// Complete runs a model call to its final response, for callers that do not
// stream (judges, summarizers, rerankers). A stream that ends without a
// final response is a transient "stream_truncated" error.
func Complete(ctx context.Context, m Model, req *Request) (*Response, error) {
	var final *Response
	for resp, err := range m.Generate(ctx, req) {
		if err != nil {
			return nil, err
		}
		if !resp.Partial {
			final = resp
		}
	}
	if final == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, &Error{Class: steptype.ErrorTransient, Code: "stream_truncated", Message: "model stream ended without a final response"}
	}
	return final, nil
}

// DecodeObject decodes the JSON object in a model answer, which may be
// wrapped in prose or a code fence.
func DecodeObject(text string, v any) error {
	i, j := strings.Index(text, "{"), strings.LastIndex(text, "}")
	if i < 0 || j < i {
		return fmt.Errorf("no JSON object in %.200q", text)
	}
	if err := json.Unmarshal([]byte(text[i:j+1]), v); err != nil {
		return fmt.Errorf("invalid JSON object in %.200q: %w", text, err)
	}
	return nil
}
