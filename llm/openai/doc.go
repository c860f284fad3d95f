// Package openai is an [llm.Model] for any server that speaks the OpenAI
// chat completions API: OpenAI itself, Ollama, vLLM, the llama.cpp server,
// LM Studio, OpenRouter, DeepSeek and others.
//
//	m, err := openai.New(openai.Config{Model: "gpt-4o-mini"}) // OPENAI_API_KEY from the environment
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
// # Pointing at a server
//
// Set Config.BaseURL (or OPENAI_BASE_URL) to the server's API root; local
// servers need no key, so leave APIKey and OPENAI_API_KEY empty:
//
//	OpenAI      https://api.openai.com/v1 (the default)   OPENAI_API_KEY=sk-…
//	Ollama      http://localhost:11434/v1                  Model: "qwen2.5:7b"
//	vLLM        http://localhost:8000/v1                   Model: the served model name
//	llama.cpp   http://localhost:8080/v1                   llama-server --jinja for tools
//	LM Studio   http://localhost:1234/v1                   Model: the loaded model's id
//
// Environment: OPENAI_BASE_URL and OPENAI_API_KEY fill empty Config fields;
// OPENAI_ORG_ID, OPENAI_PROJECT_ID and OPENAI_CUSTOM_HEADERS ("Name: value"
// lines) add headers, which Config.ExtraHeaders override. The wire format
// is spoken directly over net/http, without a vendor SDK.
//
// # What is sent
//
// A streamed chat completion with stream_options.include_usage: the system
// prompt as the first message, then the messages in order (assistant tool
// calls as tool_calls, tool results as "tool" messages with their
// tool_call_id), the tools as function tools with their JSON schema
// unchanged, temperature, and MaxTokens as max_completion_tokens to
// api.openai.com (its reasoning models refuse max_tokens) and as max_tokens
// to every other server. Reasoning from earlier turns is not sent back.
//
// # What comes back
//
// Partial responses carry the content, reasoning and tool-call fragments of
// each chunk. Reasoning is read from the "reasoning_content" field of the
// delta (vLLM, DeepSeek, llama.cpp, LM Studio) or "reasoning" (OpenRouter,
// recent vLLM). ToolCallDelta.Index is the call's position in the final
// ToolCalls, in the order calls start (the server's index order). The final
// response has the whole content and reasoning, the assembled tool calls
// (arguments "{}" when empty; arguments that are not valid JSON arrive as a
// JSON string so that the tool reports the error to the model), usage
// (prompt, completion, cached and reasoning tokens), the finish reason and
// the model id the server reported.
//
// # Errors
//
// One HTTP attempt per call: the engine retries and records each
// attempt. Failures are *llm.Error, classified for it:
//
//   - HTTP errors by [llm.ClassifyHTTP] (429, 408, 409, 5xx transient; other
//     4xx permanent), with the server's message and the Retry-After or
//     retry-after-ms hint; a 429 "insufficient_quota" is permanent;
//   - refused or reset connections and timeouts: transient;
//   - a stream that ends before "data: [DONE]" and before a finish reason:
//     transient, Code "stream_truncated";
//   - a chunk that is not JSON: transient, Code "bad_chunk" (broken JSON comes
//     from proxies and overloaded servers, not from the request);
//   - an error sent inside the stream: by its code, else transient;
//   - Config.Timeout expiring: transient, Code "timeout".
//
// Cancelling the caller's context stops the stream at once and yields
// ctx.Err() itself.
package openai
