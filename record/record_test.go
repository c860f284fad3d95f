package record_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/record"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

// twoTurns is a model that asks for the add tool once, then answers; it
// streams a partial chunk before each final response.
type twoTurns struct{}

func (twoTurns) Name() string { return "fake:adder" }
func (twoTurns) Generate(_ context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == steptype.RoleUser && strings.Contains(last.Content, "fail") {
			yield(nil, errors.New("provider exploded"))
			return
		}
		if last.Role == steptype.RoleUser {
			if !yield(&llm.Response{Partial: true, ToolCallDeltas: []llm.ToolCallDelta{{ID: "c1", Name: "add"}}}, nil) {
				return
			}
			yield(&llm.Response{ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "add", Arguments: json.RawMessage(`{"a":2,"b":3}`)}},
				Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}, FinishReason: "tool_calls", Model: "adder-1"}, nil)
			return
		}
		if !yield(&llm.Response{Partial: true, Content: "It is "}, nil) {
			return
		}
		yield(&llm.Response{Content: "It is " + last.Content + ".", Usage: llm.Usage{InputTokens: 20, OutputTokens: 4}, FinishReason: "stop", Model: "adder-1"}, nil)
	}
}

// loop is an ordinary Go agent loop that knows nothing of Stepwise.
func loop(ctx context.Context, m llm.Model, tools []tool.Tool, msgs []llm.Message) ([]llm.Message, error) {
	for {
		var final *llm.Response
		for resp, err := range m.Generate(ctx, &llm.Request{Messages: msgs}) {
			if err != nil {
				return msgs, err
			}
			if !resp.Partial {
				final = resp
			}
		}
		msgs = append(msgs, llm.Message{Role: steptype.RoleAssistant, Content: final.Content, ToolCalls: final.ToolCalls})
		if len(final.ToolCalls) == 0 {
			return msgs, nil
		}
		for _, c := range final.ToolCalls {
			res, err := tools[0].Call(ctx, &tool.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			content := ""
			if err != nil {
				content = err.Error()
			} else {
				content = res.Content
			}
			msgs = append(msgs, llm.Message{Role: steptype.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: content})
		}
	}
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() tool.Tool {
	return tool.New("add", "adds", func(_ context.Context, a addArgs) (string, error) { return fmt.Sprint(a.A + a.B), nil })
}

func render(steps []*stepwise.Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%d %s %s %q", s.Sequence, s.Kind, s.Role, s.Content)
		for _, c := range s.ToolCalls {
			fmt.Fprintf(&b, " call=%s:%s:%s", c.ID, c.Name, c.Arguments)
		}
		if s.ToolCallID != "" {
			fmt.Fprintf(&b, " answers=%s:%s args=%s", s.ToolCallID, s.ToolName, s.Inputs)
		}
		if s.Metrics.InputTokens > 0 {
			fmt.Fprintf(&b, " tokens=%d/%d model=%s", s.Metrics.InputTokens, s.Metrics.OutputTokens, s.Metrics.Model)
		}
		if s.Error != nil {
			fmt.Fprintf(&b, " error=%q", s.Error.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

const want = `1 user user "What is 2+3?"
2 llm assistant "" call=c1:add:{"a":2,"b":3} tokens=10/3 model=adder-1
3 tool tool "5" answers=c1:add args={"a":2,"b":3}
4 llm assistant "It is 5." tokens=20/4 model=adder-1
5 user user "Now fail"
6 error  "" error="provider exploded"
`

func openEngine(t *testing.T) (*stepwise.Engine, store.Store) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "rec.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	eng, err := stepwise.New(stepwise.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng, st
}

// run drives two turns of the loop through the recorder, the second of
// which fails at the model.
func run(t *testing.T, rec *record.Recorder) {
	ctx := context.Background()
	m, tools := record.Model(twoTurns{}, rec), record.Tools([]tool.Tool{addTool()}, rec)
	msgs, err := loop(ctx, m, tools, []llm.Message{{Role: steptype.RoleSystem, Content: "add"}, {Role: steptype.RoleUser, Content: "What is 2+3?"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop(ctx, m, tools, append(msgs, llm.Message{Role: steptype.RoleUser, Content: "Now fail"})); err == nil {
		t.Fatal("the second turn should fail")
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordToServer: an existing Go loop records into a Stepwise server
// through the HTTP client.
func TestRecordToServer(t *testing.T) {
	eng, st := openEngine(t)
	srv, err := server.New(server.Config{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := record.New(c, "adder")
	run(t, rec)
	steps, err := st.StepList(context.Background(), &store.StepListParams{SessionID: rec.SessionID()})
	if err != nil {
		t.Fatal(err)
	}
	if got := render(steps); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	sess, _ := st.SessionGet(context.Background(), &store.SessionGetParams{ID: rec.SessionID()})
	if sess.Agent != "adder" || sess.InputTokens != 30 {
		t.Fatalf("session %+v", sess)
	}
}

// TestRecordInProcess: the same loop records into an engine directly.
func TestRecordInProcess(t *testing.T) {
	eng, st := openEngine(t)
	rec := record.New(eng, "adder")
	run(t, rec)
	steps, err := st.StepList(context.Background(), &store.StepListParams{SessionID: rec.SessionID()})
	if err != nil {
		t.Fatal(err)
	}
	if got := render(steps); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
}

// TestRecordFailureDoesNotBreakTheLoop: a destination that refuses steps
// leaves the loop working and reports through Err.
func TestRecordFailureDoesNotBreakTheLoop(t *testing.T) {
	eng, _ := openEngine(t)
	rec := record.InSession(eng, "no-such-session")
	m := record.Model(twoTurns{}, rec)
	if _, err := loop(context.Background(), m, record.Tools([]tool.Tool{addTool()}, rec), []llm.Message{{Role: steptype.RoleUser, Content: "What is 2+3?"}}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Err(); err == nil || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Err() = %v", err)
	}
}
