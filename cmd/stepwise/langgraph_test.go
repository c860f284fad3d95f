package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// langGraphDeps holds the official LangGraph SDK and drive.mjs.
var langGraphDeps = filepath.Join("..", "..", "internal", "testdeps", "langgraph")

const langGraphToken = "langgraph-secret-token"

// TestLangGraphSDKSQLite drives `stepwise serve` on a SQLite file with the
// official LangGraph SDK client (@langchain/langgraph-sdk): assistants,
// threads, a streamed run with parallel tool calls, state and history, time
// travel from the third checkpoint, an interrupt resumed with
// command.resume, a cancelled run, runs on a busy thread, wrong ids.
func TestLangGraphSDKSQLite(t *testing.T) {
	t.Parallel()
	testLangGraphSDK(t, "sqlite:"+filepath.Join(t.TempDir(), "langgraph.db"))
}

// TestLangGraphSDKPostgres is TestLangGraphSDKSQLite on PostgreSQL.
func TestLangGraphSDKPostgres(t *testing.T) {
	t.Parallel()
	testLangGraphSDK(t, postgresSchemaDSN(t))
}

// serveAgents starts `stepwise serve` on db with a token and the agent
// files, and returns its base URL once it answers.
func serveAgents(t *testing.T, db, token string, agentFiles ...string) (string, *bytes.Buffer) {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"--db", db, "serve", "--addr", addr, "--token", token}
	for _, f := range agentFiles {
		p, _ := filepath.Abs(f)
		args = append(args, "--agent", p)
	}
	srv := exec.Command(bin, args...)
	srv.Dir = t.TempDir()
	srv.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/v1/health")
		if err == nil {
			resp.Body.Close()
			return base, &srvErr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start: %s", srvErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testLangGraphSDK(t *testing.T, db string) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(langGraphDeps, "node_modules", "@langchain", "langgraph-sdk", "package.json"))
	}
	if err != nil {
		msg := "LangGraph npm test dependencies missing (" + err.Error() + "); install them with: npm ci --prefix internal/testdeps/langgraph"
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var files []string
	for _, a := range []string{"adder", "asker", "slow", "broken"} {
		files = append(files, filepath.Join("testdata", "langgraph", a+".yaml"))
	}
	base, srvErr := serveAgents(t, db, langGraphToken, files...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "drive.mjs", base+"/langgraph", langGraphToken)
	cmd.Dir = langGraphDeps
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("drive.mjs: %v\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", err, out, stderr.String(), srvErr.String())
	}
	t.Logf("the client saw: %s", out)
	var seen map[string]any
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("drive.mjs output %q: %v", out, err)
	}
	get := func(path string) any {
		var v any = seen
		for _, k := range strings.Split(path, ".") {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		return v
	}
	want := func(path string, w any) {
		t.Helper()
		if got := get(path); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s = %v, want %v", path, got, w)
		}
	}
	wantStatus := func(path string, status int, detail string) {
		t.Helper()
		want(path+".status", status)
		if d, _ := get(path + ".detail").(string); !strings.Contains(d, detail) {
			t.Errorf("%s.detail = %q, want it to say %q", path, d, detail)
		}
	}

	// Auth: x-api-key is the server token.
	wantStatus("errors.noKey", 401, "token")

	// Assistants are the agents, by id or by name.
	if as, _ := get("assistants").([]any); !slices.Contains(as, any("adder")) || !slices.Contains(as, any("asker")) || !slices.Contains(as, any("slow")) {
		t.Errorf("assistants %v", as)
	}
	want("assistantGet", "adder")
	want("assistantByName", true)
	want("graph.nodes", []any{"__start__", "llm", "tools", "__end__"})
	want("graph.edges", []any{"__start__>llm", "llm>tools", "llm>__end__", "tools>llm"})
	want("schemas", []any{"messages"})

	// Threads: metadata, search, update.
	want("threadCreated.status", "idle")
	want("threadCreated.user", "ada")
	want("searchAda", []any{true})
	want("counts.ada", 1)
	want("counts.idle", 2)
	want("counts.adder", 1)
	want("threadUpdated.user", "ada")
	want("threadUpdated.topic", "arithmetic")

	// The streamed run: metadata first, parallel tool calls in updates,
	// their tool messages answering them, streamed chunks, final values.
	want("stream.first", "metadata")
	want("stream.metadataRun", get("stream.onRunCreated"))
	want("stream.kinds", []any{"messages", "metadata", "updates", "values"})
	want("stream.ids", true)
	want("stream.toolCalls", []any{"calculator(2+3)", "calculator(6*7)"})
	tm, _ := get("stream.toolMessages").([]any)
	if len(tm) != 2 {
		t.Errorf("tool messages %v", tm)
	}
	for _, m := range tm {
		mm := m.(map[string]any)
		if mm["type"] != "tool" || mm["matches"] != true {
			t.Errorf("tool message %v", mm)
		}
	}
	want("stream.chunkText", "Let me compute both.2+3 is 5 and 6*7 is 42.")
	want("stream.chunkNode", "llm")
	want("stream.toolChunks", 2)
	want("stream.finalTypes", []any{"human", "ai", "tool", "tool", "ai"})
	want("stream.finalText", "2+3 is 5 and 6*7 is 42.")
	// A broken connection: the SDK reconnects after the last event id and
	// gets every update once.
	want("reconnect.cuts", 1)
	want("reconnect.reconnects", 1)
	want("reconnect.resumedAfter", true)
	want("reconnect.nodes", []any{"llm", "tools", "tools", "llm"})
	want("run.status", "success")
	want("runs", []any{"success"})

	// State and history: one checkpoint per step, newest first.
	want("state.types", []any{"human", "ai", "tool", "tool", "ai"})
	want("state.next", []any{})
	want("history", []any{5, 4, 3, 2, 1})
	want("third.step", 3)
	want("third.types", []any{"human", "ai", "tool"})
	want("third.next", []any{"tools"})
	want("atThird", []any{"human", "ai", "tool"})

	// Time travel from the third checkpoint: an O(1) fork there (sharing
	// the first three checkpoints) where the second tool call and the
	// answer run again; the thread itself is unchanged.
	want("travel.types", []any{"human", "ai", "tool", "tool", "ai"})
	want("travel.text", "2+3 is 5 and 6*7 is 42.")
	want("travel.otherThread", true)
	want("travelFork.from", true)
	want("travelFork.at", 3)
	want("travelFork.user", "ada")
	want("travelShared", true)
	want("travelSteps", 5)
	want("afterTravel", 5)
	want("updateState.checkpoint", true)
	want("updateState.mood", "happy")

	// An interrupt (ask_human) surfaces as __interrupt__, in the thread and
	// its state; command.resume answers it.
	want("interrupt.value", "May I compute 6*7?")
	want("interrupt.kind", "input")
	want("interrupt.inValues", true)
	want("interruptedThread.status", "interrupted")
	want("interruptedThread.interrupts", 1)
	want("interruptState.tasks", 1)
	want("interruptState.interrupts", 1)
	want("resumed.text", "Confirmed and computed: 42.")
	want("resumed.types", []any{"human", "ai", "tool", "ai", "tool", "ai"})
	want("resumed.status", "idle")
	wantStatus("errors.resumeIdle", 409, "no interrupt")

	// A cancelled run.
	if c := get("cancelCreated"); c != "pending" && c != "running" {
		t.Errorf("cancelCreated = %v, want pending or running", c)
	}
	want("cancelled", "interrupted")
	wantStatus("errors.cancelAgain", 409, "finished")

	// A busy thread: reject refuses, enqueue runs after, interrupt cancels.
	wantStatus("errors.reject", 409, "busy")
	want("enqueue.first", "A slow answer.")
	want("enqueue.second", "The next answer.")
	want("enqueue.distinct", true)
	want("enqueue.humans", []any{"first", "third"})
	want("enqueue.statuses", []any{"success", "success"})
	want("interruptStrategy.text", "Another answer.")
	want("interruptStrategy.before", "interrupted")

	want("rollback.humans", []any{"first", "third", "fourth", "fifth", "seventh"}) // sixth rolled back
	want("rollback.text", "Another answer.")

	// Joining a finished run's stream replays it; after an event id, only
	// what followed it.
	want("join.first", "metadata")
	want("join.updates", 4)
	want("join.complete", []any{"ai", "tool", "tool", "ai"})
	for _, e := range []string{"on_chain_start", "on_chain_end", "on_tool_end"} {
		if evs, _ := get("join.events").([]any); !slices.Contains(evs, any(e)) {
			t.Errorf("join.events %v: no %s", evs, e)
		}
	}
	want("rejoin", []any{"tools", "tools", "llm"})

	// A failed run.
	if m, _ := get("errors.failedWait.message").(string); !strings.Contains(m, "RunError") || !strings.Contains(m, "context too long") {
		t.Errorf("failed wait: %v", get("errors.failedWait"))
	}
	want("failedStream.last", "error")
	if m, _ := get("failedStream.message").(string); !strings.Contains(m, "context too long") {
		t.Errorf("failed stream: %v", get("failedStream"))
	}

	// Copy (a fork) and delete.
	want("copy.types", 5)
	want("copy.other", true)
	wantStatus("errors.deleted", 404, "not found")

	// Wrong ids.
	wantStatus("errors.thread", 404, "thread no-such-thread not found")
	wantStatus("errors.run", 404, "run no-such-run not found")
	wantStatus("errors.assistant", 404, "no-such-assistant")
	wantStatus("errors.checkpoint", 404, "checkpoint no-such-checkpoint not found")
	wantStatus("errors.runOnMissingThread", 404, "thread no-such-thread not found")
	wantStatus("errors.unknownAssistantRun", 404, "no-such-assistant")
}
