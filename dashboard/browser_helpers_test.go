package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/dashboard"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/worker"
)

// env is a Stepwise server with the dashboard on a loopback httptest
// server, over a SQLite store in a temporary directory.
type env struct {
	eng *stepwise.Engine
	st  store.Store
	url string
}

// envOptions adjust newEnvWith.
type envOptions struct {
	agents []*stepwise.Agent
	// extra answers /v1/steps/ and /v1/attachments/ before the server
	// (test doubles of endpoints this server does not have yet).
	extra http.Handler
	// wrap wraps the whole handler (e.g. to cut streams).
	wrap func(http.Handler) http.Handler
	// tokens are the server's bearer tokens.
	tokens []string
	// workers, when set, serves the worker protocol with it (built on
	// the env's engine).
	workers func(*stepwise.Engine) *worker.Service
}

// newEnv starts an engine with agents, the API and the dashboard.
func newEnv(tb testing.TB, agents []*stepwise.Agent, extra http.Handler) *env {
	tb.Helper()
	return newEnvWith(tb, envOptions{agents: agents, extra: extra})
}

func newEnvWith(tb testing.TB, o envOptions) *env {
	tb.Helper()
	agents, extra := o.agents, o.extra
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "stepwise.db")})
	if err != nil {
		tb.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := stepwise.New(stepwise.Config{Store: st, Agents: agents, PollInterval: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	var workers *worker.Service
	if o.workers != nil {
		workers = o.workers(eng)
		tb.Cleanup(func() { _ = workers.Close() })
	}
	srv, err := server.New(server.Config{Engine: eng, Logger: quiet, Heartbeat: time.Second, Tokens: o.tokens, Workers: workers})
	if err != nil {
		tb.Fatal(err)
	}
	var h http.Handler = srv.WithDashboard(dashboard.Config{})
	if extra != nil {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.Handle("/v1/steps/", extra)
		mux.Handle("/v1/attachments/", extra)
		h = mux
	}
	if o.wrap != nil {
		h = o.wrap(h)
	}
	ts := httptest.NewServer(h)
	tb.Cleanup(func() {
		srv.Close()
		ts.Close()
		_ = eng.Close()
		_ = st.Close()
	})
	return &env{eng: eng, st: st, url: ts.URL}
}

// browser is one Chromium shared by the tests of the package; each test
// gets its own tab.
var browser struct {
	once sync.Once
	ctx  context.Context
	err  error
	skip string
}

// chromiumPath finds Debian's Chromium (or another Chrome).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// startBrowser starts the shared browser once. Without Chromium the tests
// skip, or fail when STEPWISE_REQUIRE_CHROMIUM=1.
func startBrowser(tb testing.TB) context.Context {
	tb.Helper()
	browser.once.Do(func() {
		path := chromiumPath()
		if path == "" {
			browser.skip = "Chromium not found: install it with `apt-get install -y chromium` (Debian) to run the browser tests"
			return
		}
		dir, err := os.MkdirTemp("", "stepwise-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1440, 900),
		)
		alloc, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, _ := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			browser.err = fmt.Errorf("start %s: %w", path, err)
			return
		}
		browser.ctx = ctx
		cleanupDirs = append(cleanupDirs, dir)
	})
	if browser.skip != "" {
		if os.Getenv("STEPWISE_REQUIRE_CHROMIUM") == "1" {
			tb.Fatalf("%s (STEPWISE_REQUIRE_CHROMIUM=1)", browser.skip)
		}
		tb.Skip(browser.skip)
	}
	if browser.err != nil {
		tb.Fatal(browser.err)
	}
	return browser.ctx
}

var cleanupDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.ctx != nil {
		_ = chromedp.Cancel(browser.ctx)
	}
	for _, d := range cleanupDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

// page is a browser tab of a test, with the JavaScript exceptions it saw.
type page struct {
	tb  testing.TB
	ctx context.Context
	mu  sync.Mutex
	exc []string
}

// newPage opens a tab; the test fails if the page throws an uncaught
// exception. Actions time out after a minute.
func newPage(tb testing.TB) *page {
	tb.Helper()
	parent := startBrowser(tb)
	ctx, cancel := chromedp.NewContext(parent)
	tb.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		tb.Fatal(err)
	}
	p := &page{tb: tb, ctx: ctx}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			p.mu.Lock()
			p.exc = append(p.exc, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
			p.mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.exc {
			tb.Errorf("uncaught exception in the page: %s", e)
		}
	})
	return p
}

// do runs actions with a timeout.
func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.tb.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](p *page, expr string) T {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.tb.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is truthy.
func (p *page) waitJS(expr string) {
	p.tb.Helper()
	p.waitJSFor(expr, 30*time.Second)
}

// waitJSFor waits until a JavaScript expression is truthy, at most d.
func (p *page) waitJSFor(expr string, d time.Duration) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, d)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 2000)`))
		p.tb.Fatalf("waiting for %s: %v\npage text:\n%s", expr, err, body)
	}
}

// screenshot saves the viewport as NAME.png in the test's artifact
// directory (kept with go test -artifacts) and logs where.
func (p *page) screenshot(name string) {
	p.tb.Helper()
	buf, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.tb.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(p.tb), name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.tb.Fatal(err)
	}
	p.tb.Logf("screenshot %s", path)
}

func artifactDir(tb testing.TB) string {
	if t, ok := tb.(interface{ ArtifactDir() string }); ok {
		return t.ArtifactDir()
	}
	return tb.TempDir()
}

// js quotes a Go string as a JavaScript string literal.
func js(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "<", `\x3c`)
	return "'" + r.Replace(s) + "'"
}
