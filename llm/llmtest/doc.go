// Package llmtest is the conformance suite every provider adapter of
// [llm.Model] passes, and the test kit its tests are written with: a local
// HTTP server that records requests, handlers that stream frames or answer
// errors, and a drained Generate sequence to assert on.
//
// # Running the suite for an adapter
//
// An adapter's test package implements [Fixture] — how to build the model
// against a base URL and how to encode a scripted [Turn] in the provider's
// wire format — and calls [Run] from a plain test:
//
//	type fixture struct{}
//
//	func (fixture) Path() string        { return "/v1/chat/completions" }
//	func (fixture) ContentType() string { return "text/event-stream" }
//	func (fixture) Capabilities() llmtest.Capabilities {
//		return llmtest.Capabilities{Reasoning: true, CallIDs: true, ModelID: true}
//	}
//	func (fixture) New(t testing.TB, baseURL string, o llmtest.Options) llm.Model {
//		m, err := openai.New(openai.Config{Model: "m", BaseURL: baseURL + "/v1",
//			HTTPClient: o.HTTPClient, Timeout: o.Timeout})
//		if err != nil {
//			t.Fatal(err)
//		}
//		return m
//	}
//	func (fixture) Stream(turn llmtest.Turn) llmtest.Stream { … }  // the turn as SSE events
//	func (fixture) StreamError(msg string) []byte            { … }  // an overloaded error event
//	func (fixture) Malformed() []byte                         { … }  // an event that is not JSON
//	func (fixture) ErrorBody(status int, msg string) []byte   { … }  // the API's error JSON
//
//	func TestConformance(t *testing.T) { llmtest.Run(t, fixture{}) }
//
// Run covers streamed text and reasoning (partials carry only deltas and
// join to the final text), a tool call whose arguments arrive in fragments,
// parallel tool calls, a call without arguments ("{}"), usage and the model
// id (where the wire carries it), HTTP errors with their class, code and Retry-After, an error inside
// the stream, a stream cut before its end, a dropped connection, a
// malformed frame, a refused connection, cancellation, the per-call
// timeout, and that breaking out of the loop releases the connection. Each
// case is a subtest named after what it checks; what a provider cannot do
// is declared in [Capabilities], never skipped silently.
//
// Frames are written and flushed one by one, the way a real server
// streams, so a frame may be an SSE event or a binary event-stream
// message: the suite never parses them.
//
// # The kit
//
// [NewServer] starts a recording server on loopback; [SSEFile], [SSEBytes],
// [Frames] and [JSONError] are handlers for it; [Drain] runs a Generate
// sequence to its end and [AsError] asserts its error is an *llm.Error.
// Adapter tests that check their own wire format (request bodies, recorded
// streams in testdata/) use the same kit.
package llmtest
