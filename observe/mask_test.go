package observe_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestMaskerText(t *testing.T) {
	t.Parallel()
	m := observe.NewMasker(observe.MaskConfig{})
	for in, want := range map[string]string{
		"write to ann.lee+x@mail.example.co.uk now":      "write to [email] now",
		"card 4111 1111 1111 1111 exp 12/30":             "card [card] exp 12/30",
		"card 4111-1111-1111-1111":                       "card [card]",
		"card 5500005555555559":                          "card [card]",
		"order 4111 1111 1111 1112 (fails Luhn)":         "order 4111 1111 1111 1112 (fails Luhn)",
		"timestamp 1700000000000 and id 123456789012345": "timestamp 1700000000000 and id 123456789012345",
		"key sk-proj-abcdefghijklmnop1234 ok":            "key [key] ok",
		"aws AKIAIOSFODNN7EXAMPLE":                       "aws [key]",
		"Authorization: Bearer abc.def.ghijklmnop":       "Authorization: Bearer [key]",
		"nothing to see":                                 "nothing to see",
	} {
		if got := m.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMaskerJSONStaysValid(t *testing.T) {
	t.Parallel()
	m := observe.NewMasker(observe.MaskConfig{})
	in := json.RawMessage(`{"to":"bob@example.com","n":4111111111111111,"list":["x","4111111111111111"],"nested":{"k":"<b>"}}`)
	got := m.JSON(in)
	if !json.Valid(got) {
		t.Fatalf("masked JSON is invalid: %s", got)
	}
	want := `{"list":["x","[card]"],"n":4111111111111111,"nested":{"k":"<b>"},"to":"[email]"}`
	if string(got) != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	clean := json.RawMessage(`{"b": 1,   "a": "x"}`)
	if got := m.JSON(clean); string(got) != string(clean) {
		t.Errorf("unchanged JSON was re-encoded: %s", got)
	}
}

func TestMaskerStep(t *testing.T) {
	t.Parallel()
	s := &stepwise.Step{
		Content: "mail bob@example.com", Reasoning: "bob@example.com again",
		Inputs: json.RawMessage(`{"email":"bob@example.com"}`), Outputs: json.RawMessage(`"bob@example.com"`),
		Error:       &steptype.StepError{Message: "bad bob@example.com"},
		Annotations: steptype.Annotations{State: "inbox of bob@example.com"},
		ToolCalls:   []steptype.ToolCall{{ID: "c", Name: "send", Arguments: json.RawMessage(`{"to":"bob@example.com"}`)}},
		StatePatch:  json.RawMessage(`{"user":"bob@example.com"}`),
	}
	observe.NewMasker(observe.MaskConfig{}).Step(s)
	b, _ := json.Marshal(s)
	for _, want := range []string{`"content":"mail [email]"`, `"reasoning":"[email] again"`, `"inputs":{"email":"[email]"}`,
		`"outputs":"[email]"`, `"message":"bad [email]"`, `"state":"inbox of [email]"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("masked step lacks %s: %s", want, b)
		}
	}
	if string(s.ToolCalls[0].Arguments) != `{"to":"bob@example.com"}` || string(s.StatePatch) != `{"user":"bob@example.com"}` {
		t.Errorf("tool arguments or state masked by default: %s %s", s.ToolCalls[0].Arguments, s.StatePatch)
	}
	observe.NewMasker(observe.MaskConfig{ToolArguments: true}).Step(s)
	if string(s.ToolCalls[0].Arguments) != `{"to":"[email]"}` {
		t.Errorf("ToolArguments: arguments = %s", s.ToolCalls[0].Arguments)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	h := observe.RedactHeaders(http.Header{
		"Authorization": {"Bearer sk-live"}, "X-Api-Key": {"abc"}, "Content-Type": {"application/json"},
		"X-Note": {"token sk-ant-api03-abcdefghijklmnopqrstuv"},
	})
	if h.Get("Authorization") != observe.Redacted || h.Get("X-Api-Key") != observe.Redacted ||
		h.Get("Content-Type") != "application/json" || h.Get("X-Note") != "token [REDACTED]" {
		t.Errorf("RedactHeaders = %v", h)
	}
	got := string(observe.RedactJSON([]byte(`{"api_key":"k1","max_tokens":5,"input_tokens":"7","client_secret":"s","msg":"use Bearer abcdefghijk"}`)))
	want := `{"api_key":"[REDACTED]","client_secret":"[REDACTED]","input_tokens":"7","max_tokens":5,"msg":"use Bearer [REDACTED]"}`
	if got != want {
		t.Errorf("RedactJSON = %s\nwant %s", got, want)
	}
	if u := observe.RedactURL("https://user:pw@api.example.com/v1?key=AIza123&q=cats"); u != "https://%5BREDACTED%5D@api.example.com/v1?key=%5BREDACTED%5D&q=cats" {
		t.Errorf("RedactURL = %s", u)
	}
}
