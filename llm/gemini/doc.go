// Package gemini is an [llm.Model] over the Google Gemini API
// (generateContent and streamGenerateContent).
//
//	m, err := gemini.New(gemini.Config{Model: "gemini-2.5-flash"}) // GEMINI_API_KEY from the environment
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
// Environment: GOOGLE_API_KEY, else GEMINI_API_KEY, fills an empty
// Config.APIKey (sent as the x-goog-api-key header); GEMINI_BASE_URL an
// empty Config.BaseURL. The wire format is spoken directly over net/http,
// without a vendor SDK.
//
// # Vertex AI
//
// With Config.Vertex (or GOOGLE_GENAI_USE_VERTEXAI=true, as Google's SDKs
// read it) the same wire format goes to Vertex AI:
// https://LOCATION-aiplatform.googleapis.com/v1/projects/PROJECT/locations/LOCATION/publishers/google/models/MODEL
// (GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION, default location
// "global"), with an OAuth access token from Config.TokenSource, by default
// [DefaultTokenSource]: the service account key or authorized user of
// GOOGLE_APPLICATION_CREDENTIALS or of gcloud's application default
// credentials, else the metadata server on Google Cloud. Without a
// project, Vertex AI's express mode is called with the API key.
//
// # What is sent
//
// POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse (or
// :generateContent with Config.Unary): the system prompt and any system
// messages of the context as systemInstruction, then user and model turns.
// Consecutive messages of one side merge into one turn, so the responses
// to parallel function calls go back together as functionResponse parts of
// one user turn. A tool result that is a JSON object is the response as it
// is; any other text is sent as {"output": text}. Tools are
// functionDeclarations with their JSON Schema unchanged
// (parametersJsonSchema). Request.MaxTokens, else Config.MaxTokens, is
// maxOutputTokens; Config.IncludeThoughts and Config.ThinkingBudget set
// thinkingConfig.
//
// The thought signature of each function call the Model received goes back
// with the call on the next request of the loop, as Gemini 3 requires; the
// Model keeps the last 1024 in memory, since steps do not record them. A
// call it did not receive (after a restart, or from another process) carries
// the placeholder signature Google documents for history from elsewhere.
//
// # What comes back
//
// Partial responses carry the text and thought deltas of each chunk, and
// each function call whole as one ToolCallDelta (the API does not split
// them). A call without an id (the API usually sends none) gets a random
// "call_…" id. The final response has the whole text and thoughts, the
// calls, the finish reason (STOP, MAX_TOKENS, SAFETY, …), the modelVersion
// and the usage: InputTokens is promptTokenCount (cached tokens included)
// plus toolUsePromptTokenCount, OutputTokens candidatesTokenCount plus
// thoughtsTokenCount, CachedTokens cachedContentTokenCount,
// ReasoningTokens thoughtsTokenCount.
//
// # Errors
//
// One HTTP attempt per call: the engine retries and records each attempt.
// Failures are *llm.Error, classified for it, with an *APIError (the
// google.rpc status) as the cause:
//
//   - HTTP errors by [llm.ClassifyHTTP]: 429 RESOURCE_EXHAUSTED and 5xx
//     transient, 400 INVALID_ARGUMENT, 401, 403 and 404 permanent; the
//     delay is Retry-After, else the status's RetryInfo retryDelay;
//   - a status inside the stream by its code, the same way;
//   - a prompt blocked by promptFeedback: permanent, Code "blocked";
//   - a turn that ends with finish reason MALFORMED_FUNCTION_CALL and no
//     call: transient, Code "malformed_function_call" (another attempt
//     usually writes the call);
//   - refused or reset connections and timeouts: transient;
//   - a stream that ends before a chunk with a finish reason: transient,
//     Code "stream_truncated";
//   - a chunk that is not JSON: transient, Code "bad_chunk";
//   - Config.Timeout expiring: transient, Code "timeout".
//
// Cancelling the caller's context stops the stream at once and yields
// ctx.Err() itself.
package gemini
