package llmtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
)

// Fixture adapts one provider to the suite: how to build its model against
// a server, and how its wire format writes a turn, an error and a broken
// frame.
type Fixture interface {
	// Path is the URL path the model posts to, e.g. "/v1/chat/completions";
	// the test server answers 404 to any other.
	Path() string
	// ContentType is the Content-Type of a streamed response.
	ContentType() string
	// Capabilities declares what the provider's wire format carries.
	Capabilities() Capabilities
	// New returns the model under test, pointed at baseURL (the test
	// server's root, no trailing slash) and configured with o.
	New(t testing.TB, baseURL string, o Options) llm.Model
	// Stream encodes turn as the frames of a streamed response: one frame
	// per delta of the turn, in order (reasoning, text, then the calls,
	// whose argument fragments may interleave), followed by the frames
	// that end it.
	Stream(turn Turn) Stream
	// StreamError is a frame reporting, in the middle of a stream, that the
	// server is overloaded, with message: a transient "server_error".
	StreamError(message string) []byte
	// Malformed is a frame whose payload cannot be decoded (e.g. JSON cut
	// in the middle of a string): a transient "bad_chunk".
	Malformed() []byte
	// ErrorBody is the body of an HTTP error response with status and
	// message, as the provider's API writes it.
	ErrorBody(status int, message string) []byte
}

// Capabilities declares what a provider's wire format carries; the suite
// checks what is declared and states what it leaves out.
type Capabilities struct {
	// Reasoning: the stream carries reasoning (thinking) deltas.
	Reasoning bool
	// CallIDs: the wire carries tool-call ids. Without them the suite
	// checks that the model gives each call a distinct, non-empty id.
	CallIDs bool
	// ModelID: the stream reports the id of the model that answered
	// (Turn.Model), which the final response must carry.
	ModelID bool
}

// Options configure the model a [Fixture] builds.
type Options struct {
	// HTTPClient sends the requests; nil means the adapter's default.
	HTTPClient *http.Client
	// Timeout is the adapter's per-call timeout; 0 means none.
	Timeout time.Duration
}

// Turn is one scripted assistant turn.
type Turn struct {
	// Model is the model id the server reports.
	Model string
	// Reasoning and Text are the deltas, in order.
	Reasoning []string
	Text      []string
	// Calls are the tool calls, in order.
	Calls []Call
	// Usage is what the server reports, in the engine's terms: InputTokens
	// counts cached tokens too.
	Usage llm.Usage
}

// Call is one tool call of a [Turn].
type Call struct {
	ID   string
	Name string
	// Args are the fragments of the JSON arguments; none means no
	// arguments.
	Args []string
}

// Arguments returns the joined fragments, "{}" when there are none.
func (c Call) Arguments() string {
	if len(c.Args) == 0 {
		return "{}"
	}
	return strings.Join(c.Args, "")
}

// Stream is an encoded response.
type Stream struct {
	Frames [][]byte
	// End is how many of the last frames end the turn (finish reason,
	// usage, end marker): a stream cut before them is truncated.
	End int
}

// Head returns the frames before those that end the turn.
func (s Stream) Head() [][]byte {
	return s.Frames[:len(s.Frames)-s.End]
}
