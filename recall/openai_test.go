package recall_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

type embedReq struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions"`
}

// embeddingServer answers POST /v1/embeddings with handle.
func embeddingServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, req embedReq)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "wrong route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		var req embedReq
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		handle(w, r, req)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// answer writes one vector per input, [len(text), i, 1], in reverse order
// to check that indexes are honoured.
func answer(w http.ResponseWriter, req embedReq, b64 bool) {
	type datum struct {
		Index     int `json:"index"`
		Embedding any `json:"embedding"`
	}
	var data []datum
	for i := len(req.Input) - 1; i >= 0; i-- {
		v := []float32{float32(len(req.Input[i])), float32(i), 1}
		var e any = v
		if b64 {
			b := make([]byte, 12)
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			e = base64.StdEncoding.EncodeToString(b)
		}
		data = append(data, datum{i, e})
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func TestOpenAIEmbed(t *testing.T) {
	t.Parallel()
	var auth atomic.Value
	var calls atomic.Int64
	srv := embeddingServer(t, func(w http.ResponseWriter, r *http.Request, req embedReq) {
		calls.Add(1)
		auth.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Team") + "|" + req.Model + fmt.Sprint("|", req.Dimensions))
		answer(w, req, calls.Load()%2 == 0)
	})
	emb, err := recall.NewOpenAI(recall.OpenAIConfig{Model: "nomic-embed-text", BaseURL: srv.URL + "/v1/", APIKey: "k1",
		BatchSize: 2, ExtraHeaders: map[string]string{"X-Team": "core"}})
	if err != nil {
		t.Fatal(err)
	}
	if emb.Name() != "openai:nomic-embed-text" || emb.Dim() != 0 {
		t.Fatalf("name %s dim %d before the first call", emb.Name(), emb.Dim())
	}
	vecs, err := emb.Embed(t.Context(), []string{"a", "bb", "ccc"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(vecs); got != "[[1 0 1] [2 1 1] [3 0 1]]" {
		t.Errorf("vectors %s (batches of 2, JSON then base64)", got)
	}
	if calls.Load() != 2 || emb.Dim() != 3 || auth.Load() != "Bearer k1|core|nomic-embed-text|0" {
		t.Errorf("calls %d, dim %d, request %v", calls.Load(), emb.Dim(), auth.Load())
	}
	named, _ := recall.NewOpenAI(recall.OpenAIConfig{Model: "text-embedding-3-small", BaseURL: srv.URL, Dimensions: 3})
	if named.Name() != "openai:text-embedding-3-small:3" || named.Dim() != 3 {
		t.Errorf("with Dimensions: name %s dim %d", named.Name(), named.Dim())
	}
	native, _ := recall.NewOpenAI(recall.OpenAIConfig{Model: "text-embedding-3-large", BaseURL: srv.URL})
	if native.Dim() != 3072 {
		t.Errorf("text-embedding-3-large: dim %d, want 3072", native.Dim())
	}
}

func TestOpenAIRetriesTransientErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := embeddingServer(t, func(w http.ResponseWriter, r *http.Request, req embedReq) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit"}}`))
			return
		}
		answer(w, req, false)
	})
	emb, _ := recall.NewOpenAI(recall.OpenAIConfig{Model: "m", BaseURL: srv.URL + "/v1"})
	if _, err := emb.Embed(t.Context(), []string{"x"}); err != nil || calls.Load() != 2 {
		t.Errorf("after one 429: err %v, %d calls", err, calls.Load())
	}
}

func TestOpenAIErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		handle func(w http.ResponseWriter, req embedReq)
		class  steptype.ErrorClass
		msg    string
		calls  int64
	}{
		{"bad request", func(w http.ResponseWriter, _ embedReq) {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"message":"model not found"}}`))
		}, steptype.ErrorPermanent, "model not found", 1},
		{"server error", func(w http.ResponseWriter, _ embedReq) {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(`upstream down`))
		}, steptype.ErrorTransient, "upstream down", 2}, // MaxRetries 1
		{"count", func(w http.ResponseWriter, req embedReq) {
			req.Input = req.Input[:1]
			answer(w, req, false)
		}, steptype.ErrorPermanent, "1 vectors for 2 inputs", 1},
		{"dimensions", func(w http.ResponseWriter, _ embedReq) {
			w.Write([]byte(`{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2,3]}]}`))
		}, steptype.ErrorPermanent, "3 dimensions, want 2", 1},
		{"index", func(w http.ResponseWriter, _ embedReq) {
			w.Write([]byte(`{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}`))
		}, steptype.ErrorPermanent, "repeated index 0", 1},
		{"not json", func(w http.ResponseWriter, _ embedReq) { w.Write([]byte(`<html>`)) }, steptype.ErrorPermanent, "not JSON", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			srv := embeddingServer(t, func(w http.ResponseWriter, r *http.Request, req embedReq) {
				calls.Add(1)
				c.handle(w, req)
			})
			emb, _ := recall.NewOpenAI(recall.OpenAIConfig{Model: "m", BaseURL: srv.URL + "/v1", MaxRetries: 1})
			_, err := emb.Embed(t.Context(), []string{"x", "y"})
			var le *llm.Error
			if !errors.As(err, &le) || le.Class != c.class || !strings.Contains(err.Error(), c.msg) || calls.Load() != c.calls {
				t.Errorf("err %v (class %v) after %d calls; want class %s, message %q, %d calls", err, le, calls.Load(), c.class, c.msg, c.calls)
			}
		})
	}
}

func TestOpenAIConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []recall.OpenAIConfig{
		{},
		{Model: "m", BaseURL: "ftp://x"},
		{Model: "m", BaseURL: "http://x", Dimensions: -1},
	} {
		if _, err := recall.NewOpenAI(cfg); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("NewOpenAI(%+v): err %v, want ErrInvalid", cfg, err)
		}
	}
}
