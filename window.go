package stepwise

import "github.com/stepwise-run/stepwise/llm"

// DefaultContextWindow is the context window, in tokens, assumed for a
// model the window table does not know (a local model behind an
// OpenAI-compatible server, a scripted model): small enough for most
// models served today, so that a long session is trimmed rather than
// refused by the provider. Set Config.ContextWindows or the agent's
// Context.TokenBudget for a model that holds more.
const DefaultContextWindow = 32_768

// NoTokenBudget, as ContextPolicy.TokenBudget, sends the model every
// message of the session, whatever its context window.
const NoTokenBudget = -1

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

// budgetOf is the token budget of agent a's context: its
// Context.TokenBudget when set, none for NoTokenBudget or an agent without
// a model, and otherwise three quarters of its model's context window (the
// rest leaves room for the instructions, the tool definitions, the answer
// and the error of the four-characters-per-token estimate).
func budgetOf(a *Agent, windows ContextWindows) int {
	switch b := a.Context.TokenBudget; {
	case b > 0:
		return b
	case b < 0 || a.Model == nil:
		return 0
	}
	return windowOf(a.Model, windows) / 4 * 3
}

// windowOf is the context window of model m: what the model says when it
// knows (llm.ContextWindower), else the table's entry for its name, else
// DefaultContextWindow.
func windowOf(m llm.Model, windows ContextWindows) int {
	if w, ok := m.(llm.ContextWindower); ok {
		if n := w.ContextWindow(); n > 0 {
			return n
		}
	}
	if n, ok := windows.Lookup(m.Name()); ok && n > 0 {
		return n
	}
	return DefaultContextWindow
}
