// Package anthropic is an [llm.Model] over the Anthropic Messages API.
//
//	m, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5"}) // ANTHROPIC_API_KEY from the environment
//	for r, err := range m.Generate(ctx, &llm.Request{
//		System:   "Be brief.",
//		Messages: []llm.Message{{Role: steptype.RoleUser, Content: "Hi"}},
//	}) {
//		if err != nil {
//			return err
//		}
//		if r.Partial {
//			fmt.Print(r.Content) // a delta
//		}
//	}
//
// Environment: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL fill empty Config
// fields (point the base URL at a proxy or gateway that speaks the Messages
// API). Without any key, ANTHROPIC_AUTH_TOKEN is sent as a bearer token.
// The wire format is spoken directly over net/http, without a vendor SDK.
//
// # What is sent
//
// A streamed message: the system prompt (with any system messages of the
// context appended, since the API has no system turns), then alternating
// turns. Consecutive messages of one side merge into one turn, so the
// results of parallel tool calls go back together as tool_result blocks of
// one user message; assistant tool calls are tool_use blocks. Tools carry
// their JSON schema unchanged. max_tokens is Request.MaxTokens, else
// Config.MaxTokens (4096). Config.ThinkingBudget turns on extended thinking;
// Config.PromptCaching sets the top-level cache_control.
//
// Reasoning from earlier turns is not sent back: a thinking block must carry
// the signature the API issued, which llm.Message has no field for. Empty
// text is left out, since the API refuses empty text blocks.
//
// # What comes back
//
// Partial responses carry the text_delta, thinking_delta and
// input_json_delta of each event; a tool_use block's start yields a
// ToolCallDelta with its id and name. ToolCallDelta.Index is the call's
// position in the final ToolCalls (tool_use blocks in order), not the
// content block index. The final response has the whole text and thinking,
// the tool calls (input "{}" when empty), the stop reason, the model and the
// usage: InputTokens counts every prompt token (input_tokens +
// cache_read_input_tokens + cache_creation_input_tokens, like OpenAI's
// prompt_tokens), CachedTokens the cache reads, ReasoningTokens the thinking
// tokens when the API reports them.
//
// # Errors
//
// One HTTP attempt per call: the engine retries and records each
// attempt. Failures are *llm.Error, classified for it:
//
//   - HTTP errors by [llm.ClassifyHTTP]: 429, 529 (overloaded) and 5xx
//     transient, 400, 401, 403 and other 4xx permanent, with the API's
//     message and the Retry-After hint;
//   - error events inside the stream by their type (overloaded_error,
//     api_error, rate_limit_error transient; invalid_request_error and the
//     like permanent);
//   - refused or reset connections and timeouts: transient;
//   - a stream that ends before message_stop: transient, Code
//     "stream_truncated";
//   - an event that is not JSON: transient, Code "bad_chunk" (broken JSON
//     comes from proxies and overloaded servers, not from the request);
//   - Config.Timeout expiring: transient, Code "timeout".
//
// Cancelling the caller's context stops the stream at once and yields
// ctx.Err() itself.
package anthropic
