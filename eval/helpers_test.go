package eval_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
)

func run(t *testing.T, e *stepwise.Engine, agent, input string) *stepwise.Run {
	t.Helper()
	r, err := e.Wait(t.Context(), e.Run(t.Context(), stepwise.StartParams{Agent: agent, Input: input}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}
