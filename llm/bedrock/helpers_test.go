package bedrock_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise/llm/bedrock"
)

// fake is a local Bedrock runtime endpoint: it refuses a request without a
// well-formed SigV4 Authorization (or a bearer token), records what it
// receives and answers with the handler of the test.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*received
}

type received struct {
	method, rawPath string
	header          http.Header
	body            map[string]any
}

// authShape is the Authorization header of a signed request.
var authShape = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=AKIDTEST/\d{8}/us-west-2/bedrock/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$`)

func newFake(t testing.TB, h http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := &received{method: r.Method, rawPath: r.URL.EscapedPath(), header: r.Header.Clone()}
		_ = json.Unmarshal(raw, &rec.body)
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		auth := r.Header.Get("Authorization")
		if !authShape.MatchString(auth) && !strings.HasPrefix(auth, "Bearer ") {
			w.Header().Set("X-Amzn-Errortype", "UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"The security token included in the request is invalid."}`)
			return
		}
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/model/") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) last(t testing.TB) *received {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the server received no request")
	}
	return f.reqs[len(f.reqs)-1]
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// testCreds are static credentials with a session token.
func testCreds(context.Context) (bedrock.Credentials, error) {
	return bedrock.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", SessionToken: "session"}, nil
}

func (f *fake) model(t testing.TB, mods ...func(*bedrock.Config)) *bedrock.Model {
	t.Helper()
	cfg := bedrock.Config{Model: "anthropic.claude-sonnet-4-5-20250929-v1:0", Region: "us-west-2", BaseURL: f.URL, Credentials: testCreds}
	for _, mod := range mods {
		mod(&cfg)
	}
	m, err := bedrock.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// eventFile reads testdata/name: one event per line, the :event-type, a
// space and the JSON payload; "!type" lines are exceptions; # comments.
func eventFile(t testing.TB, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		typ, payload, _ := strings.Cut(line, " ")
		out = append(out, frame(typ, payload)...)
	}
	return out
}

// frame encodes one event, or an exception when typ starts with "!".
func frame(typ, payload string) []byte {
	if exc, ok := strings.CutPrefix(typ, "!"); ok {
		return bedrock.EncodeMessage(map[string]string{":message-type": "exception", ":exception-type": exc, ":content-type": "application/json"}, []byte(payload))
	}
	return bedrock.EncodeMessage(map[string]string{":message-type": "event", ":event-type": typ, ":content-type": "application/json"}, []byte(payload))
}

// serveEvents streams the framed messages of data, flushing after each.
func serveEvents(data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Header().Set("X-Amzn-Requestid", "req-1")
		rc := http.NewResponseController(w)
		for len(data) > 0 {
			n := int(uint32(data[0])<<24 | uint32(data[1])<<16 | uint32(data[2])<<8 | uint32(data[3]))
			n = min(n, len(data))
			if _, err := w.Write(data[:n]); err != nil {
				return
			}
			_ = rc.Flush()
			data = data[n:]
		}
	}
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
