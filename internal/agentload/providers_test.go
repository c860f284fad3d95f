package agentload_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/store/memory"
)

// TestProviderModelOptions loads Gemini and Bedrock agent files whose
// model_options point at local servers and checks that a call carries
// what the file and the environment say.
func TestProviderModelOptions(t *testing.T) {
	t.Setenv("MY_GEMINI_KEY", "AIza-from-file")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDAGENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	t.Setenv("AWS_REGION", "eu-west-1")
	gem := llmtest.NewServer(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", llmtest.SSEBytes([]byte(
		`data: {"candidates": [{"content": {"parts": [{"text": "hi"}], "role": "model"}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}}`+"\n\n")))
	// Bedrock answers 400 here: what matters is the request.
	bed := llmtest.NewServer(t, "/model/us.amazon.nova-pro-v1:0/converse-stream", llmtest.JSONError(400, `{"message":"checked"}`, "X-Amzn-Errortype: ValidationException"))
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file string
		srv        *llmtest.Server
		check      func(r llmtest.Request) bool
	}{
		{"gemini", "model: gemini:gemini-2.5-flash\nmodel_options: {base_url: " + gem.URL + ", api_key_env: MY_GEMINI_KEY, max_tokens: 77}\n", gem,
			func(r llmtest.Request) bool {
				return r.Header.Get("x-goog-api-key") == "AIza-from-file" && llmtest.Field(r.Body, "generationConfig", "maxOutputTokens") == 77.0
			}},
		{"bedrock", "model: bedrock:us.amazon.nova-pro-v1:0\nmodel_options: {base_url: " + bed.URL + ", max_tokens: 88}\n", bed,
			func(r llmtest.Request) bool {
				return strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDAGENT/") &&
					strings.Contains(r.Header.Get("Authorization"), "/eu-west-1/bedrock/aws4_request") &&
					llmtest.Field(r.Body, "inferenceConfig", "maxTokens") == 88.0
			}},
	} {
		p := filepath.Join(dir, tc.name+".yaml")
		if err := os.WriteFile(p, []byte("name: a\n"+tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := agentload.Load(context.Background(), p, agentload.Options{Store: memory.New()})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _ = llm.Complete(t.Context(), l.Agent.Model, llmtest.UserRequest("hi"))
		l.Close()
		if r := tc.srv.Last(t); !tc.check(r) {
			t.Errorf("%s: request %s %v %s", tc.name, r.Path, r.Header, r.Raw)
		}
	}
}
