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

// a2aDeps holds the official A2A JavaScript SDK and drive.mjs.
var a2aDeps = filepath.Join("..", "..", "internal", "testdeps", "a2a")

const a2aToken = "a2a-secret-token"

// TestA2ASDKSQLite drives `stepwise serve` on a SQLite file with the
// official A2A client (@a2a-js/sdk): card discovery, send, stream,
// input-required answered by a second message, approvals, resubscribe,
// cancel, unknown tasks and bad JSON-RPC.
func TestA2ASDKSQLite(t *testing.T) {
	t.Parallel()
	testA2ASDK(t, "sqlite:"+filepath.Join(t.TempDir(), "a2a.db"))
}

// TestA2ASDKPostgres is TestA2ASDKSQLite on PostgreSQL.
func TestA2ASDKPostgres(t *testing.T) {
	t.Parallel()
	testA2ASDK(t, postgresSchemaDSN(t))
}

func testA2ASDK(t *testing.T, db string) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(a2aDeps, "node_modules", "@a2a-js", "sdk", "package.json"))
	}
	if err != nil {
		msg := "A2A npm test dependencies missing (" + err.Error() + "); install them with: npm ci --prefix internal/testdeps/a2a"
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"--db", db, "serve", "--addr", addr, "--token", a2aToken}
	for _, a := range []string{"helper", "asker", "ops"} {
		p, _ := filepath.Abs(filepath.Join("testdata", "a2a", a+".yaml"))
		args = append(args, "--agent", p)
	}
	srv := exec.Command(bin, args...)
	srv.Dir = dir
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
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start: %s", srvErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "drive.mjs", base, a2aToken)
	cmd.Dir = a2aDeps
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

	// Discovery: the root card is the default agent's (the first by name);
	// the card lists the tools as skills, its JSON-RPC interface and the
	// server's bearer auth, and is behind it.
	want("rootCard.name", "helper") // the first agent file's
	want("rootCard.url", base+"/a2a/helper")
	want("unauthenticatedCard", 401)
	want("card.name", "helper")
	want("card.description", "Adds numbers with a calculator.")
	want("card.skills", []any{"calculator"})
	want("card.interface.url", base+"/a2a/helper")
	want("card.interface.protocolBinding", "JSONRPC")
	want("card.interface.protocolVersion", "1.0")
	want("card.streaming", true)
	want("card.security", []any{"bearer"})

	// Send: the task is the run, its context the session, the output an
	// artifact; a second message in the context is a new task there.
	want("send.state", "completed")
	want("send.output", "The sum is 5.")
	want("resend.sameTask", true)
	want("resend.state", "completed")
	want("sendAgain.state", "completed")
	want("sendAgain.contextId", get("send.contextId"))
	want("sendAgain.sameTask", false)

	// Stream: the task, working updates, the artifact, the final status.
	var kinds []string
	stream, _ := seen["stream"].([]any)
	for _, e := range stream {
		m := e.(map[string]any)
		k := m["kind"].(string)
		if s, _ := m["state"].(string); s != "" {
			k += ":" + s
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) < 4 || !strings.HasPrefix(kinds[0], "task:") || kinds[len(kinds)-2] != "artifactUpdate" || kinds[len(kinds)-1] != "statusUpdate:completed" ||
		!slices.Contains(kinds, "statusUpdate:working") {
		t.Errorf("stream events %v", kinds)
	}
	if len(stream) > 1 {
		if art := stream[len(stream)-2].(map[string]any); art["text"] != "The sum is 5." || art["lastChunk"] != true {
			t.Errorf("streamed artifact %v", art)
		}
	}
	sawText := false
	for _, e := range stream {
		sawText = sawText || e.(map[string]any)["text"] == "Let me add."
	}
	if !sawText {
		t.Errorf("no working update carried the model's first reply: %v", stream)
	}

	// Input required, answered by the next message on the task.
	asked, _ := seen["asked"].([]any)
	if len(asked) == 0 {
		t.Fatalf("asked: no events")
	}
	last := asked[len(asked)-1].(map[string]any)
	if last["state"] != "input-required" || !strings.Contains(last["text"].(string), "May I compute 6*7?") {
		t.Errorf("last event of the asking stream %v", last)
	}
	want("answered.state", "completed")
	want("answered.output", "Confirmed and computed: 42.")
	want("answered.sameTask", true)
	want("getTask.state", "completed")
	want("getTask.history", []any{"user: compute it", "agent: I need to confirm first.", "agent: May I compute 6*7?", "user: yes, go ahead", "agent: Confirmed and computed: 42."})
	want("getTaskShort", 1)

	// Approvals.
	want("approval.state", "input-required")
	want("approval.kind", "approval")
	want("approval.tool", "calculator")
	want("errors.badApproval.code", -32602)
	want("errors.badApprovalData.code", -32602)
	want("afterBadApproval", "input-required")
	want("approved.state", "completed")
	want("approved.output", "Approved: 42.")

	// Resubscribe.
	want("resubscribe.first", "task")
	want("resubscribe.firstState", "input-required")
	want("resubscribe.lastState", "completed")
	want("resubscribe.artifact", "Confirmed and computed: 42.")

	// Cancel.
	want("cancel.before", "input-required")
	want("cancel.after", "canceled")
	want("errors.cancelAgain.code", -32002)
	want("errors.messageToCanceled.code", -32004)
	want("errors.resubscribeCanceled.code", -32004)

	// Unknown tasks; a task of another agent is unknown to this one.
	want("errors.unknownTask.code", -32001)
	want("errors.unknownTask.name", "TaskNotFoundError")
	want("errors.cancelUnknown.code", -32001)
	want("errors.otherAgentsTask.code", -32001)
	want("errors.answerUnknown.code", -32001)

	// Bad JSON-RPC.
	for key, code := range map[string]int{"parse": -32700, "invalidRequest": -32600, "noMethod": -32601, "noParams": -32602,
		"unknownField": -32602, "agentRole": -32602, "filePart": -32005, "version": -32009, "push": -32003, "batch": -32600} {
		want("raw."+key+".code", code)
		want("raw."+key+".status", 200)
	}
	want("raw.noMethod.id", 2)

	// v0.3 names and shapes.
	want("legacy.sendError", nil)
	want("legacy.kind", "task")
	want("legacy.state", "completed")
	want("legacy.partKind", "text")

	// The database holds what the client did and nothing from the refused
	// calls: one session per context (send and sendAgain share one), a run
	// per task.
	var page struct {
		Sessions []struct {
			ID    string `json:"id"`
			Agent string `json:"agent"`
		} `json:"sessions"`
	}
	req, _ := http.NewRequest("GET", base+"/v1/sessions?limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+a2aToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	agents := map[string]int{}
	for _, s := range page.Sessions {
		agents[s.Agent]++
	}
	// helper: send+sendAgain, stream, legacy; asker: asked, resubscribe,
	// cancel; ops: approval.
	if agents["helper"] != 3 || agents["asker"] != 3 || agents["ops"] != 1 || len(page.Sessions) != 7 {
		t.Errorf("sessions by agent %v (%d in all), want helper 3, asker 3, ops 1", agents, len(page.Sessions))
	}
}
