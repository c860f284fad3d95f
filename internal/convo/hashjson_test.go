package convo

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// randomText mixes plain characters with every kind encoding/json escapes
// (and invalid UTF-8, which it replaces).
func randomText(r *rand.Rand) string {
	parts := []string{"", "a", "hello world", `"`, `\`, "\n", "\r", "\t", "é", "日本", "\x00", "\x1f", "\b", "\f",
		"<", ">", "&", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀", "/", "'", "\x7f"}
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// appendMessageJSON writes exactly what encoding/json writes whenever it
// says it could, and says so for the plain messages of a tool loop.
func TestAppendMessageJSONMatchesEncoder(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 4))
	written := 0
	for range 50000 {
		m := llm.Message{Role: steptype.Role(randomText(r)), Content: randomText(r), Reasoning: randomText(r),
			ToolCallID: randomText(r), ToolName: randomText(r)}
		if r.IntN(3) == 0 {
			m.Role, m.Content, m.ToolCallID, m.ToolName = steptype.RoleAssistant, "", "", ""
		}
		switch r.IntN(3) {
		case 0:
			m.ToolCalls = []steptype.ToolCall{}
		case 1:
			for range 1 + r.IntN(3) {
				m.ToolCalls = append(m.ToolCalls, steptype.ToolCall{ID: randomText(r), Name: randomText(r),
					Arguments: json.RawMessage(randomCanonJSON(r, 0))})
			}
		}
		got, ok := appendMessageJSON(nil, &m)
		if !ok {
			continue
		}
		written++
		want, err := json.Marshal(m)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("message %+v:\n got %s\nwant %s (%v)", m, got, want, err)
		}
	}
	if written < 1000 {
		t.Fatalf("only %d of 50000 random messages written directly", written)
	}
	for _, m := range []llm.Message{
		{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "call_0_1", Name: "echo", Arguments: json.RawMessage(`{"n":1}`)}}},
		{Role: steptype.RoleTool, Content: "1", ToolCallID: "call_0_1", ToolName: "echo"},
		{Role: steptype.RoleUser, Content: "Say \"hi\"\nthen stop.\tThanks é"},
	} {
		if _, ok := appendMessageJSON(nil, &m); !ok {
			t.Errorf("%+v left to encoding/json", m)
		}
	}
}
