package gemini_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
)

// model returns a Model pointed at s.
func model(t testing.TB, s *llmtest.Server, mods ...func(*gemini.Config)) *gemini.Model {
	t.Helper()
	cfg := gemini.Config{Model: "gemini-test", BaseURL: s.URL, APIKey: "AIza-test"}
	for _, mod := range mods {
		mod(&cfg)
	}
	m, err := gemini.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
