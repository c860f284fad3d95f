package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

func newRecorder(t *testing.T, st store.Store) *observe.Recorder {
	t.Helper()
	rec, err := observe.NewRecorder(observe.RecorderConfig{Store: st, Mask: observe.NewMasker(observe.MaskConfig{}).Text,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// events lists the stored events of a step as "type name error", and
// returns the rows.
func events(t *testing.T, st store.Store, stepID string) (string, []*store.StepEvent) {
	t.Helper()
	evs, err := st.StepEventList(t.Context(), &store.StepEventListParams{StepID: stepID})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range evs {
		lines = append(lines, strings.TrimSpace(e.Type+" "+e.Name+" "+e.Error))
	}
	return strings.Join(lines, "\n"), evs
}

func TestRecorderMatchesEventsToSteps(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		llmStep := &steptype.Step{ID: "llm-2", Kind: steptype.KindLLM, Name: "llm"}
		llmErr := &steptype.Step{ID: "err-1", Kind: steptype.KindError, Name: "llm", Metrics: steptype.Metrics{Attempt: 1}}
		toolErr := &steptype.Step{ID: "err-2", Kind: steptype.KindError, Name: "tools", ToolName: "search",
			Inputs: json.RawMessage(`{"tool_call_id":"c1"}`), Metrics: steptype.Metrics{Attempt: 1}}
		toolStep := &steptype.Step{ID: "tool-1", Kind: steptype.KindTool, Name: "tools", ToolCallID: "c1", ToolName: "search"}
		seed(t, st, llmErr, llmStep, toolErr, toolStep)
		rec := newRecorder(t, st)
		run := &stepwise.Run{ID: "r", SessionID: "s"}
		ev := func(ref stepwise.StepRef, typ, name string, payload any) {
			ref.RunID, ref.SessionID = "r", "s"
			rec.StepEvent(ctx, &stepwise.StepEvent{StepRef: ref, Type: typ, Name: name, Time: time.Now(), Payload: payload})
		}
		// Attempt 1 of the llm step fails (its pre-assigned id never commits).
		ev(stepwise.StepRef{StepID: "llm-1", StepName: "llm", Attempt: 1}, stepwise.StepEventProviderRequest, "m", &llm.Request{System: "key sk-proj-abcdefghijklmnopqrstu"})
		rec.StepCommitted(ctx, run, llmErr)
		ev(stepwise.StepRef{StepID: "llm-2", StepName: "llm", Attempt: 2}, stepwise.StepEventProviderRequest, "m", &llm.Request{
			Messages: []llm.Message{{Role: "user", Content: "mail bob@example.com"}}})
		ev(stepwise.StepRef{StepID: "llm-2", StepName: "llm", Attempt: 2}, stepwise.StepEventProviderResponse, "m", &llm.Response{Content: "ok"})
		rec.StepCommitted(ctx, run, llmStep)
		// The tool fails once (error step), then succeeds (tool step).
		ev(stepwise.StepRef{ToolCallID: "c1", StepName: "tools", Attempt: 1}, stepwise.StepEventToolInvocation, "search", nil)
		rec.StepCommitted(ctx, run, toolErr)
		ev(stepwise.StepRef{ToolCallID: "c1", StepName: "tools", Attempt: 2}, stepwise.StepEventToolInvocation, "search",
			&stepwise.ToolInvocation{Arguments: json.RawMessage(`{"q":"x","api_key":"k-123"}`)})
		ev(stepwise.StepRef{StepID: "never", StepName: "custom", Attempt: 1}, "api_call", "lost", nil)
		rec.StepCommitted(ctx, run, toolStep)
		// A late event of a committed step is written at once.
		ev(stepwise.StepRef{ToolCallID: "c1", StepName: "tools", Attempt: 2}, stepwise.StepEventHTTP, "GET /late", nil)
		rec.RunFinished(ctx, run)

		for step, want := range map[string]string{
			"err-1":  "provider_request m",
			"llm-2":  "provider_request m\nprovider_response m",
			"err-2":  "tool_invocation search",
			"tool-1": "tool_invocation search\nhttp GET /late",
		} {
			if got, _ := events(t, st, step); got != want {
				t.Errorf("events of %s:\n%s\nwant:\n%s", step, got, want)
			}
		}
		_, rows := events(t, st, "err-1")
		if p := string(rows[0].Payload); strings.Contains(p, "sk-proj") || !strings.Contains(p, observe.Redacted) {
			t.Errorf("API key not redacted: %s", p)
		}
		_, rows = events(t, st, "llm-2")
		if p := string(rows[0].Payload); !strings.Contains(p, `"content":"mail [email]"`) || rows[0].Attempt != 2 {
			t.Errorf("payload not masked: %s", p)
		}
		_, rows = events(t, st, "tool-1")
		if p := string(rows[0].Payload); !strings.Contains(p, `"api_key":"[REDACTED]"`) || !strings.Contains(p, `"q":"x"`) {
			t.Errorf("tool arguments: %s", p)
		}
	})
}

func TestRecorderLargePayloadOutOfLine(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		s := &steptype.Step{ID: "a", Kind: steptype.KindLLM, Name: "llm"}
		seed(t, st, s)
		rec := newRecorder(t, st)
		big := strings.Repeat("lorem ipsum ", 10_000) // 120 kB
		rec.StepEvent(ctx, &stepwise.StepEvent{StepRef: stepwise.StepRef{RunID: "r", StepID: "a"}, Type: "provider_request",
			Payload: &llm.Request{Messages: []llm.Message{{Role: "user", Content: big}}}})
		rec.StepCommitted(ctx, &stepwise.Run{ID: "r"}, s)
		_, rows := events(t, st, "a")
		if len(rows) != 1 || rows[0].Payload != nil || rows[0].BlobHash == "" || rows[0].Size <= store.InlinePayloadLimit {
			t.Fatalf("large event = %+v, want it out of line", rows)
		}
		b, err := st.BlobGet(ctx, &store.BlobGetParams{Hash: rows[0].BlobHash})
		if err != nil {
			t.Fatal(err)
		}
		var req llm.Request
		if err := json.Unmarshal(b.Data, &req); err != nil || req.Messages[0].Content != big {
			t.Errorf("out-of-line payload does not round-trip: %v", err)
		}
	})
}

