package main_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chaosAgents writes the agent files of one server incarnation: the parent
// "chaos" (parallel record calls and a helper sub-agent, then a guarded call
// that needs a human's approval) and its sub-agent "helper" (two parallel
// record calls). The header tells the recorder which incarnation called.
func chaosAgents(t *testing.T, dir, mcpURL, tag string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mcp := fmt.Sprintf("mcp_servers:\n  - name: side\n    url: %s\n    headers: {X-Chaos-Server: %q}\n", mcpURL, tag)
	files := map[string]string{
		"chaos.yaml": "name: chaos\ninstructions: Record notes, ask the helper, then record a guarded note.\nmodel: scripted:chaos.script.yaml\n" + mcp +
			"sub_agents: [helper.yaml]\napprovals: {guarded: always}\nlimits: {max_steps: 100}\nretry: {max_attempts: 5, initial_interval: 10ms}\n",
		"helper.yaml": "name: helper\ndescription: Records two more notes.\ninstructions: Record.\nmodel: scripted:helper.script.yaml\n" + mcp +
			"retry: {max_attempts: 5, initial_interval: 10ms}\n",
		"chaos.script.yaml": `loop: true
turns:
  - text: "Recording two notes and asking the helper."
    tool_calls:
      - {name: record, arguments: {note: "a"}}
      - {name: record, arguments: {note: "b"}}
      - {name: helper, arguments: {input: "record two more"}}
    delay: 20ms
    chunk: 8
    chunk_delay: 2ms
  - text: "Now the guarded note."
    tool_calls:
      - {name: guarded, arguments: {note: "c"}}
    delay: 20ms
  - text: "All notes recorded."
    delay: 20ms
`,
		"helper.script.yaml": `loop: true
turns:
  - tool_calls:
      - {name: record, arguments: {note: "d"}}
      - {name: record, arguments: {note: "e"}}
    delay: 10ms
  - text: "Helper recorded d and e."
    delay: 10ms
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "chaos.yaml")
}

// chaosServer is one of the three `stepwise serve` slots: a fixed loopback
// address, restarted as a new incarnation after each kill.
type chaosServer struct {
	idx  int
	addr string

	mu    sync.Mutex
	cmd   *exec.Cmd
	inc   int           // current incarnation (1-based)
	up    bool          // answering HTTP
	ready chan struct{} // closed when the current incarnation answers
	done  chan struct{} // closed when the current process exited
	pids  map[string]int
}

// fleet is the three servers and what the test needs to start them.
type fleet struct {
	t       *testing.T
	dir     string
	dsn     string
	mcpURL  string
	lease   time.Duration
	servers []*chaosServer

	mu     sync.Mutex
	killed map[string]bool // "server.incarnation" tags that were SIGKILLed
	stderr bytes.Buffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newFleet(t *testing.T, n int, dsn, mcpURL string, lease time.Duration) *fleet {
	f := &fleet{t: t, dir: t.TempDir(), dsn: dsn, mcpURL: mcpURL, lease: lease, killed: map[string]bool{}}
	for i := range n {
		f.servers = append(f.servers, &chaosServer{idx: i + 1, addr: freeAddr(t), pids: map[string]int{}})
	}
	t.Cleanup(f.stopAll)
	return f
}

func (s *chaosServer) tag() string { return fmt.Sprintf("%d.%d", s.idx, s.inc) }

// start launches a new incarnation of s and returns at once; s.ready closes
// when it answers HTTP.
func (f *fleet) start(s *chaosServer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inc++
	tag := s.tag()
	agent := chaosAgents(f.t, filepath.Join(f.dir, "s"+tag), f.mcpURL, tag)
	cmd := exec.Command(bin, "--db", f.dsn, "serve", "--addr", s.addr, "--agent", agent, "--lease", f.lease.String())
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	cmd.Stderr = &lockedWriter{f: f, tag: tag}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	s.cmd, s.up = cmd, false
	s.pids[tag] = cmd.Process.Pid
	ready, done := make(chan struct{}), make(chan struct{})
	s.ready, s.done = ready, done
	go func() { _ = cmd.Wait(); close(done) }()
	go func() {
		c := &http.Client{Timeout: time.Second}
		for {
			select {
			case <-done:
				return
			default:
			}
			if resp, err := c.Get("http://" + s.addr + "/v1/agents"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					s.mu.Lock()
					if s.cmd == cmd {
						s.up = true
					}
					s.mu.Unlock()
					close(ready)
					return
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond): // a readiness probe, not synchronisation
			}
		}
	}()
}

// kill SIGKILLs the current incarnation of s and waits for it to exit.
func (f *fleet) kill(s *chaosServer) {
	s.mu.Lock()
	cmd, done, tag := s.cmd, s.done, s.tag()
	s.up = false
	s.mu.Unlock()
	f.mu.Lock()
	f.killed[tag] = true
	f.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// live returns the servers answering HTTP now.
func (f *fleet) live() []*chaosServer {
	var out []*chaosServer
	for _, s := range f.servers {
		s.mu.Lock()
		if s.up {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}

// awaitReady waits until every server's current incarnation answers. An
// incarnation started while the database was restarting or paused may
// have exited, unable to open it: it is started again, as a supervisor
// would, up to three times.
func (f *fleet) awaitReady(ctx context.Context) error {
	for _, s := range f.servers {
		for tries := 0; ; tries++ {
			s.mu.Lock()
			ready, done := s.ready, s.done
			s.mu.Unlock()
			select {
			case <-ready:
			case <-done:
				if tries < 3 {
					f.start(s)
					continue
				}
				return fmt.Errorf("server %s exited before it was ready, %d times: %s", s.addr, tries+1, f.stderrTail())
			case <-ctx.Done():
				return fmt.Errorf("server %s not ready: %w", s.addr, ctx.Err())
			}
			break
		}
	}
	return nil
}

func (f *fleet) wasKilled(tag string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed[tag]
}

func (f *fleet) stopAll() {
	for _, s := range f.servers {
		s.mu.Lock()
		cmd, done := s.cmd, s.done
		s.up = false
		s.mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
}

func (f *fleet) stderrTail() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.stderr.Bytes()
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// logOf returns the lines of the servers' stderr that name id.
func (f *fleet) logOf(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for line := range strings.Lines(f.stderr.String()) {
		if strings.Contains(line, id) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// lockedWriter collects a server incarnation's stderr, each line begun
// with its tag.
type lockedWriter struct {
	f      *fleet
	tag    string
	midway bool // the last write ended inside a line
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	for line := range strings.Lines(string(p)) {
		if !w.midway {
			w.f.stderr.WriteString("[" + w.tag + "] ")
		}
		w.f.stderr.WriteString(line)
		w.midway = !strings.HasSuffix(line, "\n")
	}
	return len(p), nil
}
