package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The client direction of A2A: a parent `stepwise serve` whose agent file
// names, in sub_agents, an agent of another `stepwise serve` by its A2A
// endpoint. The parent's model is relayModel: it calls the remote agent
// with the user's message, then answers with what the call returned.

const remoteToken = "remote-a2a-token"

// relayModel is an OpenAI-compatible chat-completions server on loopback.
// A request whose last message is a tool result is answered with prefix
// and that result; any other with a call of tool (when set) whose input is
// the last user message, else with prefix and that message. While hold is
// set, each request is reported on arrived and waits until hold is closed.
type relayModel struct {
	url     string
	tool    string
	prefix  string
	hold    chan struct{}
	arrived chan struct{}
	mu      sync.Mutex
	calls   int
}

func newRelayModel(t *testing.T, tool, prefix string, hold bool) *relayModel {
	t.Helper()
	m := &relayModel{tool: tool, prefix: prefix, arrived: make(chan struct{}, 16)}
	if hold {
		m.hold = make(chan struct{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(m.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.url = "http://" + ln.Addr().String()
	return m
}

func (m *relayModel) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

func (m *relayModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	if m.hold != nil {
		m.arrived <- struct{}{}
		select {
		case <-m.hold:
		case <-r.Context().Done():
			return
		}
	}
	last := req.Messages[len(req.Messages)-1]
	text, _ := last.Content.(string)
	if last.Role != "tool" {
		for _, msg := range req.Messages {
			if s, ok := msg.Content.(string); ok && msg.Role == "user" {
				text = s
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = strconv.Quote(finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"relay\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fin)
	}
	if last.Role != "tool" && m.tool != "" {
		args, _ := json.Marshal(map[string]string{"input": text})
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":`+strconv.Quote(m.tool)+`,"arguments":""}}]}`, "")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+strconv.Quote(string(args))+`}}]}`, "")
		chunk(`{}`, "tool_calls")
	} else {
		chunk(`{"role":"assistant","content":`+strconv.Quote(m.prefix+text)+`}`, "")
		chunk(`{}`, "stop")
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// serveWith starts `stepwise serve` on db (a --db value) with env and
// the extra arguments, and waits until it answers.
func serveWith(t *testing.T, dir, db string, env []string, args ...string) *serveProc {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, append([]string{"--db", db, "serve", "--addr", addr}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER="), env...)
	p := &serveProc{cmd: cmd, url: "http://" + addr}
	cmd.Stderr = io.MultiWriter(os.Stderr, &p.log)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(p.url + "/v1/health"); err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case <-exited:
			t.Fatalf("serve exited: %s", p.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start: %s", p.log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling for the port; nothing to wait on
	}
}

// kill stops the process with SIGKILL and waits for it to be gone.
func (p *serveProc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	// serveWith's goroutine waits for the process; once reaped, signals
	// fail.
	deadline := time.Now().Add(30 * time.Second)
	for p.cmd.Process.Signal(syscall.Signal(0)) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the killed serve did not exit")
		}
		time.Sleep(10 * time.Millisecond) // polling for the exit
	}
}

// a2aAPI calls the HTTP API with the token (when set) and decodes the answer.
func a2aAPI(t *testing.T, method, url, token, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s, want %d\n%s", method, url, resp.Status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, url, err, b)
		}
	}
}

type apiStep struct {
	Kind     string          `json:"kind"`
	Status   string          `json:"status"`
	Content  string          `json:"content"`
	ToolName string          `json:"tool_name"`
	Inputs   json.RawMessage `json:"inputs"`
	Outputs  json.RawMessage `json:"outputs"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func sessionSteps(t *testing.T, base, token, session string) []apiStep {
	t.Helper()
	var list struct {
		Steps []apiStep `json:"steps"`
	}
	a2aAPI(t, "GET", base+"/v1/sessions/"+session+"/steps", token, "", http.StatusOK, &list)
	return list.Steps
}

type remoteRun struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Output    string `json:"output"`
}

// startLead starts a run of the parent agent.
func startLead(t *testing.T, base, input string) remoteRun {
	t.Helper()
	var created struct {
		Run remoteRun `json:"run"`
	}
	body, _ := json.Marshal(map[string]string{"agent": "lead", "input": input})
	a2aAPI(t, "POST", base+"/v1/runs", "", string(body), http.StatusCreated, &created)
	return created.Run
}

// waitRun polls the run until its status is one of want (or it finished).
func waitRun(t *testing.T, base, id string, want ...string) remoteRun {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r remoteRun
		a2aAPI(t, "GET", base+"/v1/runs/"+id, "", "", http.StatusOK, &r)
		for _, w := range want {
			if r.Status == w {
				return r
			}
		}
		if r.Status == "completed" || r.Status == "failed" || r.Status == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("run %s is %s (output %q), want %v", id, r.Status, r.Output, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the API for a state change
	}
}

// remoteTasks counts the remote agent's sessions (one per task started
// without a context) and the user steps in them (one per task).
func remoteTasks(t *testing.T, base string) (sessions, tasks int) {
	t.Helper()
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	a2aAPI(t, "GET", base+"/v1/sessions?agent=researcher", remoteToken, "", http.StatusOK, &list)
	for _, s := range list.Sessions {
		for _, st := range sessionSteps(t, base, remoteToken, s.ID) {
			if st.Kind == "user" {
				tasks++
			}
		}
	}
	return len(list.Sessions), tasks
}

// writeFiles writes name→content files into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// a2aPair is a remote serve with the agent researcher and a parent serve
// with the agent lead, whose sub-agent researcher is the remote one.
type a2aPair struct {
	dir            string
	remote, parent *serveProc
	relay          *relayModel
	parentDB       string
	parentEnv      []string
	parentArgs     []string
}

// startPair starts the remote with the researcher agent file body (in dir,
// with the extra files) and the parent on parentDB, reaching the remote
// at remoteURL(remote) when set, else at its endpoint.
func startPair(t *testing.T, researcher string, files map[string]string, parentDB string, via func(remote string) string, parentArgs ...string) *a2aPair {
	t.Helper()
	p := &a2aPair{dir: t.TempDir()}
	rdir := filepath.Join(p.dir, "remote")
	if err := os.Mkdir(rdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if files == nil {
		files = map[string]string{}
	}
	files["researcher.yaml"] = researcher
	writeFiles(t, rdir, files)
	p.remote = serveWith(t, rdir, "sqlite:"+filepath.Join(rdir, "remote.db"), []string{"A2A_RELAY_KEY=k"},
		"--token", remoteToken, "--agent", filepath.Join(rdir, "researcher.yaml"))
	endpoint := p.remote.url + "/a2a/researcher"
	if via != nil {
		endpoint = via(p.remote.url) + "/a2a/researcher"
	}
	p.relay = newRelayModel(t, "researcher", "Researcher: ", false)
	writeFiles(t, p.dir, map[string]string{"lead.yaml": fmt.Sprintf(`name: lead
model: openai:relay
model_options: {base_url: %q, api_key_env: A2A_RELAY_KEY}
retry: {max_attempts: 3, initial_interval: 50ms, max_interval: 100ms}
sub_agents:
  - a2a: %s
    name: researcher
    token_env: REMOTE_TOKEN
`, p.relay.url+"/v1", endpoint)})
	p.parentDB = parentDB
	p.parentEnv = []string{"A2A_RELAY_KEY=k", "REMOTE_TOKEN=" + remoteToken}
	p.parentArgs = append([]string{"--agent", filepath.Join(p.dir, "lead.yaml")}, parentArgs...)
	p.parent = serveWith(t, p.dir, parentDB, p.parentEnv, p.parentArgs...)
	return p
}

const plainResearcher = `name: researcher
description: Looks things up.
model: scripted:researcher-script.yaml
`

const plainScript = `turns:
  - text: "Paris is the capital of France."
`

// toolStep is the parent session's one tool step for the tool name.
func toolStep(t *testing.T, steps []apiStep, name string) apiStep {
	t.Helper()
	var found []apiStep
	for _, s := range steps {
		if s.Kind == "tool" && s.ToolName == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d tool steps of %s, want 1: %+v", len(found), name, steps)
	}
	return found[0]
}

// a2aProxy is a reverse proxy on loopback in front of a remote serve that
// reports the messageId of every SendStreamingMessage on sends. The
// remote sees the proxy's host, so its card names the proxy.
func a2aProxy(t *testing.T, target string, sends chan<- string) string {
	return a2aLimitedProxy(t, target, sends, 0)
}

// a2aLimitedProxy is a2aProxy answering its first limited JSON-RPC calls
// with 429 Too Many Requests (Retry-After: 1).
func a2aLimitedProxy(t *testing.T, target string, sends chan<- string, limited int) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.Out.Host = pr.In.Host
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			limit := limited > 0
			limited--
			mu.Unlock()
			if limit {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var req struct {
				Method string `json:"method"`
				Params struct {
					Message struct {
						MessageID string `json:"messageId"`
					} `json:"message"`
				} `json:"params"`
			}
			if json.Unmarshal(b, &req) == nil && req.Method == "SendStreamingMessage" {
				sends <- req.Params.Message.MessageID
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// recv receives from ch, failing the test after a minute without a value.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("nothing arrived within a minute")
	}
	var zero T
	return zero
}
