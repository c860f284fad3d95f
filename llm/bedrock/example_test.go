package bedrock_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/steptype"
)

// A local stand-in for the Bedrock runtime checks that the request is
// signed and streams a short answer in the event stream framing.
func ExampleModel_Generate() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		for _, ev := range [][2]string{
			{"messageStart", `{"role":"assistant"}`},
			{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Bonjour"}}`},
			{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":" !"}}`},
			{"messageStop", `{"stopReason":"end_turn"}`},
			{"metadata", `{"usage":{"inputTokens":8,"outputTokens":3}}`},
		} {
			_, _ = w.Write(frame(ev[0], ev[1]))
		}
	}))
	defer srv.Close()

	m, err := bedrock.New(bedrock.Config{
		Model:   "amazon.nova-lite-v1:0",
		Region:  "eu-west-3",
		BaseURL: srv.URL,
		Credentials: func(context.Context) (bedrock.Credentials, error) {
			return bedrock.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "example"}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{Messages: []llm.Message{{Role: steptype.RoleUser, Content: "Say hello in French."}}}
	for r, err := range m.Generate(context.Background(), req) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if r.Partial {
			fmt.Print(r.Content)
			continue
		}
		fmt.Printf("\nstop=%s input=%d output=%d\n", r.FinishReason, r.Usage.InputTokens, r.Usage.OutputTokens)
	}
	// Output:
	// Bonjour !
	// stop=end_turn input=8 output=3
}
