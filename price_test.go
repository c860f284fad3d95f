package stepwise_test

import (
	"testing"

	"github.com/stepwise-run/stepwise"
)

func TestDefaultPricesGeminiAndBedrock(t *testing.T) {
	t.Parallel()
	prices := stepwise.DefaultPrices()
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
