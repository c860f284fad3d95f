package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise"
)

// a2aStream posts a streaming JSON-RPC call and returns the results of
// its SSE data lines (an error response ends the list with its error).
// onFirst, when set, is called after the first one.
func a2aStream(t *testing.T, url, body string, onFirst ...func()) []map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
		return nil
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r struct {
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Errorf("data %q: %v", line, err)
			return out
		}
		if r.Error != nil {
			return append(out, map[string]any{"error": r.Error})
		}
		out = append(out, r.Result)
		if len(out) == 1 && len(onFirst) > 0 {
			onFirst[0]()
		}
	}
	return out
}

func lastState(evs []map[string]any) string {
	if len(evs) == 0 {
		return ""
	}
	su, _ := evs[len(evs)-1]["statusUpdate"].(map[string]any)
	st, _ := su["status"].(map[string]any)
	s, _ := st["state"].(string)
	return s
}

// TestA2AStreamAnswerResubscribe streams a task to input-required, then,
// while two subscriptions follow it, answers it with a streaming message:
// every stream ends completed with the output artifact (run under -race:
// the streams' writers and subscriptions are concurrent).
func TestA2AStreamAnswerResubscribe(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{askAgent("asker")})
	url := env.ts.URL + "/a2a/asker"
	first := a2aStream(t, url, `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`)
	if lastState(first) != a2aInputRequired {
		t.Fatalf("first stream %v", first)
	}
	task := first[0]["task"].(map[string]any)["id"].(string)
	var wg sync.WaitGroup
	subs := make([][]map[string]any, 2)
	ready := make(chan struct{}, 2)
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			subscribed := func() { once.Do(func() { ready <- struct{}{} }) }
			defer subscribed() // also when the call failed
			subs[i] = a2aStream(t, url, `{"jsonrpc":"2.0","id":"s","method":"SubscribeToTask","params":{"id":"`+task+`"}}`, subscribed)

		}()
	}
	<-ready
	<-ready
	answer := a2aStream(t, url, `{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":{"messageId":"m2","taskId":"`+task+`","role":"ROLE_USER","parts":[{"text":"Ada"}]}}}`)
	wg.Wait()
	for i, evs := range append(subs, answer) {
		if lastState(evs) != a2aCompleted {
			t.Errorf("stream %d ends %q: %v", i, lastState(evs), evs)
			continue
		}
		art := evs[len(evs)-2]["artifactUpdate"].(map[string]any)["artifact"].(map[string]any)
		if text := art["parts"].([]any)[0].(map[string]any)["text"]; text != "Nice to meet you." {
			t.Errorf("stream %d artifact %v", i, art)
		}
	}
	// The task is finished: a subscription is refused, GetTask reads it.
	status, body := env.call("POST", "/a2a/asker", `{"jsonrpc":"2.0","id":3,"method":"SubscribeToTask","params":{"id":"`+task+`"}}`)
	if status != 200 || !strings.Contains(string(body), `"code":-32004`) {
		t.Errorf("subscribe to a finished task: %d %s", status, body)
	}
	status, body = env.call("POST", "/a2a/asker", `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"id":"`+task+`"}}`)
	if status != 200 || !strings.Contains(string(body), `"state":"completed"`) || !strings.Contains(string(body), `"kind":"task"`) {
		t.Errorf("tasks/get: %d %s", status, body)
	}
	env.problem(404, CodeUnknownAgent, "POST", "/a2a/ghost", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`)
}
