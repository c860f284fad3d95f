package otlpingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestSemconvExporters: hand-made GenAI semconv spans exported by the real
// @opentelemetry/exporter-trace-otlp-proto and -http (batches of 3, so one
// trace arrives in several exports).
func TestSemconvExporters(t *testing.T) {
	for _, sc := range []string{"semconv-proto", "semconv-http"} {
		t.Run(sc, func(t *testing.T) {
			e := newEnv(t, server.Config{})
			trace := e.runNode(sc)
			sid := otlpingest.SessionID("conv-" + sc)
			got := render(e.waitSteps(sid, 5))
			want := `1 user user role=user content="Weather in Paris?"
2 llm llm role=assistant call=call_1:get_weather:{"city":"Paris"} tokens=20/7 model=openai/gpt-test
3 tool tools role=tool content="{\"temp\":21}" answers=call_1:get_weather args={"city":"Paris"}
4 llm llm role=assistant content="21 degrees in Paris." tokens=40/9 model=openai/gpt-test-1
5 error tools error="forecast service down"
`
			if got != want {
				t.Fatalf("step log:\n%s\nwant:\n%s", got, want)
			}
			run, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: otlpingest.RunID(trace)})
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != steptype.RunCompleted || run.Agent != "svc-"+sc || run.Output != "21 degrees in Paris." || run.SessionID != sid {
				t.Fatalf("run %+v", run)
			}
			e.checkViews(sid, 5, "completed")
		})
	}
}

// TestOpenAIInstrumentation: the official @opentelemetry/instrumentation-openai
// drives the openai client against the local fake in a tool loop of three
// tool calls; message content arrives as log records (proto, gzip for
// spans) and every call re-sends the history.
func TestOpenAIInstrumentation(t *testing.T) {
	fake := fakeopenai.New(fakeopenai.Config{Iterations: 3, Tool: "echo", Args: `{"n":1}`, Final: "all echoed"})
	defer fake.Close()
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{LogWait: 10 * time.Second}})
	trace := e.runNode("openai", "FAKE_URL="+fake.URL)
	sid := otlpingest.TraceSessionID(trace)
	got := render(e.waitSteps(sid, 8))
	want := `1 user user role=user content="Echo three times."
2 llm llm role=assistant call=call_0:echo:{"n":1} tokens=12/5 model=openai/fake-model
3 tool tools role=tool content="echo {\"n\":1}" answers=call_0:echo args={"n":1}
4 llm llm role=assistant call=call_1:echo:{"n":1} tokens=12/5 model=openai/fake-model
5 tool tools role=tool content="echo {\"n\":1}" answers=call_1:echo args={"n":1}
6 llm llm role=assistant call=call_2:echo:{"n":1} tokens=12/5 model=openai/fake-model
7 tool tools role=tool content="echo {\"n\":1}" answers=call_2:echo args={"n":1}
8 llm llm role=assistant content="all echoed" tokens=12/5 model=openai/fake-model
`
	if got != want {
		t.Fatalf("step log:\n%s\nwant:\n%s", got, want)
	}
	run, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: otlpingest.RunID(trace)})
	if err != nil || run.Status != steptype.RunCompleted || run.Agent != "svc-openai" {
		t.Fatalf("run %+v %v", run, err)
	}
	e.checkViews(sid, 8, "completed")
}

// TestVercelAISDK: generateText of the `ai` package with its mock model, a
// tool and experimental_telemetry: the trace is the session.
func TestVercelAISDK(t *testing.T) {
	e := newEnv(t, server.Config{})
	e.runNode("vercel")
	sid := e.waitSession("calculator")
	got := render(e.waitSteps(sid, 4))
	want := `1 user user role=user content="What is 2+3?"
2 llm llm role=assistant call=tc-1:add:{"a":2,"b":3} tokens=10/4 model=mock-provider/mock-model-id
3 tool tools role=tool content="{\"sum\":5}" answers=tc-1:add args={"a":2,"b":3}
4 llm llm role=assistant content="The sum is 5." tokens=25/6 model=mock-provider/mock-model-id
`
	if got != want {
		t.Fatalf("step log:\n%s\nwant:\n%s", got, want)
	}
	e.checkViews(sid, 4, "completed")
	if sess, err := e.st.SessionGet(context.Background(), &store.SessionGetParams{ID: sid}); err != nil || sess.Title != "What is 2+3?" {
		t.Fatalf("session %+v %v, want it titled after the prompt", sess, err)
	}
}

// TestOpenInferenceLangChain: @arizeai/openinference-instrumentation-langchain
// over @langchain/core with a fake chat model and a tool.
func TestOpenInferenceLangChain(t *testing.T) {
	e := newEnv(t, server.Config{})
	e.runNode("langchain")
	sid := otlpingest.SessionID("lc-session")
	got := render(e.waitSteps(sid, 4))
	want := `1 user user role=user content="What is otel?"
2 llm llm role=assistant call=lc-1:lookup:{"q":"otel"}
3 tool tools role=tool content="found otel" answers=lc-1:lookup args={"q":"otel"}
4 llm llm role=assistant content="OTel is found."
`
	if got != want {
		t.Fatalf("step log:\n%s\nwant:\n%s", got, want)
	}
	e.checkViews(sid, 4, "completed")
}

// TestOpenInferenceOpenAI: @arizeai/openinference-instrumentation-openai
// over the openai client against the local fake, and a tool traced with
// traceTool: its TOOL span carries no call id, and the next chat span's
// input names the call; the call is one tool step. (The instrumentation
// records no token counts for streamed answers.)
func TestOpenInferenceOpenAI(t *testing.T) {
	fake := fakeopenai.New(fakeopenai.Config{Iterations: 1, Tool: "echo", Args: `{"n":1}`, Final: "echoed"})
	defer fake.Close()
	e := newEnv(t, server.Config{})
	e.runNode("oi-openai", "FAKE_URL="+fake.URL)
	sid := otlpingest.SessionID("oi-openai-session")
	got := render(e.waitSteps(sid, 4))
	want := `1 user user role=user content="Echo once."
2 llm llm role=assistant call=call_0:echo:{"n":1} model=openai/fake-model
3 tool tools role=tool content="echo {\"n\":1}" answers=call_0:echo args={"n":1}
4 llm llm role=assistant content="echoed" model=openai/fake-model
`
	if got != want {
		t.Fatalf("step log:\n%s\nwant:\n%s", got, want)
	}
	e.checkViews(sid, 4, "completed")
}
