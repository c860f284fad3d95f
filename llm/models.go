package llm

import "strings"

// Price is the cost of a model in USD per million tokens.
type Price struct {
	Input       float64 `json:"input" yaml:"input"`
	Output      float64 `json:"output" yaml:"output"`
	CachedInput float64 `json:"cached_input" yaml:"cached_input"`
}

// PriceTable maps model strings ("openai:gpt-4o-mini", or a bare model id)
// to prices.
type PriceTable map[string]Price

// DefaultPrices returns list prices of well-known models (USD per million
// tokens, as published by the providers; override them in config).
func DefaultPrices() PriceTable {
	return PriceTable{
		"gpt-4o":            {Input: 2.50, Output: 10.00, CachedInput: 1.25},
		"gpt-4o-mini":       {Input: 0.15, Output: 0.60, CachedInput: 0.075},
		"gpt-4.1":           {Input: 2.00, Output: 8.00, CachedInput: 0.50},
		"gpt-4.1-mini":      {Input: 0.40, Output: 1.60, CachedInput: 0.10},
		"gpt-4.1-nano":      {Input: 0.10, Output: 0.40, CachedInput: 0.025},
		"o3":                {Input: 2.00, Output: 8.00, CachedInput: 0.50},
		"o4-mini":           {Input: 1.10, Output: 4.40, CachedInput: 0.275},
		"claude-opus-4":     {Input: 15.00, Output: 75.00, CachedInput: 1.50},
		"claude-sonnet-4":   {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		"claude-3-5-haiku":  {Input: 0.80, Output: 4.00, CachedInput: 0.08},
		"claude-haiku-4-5":  {Input: 1.00, Output: 5.00, CachedInput: 0.10},
		"claude-sonnet-4-5": {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		// Google Gemini (paid tier, prompts up to 200k tokens).
		"gemini-3-pro":          {Input: 2.00, Output: 12.00, CachedInput: 0.20},
		"gemini-2.5-pro":        {Input: 1.25, Output: 10.00, CachedInput: 0.125},
		"gemini-2.5-flash":      {Input: 0.30, Output: 2.50, CachedInput: 0.03},
		"gemini-2.5-flash-lite": {Input: 0.10, Output: 0.40, CachedInput: 0.01},
		"gemini-2.0-flash":      {Input: 0.10, Output: 0.40, CachedInput: 0.025},
		"gemini-2.0-flash-lite": {Input: 0.075, Output: 0.30, CachedInput: 0.075},
		"gemini-1.5-pro":        {Input: 1.25, Output: 5.00, CachedInput: 0.3125},
		"gemini-1.5-flash":      {Input: 0.075, Output: 0.30, CachedInput: 0.01875},
		// Amazon Bedrock on-demand, by model id (a cross-region inference
		// profile's "us.", "eu.", "apac." or "global." prefix is ignored).
		"anthropic.claude-opus-4":     {Input: 15.00, Output: 75.00, CachedInput: 1.50},
		"anthropic.claude-sonnet-4":   {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		"anthropic.claude-sonnet-4-5": {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		"anthropic.claude-haiku-4-5":  {Input: 1.00, Output: 5.00, CachedInput: 0.10},
		"anthropic.claude-3-7-sonnet": {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		"anthropic.claude-3-5-sonnet": {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		"anthropic.claude-3-5-haiku":  {Input: 0.80, Output: 4.00, CachedInput: 0.08},
		"anthropic.claude-3-haiku":    {Input: 0.25, Output: 1.25, CachedInput: 0.25},
		"amazon.nova-premier":         {Input: 2.50, Output: 12.50, CachedInput: 0.625},
		"amazon.nova-pro":             {Input: 0.80, Output: 3.20, CachedInput: 0.20},
		"amazon.nova-lite":            {Input: 0.06, Output: 0.24, CachedInput: 0.015},
		"amazon.nova-micro":           {Input: 0.035, Output: 0.14, CachedInput: 0.00875},
		"meta.llama4-maverick-17b":    {Input: 0.24, Output: 0.97, CachedInput: 0.24},
		"meta.llama4-scout-17b":       {Input: 0.17, Output: 0.66, CachedInput: 0.17},
		"meta.llama3-3-70b":           {Input: 0.72, Output: 0.72, CachedInput: 0.72},
		"meta.llama3-2-90b":           {Input: 0.72, Output: 0.72, CachedInput: 0.72},
		"meta.llama3-2-11b":           {Input: 0.16, Output: 0.16, CachedInput: 0.16},
		"meta.llama3-2-3b":            {Input: 0.15, Output: 0.15, CachedInput: 0.15},
		"meta.llama3-2-1b":            {Input: 0.10, Output: 0.10, CachedInput: 0.10},
		"meta.llama3-1-405b":          {Input: 2.40, Output: 2.40, CachedInput: 2.40},
		"meta.llama3-1-70b":           {Input: 0.72, Output: 0.72, CachedInput: 0.72},
		"meta.llama3-1-8b":            {Input: 0.22, Output: 0.22, CachedInput: 0.22},
		// The scripted model has a nominal price so that cost paths are exercised.
		"scripted": {Input: 1.00, Output: 2.00, CachedInput: 0.10},
	}
}

// Lookup finds the price of a model: exact model string first, then the
// model id without its "provider:" prefix, then the longest known prefix of
// the id (so "gpt-4o-mini-2024-07-18" matches "gpt-4o-mini"), then the
// provider name alone. For "bedrock:" models the id's cross-region
// inference profile prefix ("us.", "eu.", "apac.", "global.") is dropped
// first, so "bedrock:us.amazon.nova-pro-v1:0" costs what
// "amazon.nova-pro" does.
func (t PriceTable) Lookup(model string) (Price, bool) { return lookupModel(t, model) }

// lookupModel finds model in a table keyed by model strings (see
// PriceTable.Lookup).
func lookupModel[V any](t map[string]V, model string) (V, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	provider, id, found := strings.Cut(model, ":")
	if !found {
		id, provider = model, ""
	}
	if provider == "bedrock" {
		id = bedrockModelID(id)
	}
	if p, ok := t[id]; ok {
		return p, true
	}
	var best V
	bestLen := 0
	for k, p := range t {
		if strings.HasPrefix(id, k) && len(k) > bestLen {
			best, bestLen = p, len(k)
		}
	}
	if bestLen > 0 {
		return best, true
	}
	if p, ok := t[provider]; ok && provider != "" {
		return p, true
	}
	var zero V
	return zero, false
}

// Cost computes the USD cost of a call. Cached input tokens are part of
// inputTokens and billed at the cached rate.
func (p Price) Cost(inputTokens, outputTokens, cachedTokens int64) float64 {
	uncached := inputTokens - cachedTokens
	if uncached < 0 {
		uncached = 0
	}
	return (float64(uncached)*p.Input + float64(cachedTokens)*p.CachedInput + float64(outputTokens)*p.Output) / 1e6
}

// bedrockModelID returns a Bedrock model id without the geography prefix
// of a cross-region inference profile ("us.anthropic.claude-…" →
// "anthropic.claude-…").
func bedrockModelID(id string) string {
	for _, geo := range []string{"us.", "us-gov.", "eu.", "apac.", "jp.", "au.", "ca.", "global."} {
		if rest, ok := strings.CutPrefix(id, geo); ok {
			return rest
		}
	}
	return id
}

// DefaultContextWindow is the context window, in tokens, assumed for a
// model the window table does not know (a local model behind an
// OpenAI-compatible server, a scripted model): small enough for most
// models served today, so that a long session is trimmed rather than
// refused by the provider. Set the engine's Config.ContextWindows or the agent's
// Context.TokenBudget for a model that holds more.
const DefaultContextWindow = 32_768

// ContextWindows maps model strings ("openai:gpt-4o", or a bare model id)
// to the size of their context window in tokens. Lookup follows the rules
// of PriceTable.Lookup.
type ContextWindows map[string]int

// DefaultContextWindows returns the context windows of well-known models,
// as published by the providers.
func DefaultContextWindows() ContextWindows {
	return ContextWindows{
		"gpt-4o":         128_000,
		"gpt-4o-mini":    128_000,
		"gpt-4.1":        1_047_576,
		"gpt-4.1-mini":   1_047_576,
		"gpt-4.1-nano":   1_047_576,
		"gpt-5":          400_000,
		"o1":             200_000,
		"o3":             200_000,
		"o4-mini":        200_000,
		"gpt-4-turbo":    128_000,
		"gpt-3.5":        16_385,
		"claude":         200_000, // every Claude model since Claude 3
		"gemini-1.5":     1_048_576,
		"gemini-1.5-pro": 2_097_152,
		"gemini-2.0":     1_048_576,
		"gemini-2.5":     1_048_576,
		"gemini-3":       1_048_576,
		// Amazon Bedrock, by model id (a cross-region inference profile's
		// prefix is ignored, as for prices).
		"anthropic.claude":    200_000,
		"amazon.nova-premier": 1_000_000,
		"amazon.nova-pro":     300_000,
		"amazon.nova-lite":    300_000,
		"amazon.nova-micro":   128_000,
		"meta.llama4":         1_000_000,
		"meta.llama3-3":       128_000,
		"meta.llama3-2":       128_000,
		"meta.llama3-1":       128_000,
	}
}

// Lookup finds the context window of a model: the exact model string,
// then the id without its "provider:" prefix, then the longest known
// prefix of the id (see PriceTable.Lookup).
func (t ContextWindows) Lookup(model string) (int, bool) { return lookupModel(t, model) }

// Of is the context window of model m: what the model says when it knows
// (ContextWindower), else the table's entry for its name, else
// DefaultContextWindow.
func (t ContextWindows) Of(m Model) int {
	if w, ok := m.(ContextWindower); ok {
		if n := w.ContextWindow(); n > 0 {
			return n
		}
	}
	if n, ok := t.Lookup(m.Name()); ok && n > 0 {
		return n
	}
	return DefaultContextWindow
}