func TestTransportRecordsExchange(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		s := &steptype.Step{ID: "a", Kind: steptype.KindLLM, Name: "llm"}
		seed(t, st, s)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if r.Header.Get("Authorization") != "Bearer sk-secret-value-1234567" || !bytes.Contains(body, []byte(`"model"`)) {
				http.Error(w, "the transport changed the request", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Set-Cookie", "session=abc")
			io.WriteString(w, `{"id":"resp_1","choices":[{"message":{"content":"hi"}}]}`)
		}))
		defer srv.Close()
		e, err := stepwise.New(stepwise.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		rec := newRecorder(t, st)
		defer e.Observe(rec)()
		client := &http.Client{Transport: observe.Transport(observe.TransportConfig{Base: srv.Client().Transport})}
		do := func(ctx context.Context) {
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat?api_key=abc", strings.NewReader(`{"model":"m","messages":[]}`))
			req.Header.Set("Authorization", "Bearer sk-secret-value-1234567")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
		}
		do(ctx) // outside a step: not recorded
		do(e.StepContext(ctx, stepwise.StepRef{SessionID: "s", RunID: "r", StepID: "a", StepName: "llm", Attempt: 1}))
		if err := e.FlushObservers(ctx); err != nil {
			t.Fatal(err)
		}
		rec.StepCommitted(ctx, &stepwise.Run{ID: "r"}, s)
		got, rows := events(t, st, "a")
		if got != "http POST "+strings.TrimPrefix(srv.URL, "http://")+"/v1/chat" {
			t.Fatalf("events = %q", got)
		}
		var x observe.HTTPExchange
		if err := json.Unmarshal(rows[0].Payload, &x); err != nil {
			t.Fatal(err)
		}
		if x.Status != 200 || x.RequestHeaders.Get("Authorization") != observe.Redacted || x.ResponseHeaders.Get("Set-Cookie") != observe.Redacted ||
			!strings.Contains(x.URL, "api_key=%5BREDACTED%5D") || string(x.RequestBody.JSON) != `{"messages":[],"model":"m"}` && string(x.RequestBody.JSON) != `{"model":"m","messages":[]}` ||
			!strings.Contains(string(x.ResponseBody.JSON), `"content":"hi"`) {
			t.Errorf("exchange = %s", rows[0].Payload)
		}
		if strings.Contains(string(rows[0].Payload), "sk-secret") {
			t.Errorf("secret leaked: %s", rows[0].Payload)
		}
	})
}
