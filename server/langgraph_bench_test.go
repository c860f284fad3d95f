package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/memory"
)

// BenchmarkLangGraphState reads the latest state and a page of history of
// a thread of n steps over HTTP (in-memory store): each reads the
// thread's steps (the values are rebuilt from the step log), so the cost
// grows with n, and each checkpoint of the history carries the values.
func BenchmarkLangGraphState(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			eng, err := stepwise.New(stepwise.Config{Store: memory.New(), Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			srv, err := New(Config{Engine: eng, Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			defer srv.Close()
			sess, err := eng.CreateSession(context.Background(), "", "bench")
			if err != nil {
				b.Fatal(err)
			}
			steps := make([]*stepwise.Step, 0, n)
			for i := range n {
				role, kind := steptype.RoleUser, steptype.KindUser
				if i%2 == 1 {
					role, kind = steptype.RoleAssistant, steptype.KindLLM
				}
				steps = append(steps, &stepwise.Step{Kind: kind, Role: role, Content: strings.Repeat("word ", 40)})
			}
			if _, err := eng.Ingest(context.Background(), stepwise.IngestParams{SessionID: sess.ID, Steps: steps}); err != nil {
				b.Fatal(err)
			}
			for _, q := range []struct{ name, method, path, body string }{
				{"getState", "GET", "/threads/" + sess.ID + "/state", ""},
				{"getHistory10", "POST", "/threads/" + sess.ID + "/history", `{"limit":10}`},
			} {
				b.Run(q.name, func(b *testing.B) {
					for b.Loop() {
						req, _ := http.NewRequest(q.method, ts.URL+langGraphPrefix+q.path, strings.NewReader(q.body))
						req.Header.Set("Content-Type", "application/json")
						resp, err := http.DefaultClient.Do(req)
						if err != nil || resp.StatusCode != 200 {
							b.Fatal(resp.Status, err)
						}
						resp.Body.Close()
					}
				})
			}
		})
	}
}
