package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// A full database answers 503 storage_full with Retry-After, stores
// nothing of the refused write, and goes on serving reads.
func TestStorageFullAnswers503(t *testing.T) {
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "full.db"), MaxBytes: 768 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	env := newEnvStore(t, st, []*stepwise.Agent{chatAgent("chat", "hi")})
	sess, err := env.eng.CreateSession(t.Context(), "external", "full")
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"steps":[{"kind":"user","role":"user","content":%q}]}`, strings.Repeat("x", 32<<10))
	var resp *http.Response
	for range 100 {
		resp = env.raw("POST", "/v1/sessions/"+sess.ID+"/steps", body)
		if resp.StatusCode != http.StatusCreated {
			break
		}
	}
	p := decodeProblem(t, resp)
	if resp.StatusCode != 503 || p.Code != CodeStorageFull || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("append to a full database: %d %+v Retry-After %q", resp.StatusCode, p, resp.Header.Get("Retry-After"))
	}
	got, err := env.store.SessionGet(t.Context(), &store.SessionGetParams{ID: sess.ID})
	if err != nil {
		t.Fatal(err)
	}
	steps, err := env.store.StepList(t.Context(), &store.StepListParams{SessionID: sess.ID})
	if err != nil || int64(len(steps)) != got.LastSequence {
		t.Fatalf("after the refused write: %d steps, last sequence %d (%v)", len(steps), got.LastSequence, err)
	}
	if status, data := env.call("GET", "/v1/sessions/"+sess.ID, ""); status != 200 {
		t.Fatalf("read of a full database: %d %s", status, data)
	}
}

// A PostgreSQL that stops answering (paused) or cannot be reached gets a
// 503 storage_unavailable with Retry-After within the store deadline, not
// a hang; once it is back, requests succeed again.
func TestStorageUnavailableAnswers503(t *testing.T) {
	dsn := pgtest.DSN(t)
	px := newPausableProxy(t, dsn)
	schema := fmt.Sprintf("stepwise_down_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	})
	st, err := postgres.Open(t.Context(), postgres.Config{DSN: px.dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const bound = 400 * time.Millisecond
	env := newEnvStore(t, st, []*stepwise.Agent{chatAgent("chat", "hi")}, func(c *Config) { c.StoreTimeout = bound })
	sid := finishedSession(t, env, "chat", "one")
	for _, down := range []struct {
		name string
		cut  func()
	}{{"paused", px.pause}, {"unreachable", px.drop}} {
		down.cut()
		for _, rq := range [][2]string{{"GET", "/v1/sessions/" + sid}, {"GET", "/v1/sessions"}, {"POST", "/v1/sessions"}, {"GET", "/v1/sessions/" + sid + "/steps"}} {
			start := time.Now()
			body := ""
			if rq[0] == "POST" {
				body = `{"agent":"chat"}`
			}
			resp := env.raw(rq[0], rq[1], body)
			took := time.Since(start)
			p := decodeProblem(t, resp)
			if resp.StatusCode != 503 || p.Code != CodeStorageDown || resp.Header.Get("Retry-After") != "5" || took > bound+2*time.Second {
				t.Fatalf("%s: %s %s: %d %+v Retry-After %q after %v", down.name, rq[0], rq[1], resp.StatusCode, p, resp.Header.Get("Retry-After"), took)
			}
		}
		px.resume()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp := env.raw("GET", "/v1/sessions/"+sid, "")
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the database is back but requests answer %d", down.name, resp.StatusCode)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// raw sends a request and returns the response, its body unread.
func (e *testEnv) raw(method, path, body string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

func decodeProblem(t *testing.T, resp *http.Response) Problem {
	t.Helper()
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 400 {
		return Problem{}
	}
	return decode[Problem](t, data)
}

// pausableProxy forwards TCP to a PostgreSQL server on loopback; it can
// stop forwarding (a paused server: connections open, nothing answered)
// or refuse and cut every connection (an unreachable server).
type pausableProxy struct {
	dsn    string
	target string
	ln     net.Listener

	mu     sync.Mutex
	paused bool
	down   bool
	wake   chan struct{} // closed on resume
	conns  map[net.Conn]bool
}

func newPausableProxy(t *testing.T, dsn string) *pausableProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("STEPWISE_TEST_POSTGRES %q: want a postgres:// URL with a host", dsn)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &pausableProxy{target: u.Host, ln: ln, wake: make(chan struct{}), conns: map[net.Conn]bool{}}
	u.Host = ln.Addr().String()
	px.dsn = u.String()
	go px.accept()
	t.Cleanup(func() {
		px.resume()
		ln.Close()
		px.cut()
	})
	return px
}

func (px *pausableProxy) accept() {
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		px.mu.Lock()
		down := px.down
		px.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go px.serve(c)
	}
}

func (px *pausableProxy) serve(c net.Conn) {
	up, err := net.Dial("tcp", px.target)
	if err != nil {
		c.Close()
		return
	}
	px.mu.Lock()
	px.conns[c], px.conns[up] = true, true
	px.mu.Unlock()
	go px.pipe(up, c)
	px.pipe(c, up)
}

// pipe copies from src to dst, holding each chunk while paused.
func (px *pausableProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			px.mu.Lock()
			paused, wake := px.paused, px.wake
			px.mu.Unlock()
			if paused {
				<-wake
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (px *pausableProxy) pause() {
	px.mu.Lock()
	px.paused = true
	px.mu.Unlock()
}

// drop refuses new connections and cuts the open ones.
func (px *pausableProxy) drop() {
	px.mu.Lock()
	px.down = true
	px.mu.Unlock()
	px.cut()
}

func (px *pausableProxy) cut() {
	px.mu.Lock()
	defer px.mu.Unlock()
	for c := range px.conns {
		c.Close()
		delete(px.conns, c)
	}
}

func (px *pausableProxy) resume() {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.paused {
		close(px.wake)
		px.wake = make(chan struct{})
	}
	px.paused, px.down = false, false
}
