package llm_test

import (
	"testing"

	"github.com/stepwise-run/stepwise/llm"
)

func TestDefaultPricesGeminiAndBedrock(t *testing.T) {
	t.Parallel()
	prices := llm.DefaultPrices()
	for model, want := range map[string]float64{
		"gemini:gemini-2.5-flash":                             0.30,
		"gemini:gemini-2.5-flash-lite-preview-09-2025":        0.10,
		"gemini:gemini-2.5-pro":                               1.25,
		"bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0":   3.00,
		"bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0": 1.00,
		"bedrock:eu.amazon.nova-lite-v1:0":                    0.06,
		"bedrock:amazon.nova-micro-v1:0":                      0.035,
		"bedrock:us.meta.llama3-3-70b-instruct-v1:0":          0.72,
		"bedrock:meta.llama4-scout-17b-instruct-v1:0":         0.17,
	} {
		p, ok := prices.Lookup(model)
		if !ok || p.Input != want {
			t.Errorf("%s: %+v %v, want input %v", model, p, ok, want)
		}
	}
	// The geography prefix is dropped for Bedrock ids only.
	if _, ok := prices.Lookup("openai:us.amazon.nova-pro"); ok {
		t.Error("an openai model with a Bedrock-like id has a price")
	}
}

func TestContextWindowsLookup(t *testing.T) {
	w := llm.DefaultContextWindows()
	for model, want := range map[string]int{
		"openai:gpt-4o-mini-2024-07-18":             128_000,
		"gpt-4.1":                                   1_047_576,
		"anthropic:claude-sonnet-4-5":               200_000,
		"bedrock:us.anthropic.claude-sonnet-4-v1:0": 200_000,
		"gemini:gemini-1.5-pro-002":                 2_097_152,
	} {
		if got, ok := w.Lookup(model); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", model, got, ok, want)
		}
	}
	if got, ok := w.Lookup("scripted:demo"); ok {
		t.Errorf("scripted:demo has a window %d", got)
	}
}
