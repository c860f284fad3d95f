package convo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/raceflag"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// slowCanonical is CanonicalJSON without its fast path.
func slowCanonical(b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

func randomCanonJSON(r *rand.Rand, depth int) string {
	keys := []string{"a", "b", "B", "é", "a b", `a\nb`, "<", "aa", "z"}
	switch k := r.IntN(10); {
	case depth < 3 && k < 3:
		var b strings.Builder
		b.WriteString("{" + []string{"", " "}[r.IntN(2)])
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:%s", keys[r.IntN(len(keys))], randomCanonJSON(r, depth+1))
		}
		return b.String() + "}"
	case depth < 3 && k < 5:
		parts := make([]string, r.IntN(3))
		for i := range parts {
			parts[i] = randomCanonJSON(r, depth+1)
		}
		return "[" + strings.Join(parts, []string{",", ", "}[r.IntN(2)]) + "]"
	}
	return []string{`1`, `-3`, `0`, `-0`, `01`, `1.0`, `2.5`, `1e3`, `1E3`, `123456789012345`, `1234567890123456`,
		`"s"`, `"a\nb"`, `"a\u0041"`, `"\u00e9"`, `"é"`, `"<&>"`, `"\/"`, `"\b"`, "\"\u2028\"", "\"\xff\"", `"\"\\"`,
		`true`, `false`, `null`, `""`, `tru`, `"x`, `[1,]`, `{"a":}`}[r.IntN(30)]
}

// isCanonical only ever accepts what re-encoding leaves unchanged, and
// does accept the compact, sorted JSON models usually send.
func TestIsCanonicalAgreesWithReencoding(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 2))
	accepted := 0
	for range 20000 {
		b := []byte(randomCanonJSON(r, 0))
		if !IsCanonical(b) {
			continue
		}
		accepted++
		if got := slowCanonical(b); !bytes.Equal(got, b) || !json.Valid(b) {
			t.Fatalf("IsCanonical(%s) but re-encoded %s", b, got)
		}
	}
	for _, ok := range []string{`{"n":1}`, `{"city":"Paris","days":3,"tags":["a","b"]}`, `{"a":{"b":[true,null,"x\"y"]},"é":-12}`, `[]`, `{}`} {
		if !IsCanonical([]byte(ok)) {
			t.Errorf("IsCanonical(%s) = false", ok)
		}
	}
	if accepted == 0 {
		t.Fatal("nothing random was canonical")
	}
}

// refChainHash is the message hash before chainHash reused its buffers.
func refChainHash(prev []byte, m llm.Message) [sha256.Size]byte {
	if len(m.ToolCalls) > 0 {
		calls := make([]steptype.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			calls[i] = steptype.ToolCall{ID: c.ID, Name: c.Name, Arguments: slowCanonical(c.Arguments)}
		}
		m.ToolCalls = calls
	} else {
		m.ToolCalls = nil
	}
	b, _ := json.Marshal(m)
	h := sha256.New()
	h.Write(prev)
	h.Write(b)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// refToolFingerprint is toolFingerprint before it skipped compacting.
func refToolFingerprint(name string, args json.RawMessage) string {
	var b bytes.Buffer
	b.WriteString(name)
	b.WriteByte(0)
	if json.Compact(&b, args) != nil {
		b.Write(args)
	}
	h := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(h[:16])
}

// refRequestFingerprint is requestFingerprint before it kept its prefix.
func refRequestFingerprint(toolsHash []byte, c *Conversation, model string, req *llm.Request) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(model)
	_ = enc.Encode(req.System)
	h.Write(toolsHash)
	_ = enc.Encode(req.Temperature)
	_ = enc.Encode(req.MaxTokens)
	h.Write(c.HeadBytes())
	_ = enc.Encode(c.trimmed)
	_ = enc.Encode(c.summary)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// The reused-buffer hashes are byte for byte the hashes recorded before:
// replay fingerprints of existing sessions still match.
func TestFingerprintsUnchanged(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	c := New()
	fp := &Fingerprinter{}
	temps := []*float64{nil, new(0.0), new(0.7)}
	for i := range 400 {
		m := llm.Message{Role: []steptype.Role{steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool}[r.IntN(3)],
			Content: []string{"", "hi", "<b>&", "é\n"}[r.IntN(4)], ToolCallID: []string{"", "c1"}[r.IntN(2)]}
		for j := range r.IntN(3) {
			m.ToolCalls = append(m.ToolCalls, steptype.ToolCall{ID: fmt.Sprint("c", j), Name: "t", Arguments: json.RawMessage(randomCanonJSON(r, 0))})
		}
		for j := range m.ToolCalls {
			if !json.Valid(m.ToolCalls[j].Arguments) {
				m.ToolCalls[j].Arguments = json.RawMessage(`{"b":1, "a":2}`)
			}
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if r.IntN(2) == 0 {
				args = json.RawMessage(randomCanonJSON(r, 0)) // possibly invalid
			}
			if got, want := ToolFingerprint(tc.Name, args), refToolFingerprint(tc.Name, args); got != want {
				t.Fatalf("tool fingerprint of %s: %s, want %s", args, got, want)
			}
		}
		if got, want := c.chainHash(c.HeadBytes(), m), refChainHash(c.HeadBytes(), m); got != want {
			t.Fatalf("message %d %+v: chain hash %x, want %x", i, m, got, want)
		}
		c.Push(m, int64(i))
		c.trimmed, c.summary = r.IntN(3)*i, []string{"", "", "sum <x>"}[r.IntN(3)]
		req := &llm.Request{System: []string{"sys", "other"}[r.IntN(2)], MaxTokens: r.IntN(2) * 100, Temperature: temps[r.IntN(3)],
			Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}}}
		model := []string{"m1", "m2"}[r.IntN(2)]
		got := fp.Request(c, model, req)
		if want := refRequestFingerprint(fp.ToolsHash(), c, model, req); got != want {
			t.Fatalf("request %d: fingerprint %s, want %s", i, got, want)
		}
	}
}

// Hashing a message whose arguments are already canonical allocates
// nothing.
func TestChainHashAllocatesNothing(t *testing.T) {
	c := New()
	m := llm.Message{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"n":1}`)}}}
	prev := make([]byte, 32)
	c.chainHash(prev, m)
	if raceflag.Enabled {
		t.Log("allocations not counted under the race detector")
		return
	}
	if n := testing.AllocsPerRun(100, func() { c.chainHash(prev, m) }); n != 0 {
		t.Errorf("chainHash allocates %.0f times, want 0", n)
	}
}
