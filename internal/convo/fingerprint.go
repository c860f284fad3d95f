package convo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/stepwise-run/stepwise/llm"
)

// Fingerprinter computes the fingerprints of the model requests of one
// execution, keeping what they share from one request to the next. The
// zero value is ready.
type Fingerprinter struct {
	toolsHash   []byte // fingerprint of the agent's tool definitions
	prefix      []byte // the encoded model, system, tools hash, temperature, max tokens
	model       string
	system      string
	temperature *float64
	maxTokens   int
	buf         []byte
}

// ToolsHash is the fingerprint of the tool definitions of the first
// request (nil before it).
func (fp *Fingerprinter) ToolsHash() []byte { return fp.toolsHash }

// Request is the canonical hash of a model request: model name,
// system prompt, tools, parameters and the messages — the latter through the
// conversation's hash chain (canonical JSON of every message, chained), the
// trim point and the summary, so it costs O(1) in the history length.
func (fp *Fingerprinter) Request(c *Conversation, model string, req *llm.Request) string {
	if fp.toolsHash == nil {
		th := sha256.New()
		enc := json.NewEncoder(th)
		for _, t := range req.Tools {
			_ = enc.Encode(t.Name)
			_ = enc.Encode(t.Description)
			_ = enc.Encode(CanonicalJSON(t.Parameters))
		}
		fp.toolsHash = th.Sum(nil)
	}
	// The hashed bytes are, in order: each of model, system prompt (then
	// the tools' hash), temperature, max tokens, (then the conversation's
	// head), trim point and summary as encoding/json writes it with a
	// trailing newline. The part before the head is the same for every
	// request of the execution: it is built once.
	if fp.prefix == nil || fp.model != model || fp.system != req.System || fp.maxTokens != req.MaxTokens ||
		(fp.temperature == nil) != (req.Temperature == nil) || fp.temperature != nil && *fp.temperature != *req.Temperature {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		_ = enc.Encode(model)
		_ = enc.Encode(req.System)
		b.Write(fp.toolsHash)
		_ = enc.Encode(req.Temperature)
		_ = enc.Encode(req.MaxTokens)
		fp.prefix, fp.model, fp.system, fp.maxTokens = b.Bytes(), model, req.System, req.MaxTokens
		fp.temperature = nil
		if req.Temperature != nil {
			t := *req.Temperature
			fp.temperature = &t
		}
	}
	buf := append(fp.buf[:0], fp.prefix...)
	buf = append(buf, c.HeadBytes()...)
	buf = strconv.AppendInt(buf, int64(c.trimmed), 10)
	buf = append(buf, '\n')
	if c.summary == "" {
		buf = append(buf, `""`+"\n"...)
	} else {
		s, _ := json.Marshal(c.summary)
		buf = append(append(buf, s...), '\n')
	}
	fp.buf = buf
	return Hex16(sha256.Sum256(buf))
}

// ToolFingerprint identifies a tool call by name and canonical arguments.
//
// Arguments are compacted, not re-encoded: a replayed call carries the exact
// bytes of the recorded model response, so key order already matches, and
// compacting is an order of magnitude cheaper than decoding.
func ToolFingerprint(name string, args json.RawMessage) string {
	var arr [256]byte
	b := append(append(arr[:0], name...), 0)
	if IsCanonical(args) {
		b = append(b, args...) // compact already
	} else {
		buf := bytes.NewBuffer(b)
		if json.Compact(buf, args) != nil {
			buf.Write(args)
		}
		b = buf.Bytes()
	}
	return Hex16(sha256.Sum256(b))
}

// Hex16 is the hex text of the first 16 bytes of a hash, the form of every
// fingerprint; it allocates only the string.
func Hex16(sum [sha256.Size]byte) string {
	var out [32]byte
	hex.Encode(out[:], sum[:16])
	return string(out[:])
}
