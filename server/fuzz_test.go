package server

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// The fuzz targets run their seed corpus in every go test; fuzz them with
// e.g. go test -fuzz FuzzIngest -fuzztime 30s ./server/.

func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{"", "0:0", "12:3", "7", " 4:5 ", "-1:0", "1:-1", "x", "1:2:3", ":", "1:", ":1", "+3:+4",
		"9223372036854775807:9223372036854775807", "9223372036854775808:0", "1\x00:2", "١:٢"} {
		f.Add(s, "")
		f.Add("", s)
	}
	env := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, header, after string) {
		pos, err := streamPosition(header, after)
		if err != nil {
			var ae *apiError
			if p, _ := problemOf(err); p.Status != 400 || p.Code != CodeInvalidPosition || !errorsAs(err, &ae) {
				t.Fatalf("%q %q: %v", header, after, err)
			}
		} else {
			// A position round-trips through its event id.
			back, err := stepwise.ParsePosition(pos.String())
			if err != nil || back != pos || pos.Seq < 0 || pos.Idx < 0 {
				t.Fatalf("%q %q: %v → %q → %v %v", header, after, pos, pos.String(), back, err)
			}
		}
		if p, err := stepwise.ParsePosition(header); err == nil && strings.TrimSpace(header) != "" {
			if got, err2 := streamPosition(header, "garbage"); err2 != nil || got != p {
				t.Fatalf("header %q not preferred: %v %v", header, got, err2)
			}
		}
		// Through the handler: 400 for a bad position, else 404 for the
		// unknown session; never anything else.
		for _, e := range env.targets {
			req := httptest.NewRequest("GET", "/v1/sessions/nope/events", nil)
			req.Header["Last-Event-Id"] = []string{header}
			req.URL.RawQuery = "after=" + urlEscape(after)
			rec := httptest.NewRecorder()
			e.srv.ServeHTTP(rec, req)
			if rec.Code != 400 && rec.Code != 404 {
				t.Fatalf("%s: %q %q: status %d %s", e.name, header, after, rec.Code, rec.Body)
			}
		}
	})
}

func FuzzDecodeRunRequest(f *testing.F) {
	for _, s := range []string{`{"agent":"chat","input":"hi"}`, `{"agent":"chat","input":"hi","state":{"a":1},"title":"t"}`,
		`{"agent":"chat","session_id":"x"}`, `{"agent":"ghost"}`, `{}`, `[]`, `null`, `{"agent":"chat","input":"hi"}{}`,
		`{"agent":"chat","extra":true}`, `{"agent":"chat","state":"s"}`, `{"agent":"chat","state":null}`, "\xff", `{"agent":"chat","session_id":"a b"}`} {
		f.Add([]byte(s))
	}
	env := newFuzzEnv(f)
	allowed := []int{201, 400, 404, 409, 413, 415, 422}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, e := range env.targets {
			rec := e.post("/v1/runs", body)
			if !slices.Contains(allowed, rec.Code) {
				t.Fatalf("%s: %q: status %d %s", e.name, body, rec.Code, rec.Body)
			}
			checkProblemBody(t, rec)
		}
	})
}

func FuzzIngest(f *testing.F) {
	for _, s := range []string{`{"steps":[{"kind":"user","role":"user","content":"hi"}]}`,
		`{"steps":[{"kind":"llm","role":"assistant","tool_calls":[{"id":"1","name":"f","arguments":{}}]},{"kind":"tool","role":"tool","tool_call_id":"1","content":"x"}]}`,
		`{"steps":[{"kind":"user","sequence":1}]}`, `{"steps":[{"kind":"nope"}]}`, `{"steps":[]}`, `{"steps":[{"v":9}]}`, `{"steps":[{"kind":"user","metrics":{"duration_us":-5}}]}`,
		`{"steps":[{"kind":"user","created_at":"not a time"}]}`, `{"steps":[{"kind":"user","vector":[1e400]}]}`, `{"steps":[{"kind":"user","id":"x"},{"kind":"user","id":"x"}]}`,
		`{"steps":[{"kind":"input","status":"waiting","inputs":{"prompt":"?"}}]}`, `{"steps":[{"kind":"user","status":"weird"}]}`, `{"steps":[{"kind":"user","role":"martian"}]}`,
		`{"steps":[{"kind":"user","role":"user","content":"nul \u0000 inside"}]}`, `{"steps":[{"kind":"user","role":"user","content":"bad \ud800 surrogate"}]}`} {
		f.Add([]byte(s))
	}
	env := newFuzzEnv(f)
	ctx := context.Background()
	sessions := make([]string, len(env.targets))
	for i, e := range env.targets {
		sess, err := e.eng.CreateSession(ctx, "external", "fuzz")
		if err != nil {
			f.Fatal(err)
		}
		sessions[i] = sess.ID
	}
	allowed := []int{201, 400, 409, 413, 422}
	f.Fuzz(func(t *testing.T, body []byte) {
		for i, e := range env.targets {
			fuzzIngestOne(t, e, sessions[i], body, allowed)
		}
	})
}

func fuzzIngestOne(t *testing.T, e *fuzzTarget, sid string, body []byte, allowed []int) {
	ctx := context.Background()
	before, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: sid})
	if err != nil {
		t.Fatal(err)
	}
	rec := e.post("/v1/sessions/"+sid+"/steps", body)
	if !slices.Contains(allowed, rec.Code) {
		t.Fatalf("%s: %q: status %d %s", e.name, body, rec.Code, rec.Body)
	}
	checkProblemBody(t, rec)
	after, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: sid})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != 201 {
		if after.LastSequence != before.LastSequence {
			t.Fatalf("%s: %q refused with %d but the session grew from %d to %d", e.name, body, rec.Code, before.LastSequence, after.LastSequence)
		}
		return
	}
	out := decode[wire.StepList](t, rec.Body.Bytes())
	for _, s := range out.Steps {
		if s.SessionID != sid || s.Sequence < 1 || s.Sequence > after.LastSequence {
			t.Fatalf("%s: ingested %+v into session at %d", e.name, s, after.LastSequence)
		}
		got, err := e.store.StepGet(ctx, &store.StepGetParams{SessionID: sid, Sequence: s.Sequence})
		if err != nil || got.ID != s.ID {
			t.Fatalf("%s: step %d not readable: %v", e.name, s.Sequence, err)
		}
	}
}

func FuzzAGUIInput(f *testing.F) {
	for _, s := range []string{`{"threadId":"t1","runId":"r","messages":[{"id":"1","role":"user","content":"hi"}]}`,
		`{"threadId":"t2","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"text","text":"hi"}]}],"state":{},"tools":[],"context":[{"description":"d","value":"v"}],"forwardedProps":{}}`,
		`{"threadId":"t3","runId":"r","messages":[],"resume":[{"interruptId":"x","status":"resolved","payload":1}]}`,
		`{"threadId":"","runId":"r","messages":[]}`, `{"threadId":"t","runId":"r","messages":[{"role":7}]}`, `{"threadId":"t","runId":"r","messages":[],"resume":[1]}`} {
		f.Add([]byte(s))
	}
	env := newFuzzEnv(f)
	allowed := []int{200, 400, 404, 409, 413, 415, 422}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, e := range env.targets {
			rec := e.post("/v1/agui/chat", body)
			if !slices.Contains(allowed, rec.Code) {
				t.Fatalf("%s: %q: status %d %s", e.name, body, rec.Code, rec.Body)
			}
			checkProblemBody(t, rec)
			if rec.Code == 200 && !bytes.Contains(rec.Body.Bytes(), []byte(`"RUN_STARTED"`)) {
				t.Fatalf("%s: %q: stream without RUN_STARTED: %s", e.name, body, rec.Body)
			}
		}
	})
}

func FuzzPathQuery(f *testing.F) {
	for _, s := range []string{"x", "%ff", "%c3%28", "%00", "a%00b", "%ed%a0%80", "ok", "%e2%82%ac"} {
		f.Add(s, "agent="+s)
		f.Add("s", "cursor="+s+"&limit=1")
		f.Add(s, s+"=1")
	}
	env := newFuzzEnv(f)
	paths := []string{"/v1/sessions/%s", "/v1/runs/%s", "/v1/sessions/%s/steps", "/v1/agents/%s", "/v1/sessions?x=%s", "/v1/metrics?x=%s", "/v1/dashboard/sessions?x=%s"}
	f.Fuzz(func(t *testing.T, segment, query string) {
		if strings.ContainsAny(segment, "/?#") || strings.ContainsAny(query, "#") {
			return
		}
		for _, e := range env.targets {
			for _, p := range paths {
				target := strings.Replace(p, "%s", segment, 1)
				if strings.Contains(target, "?") {
					target += "&" + query
				} else {
					target += "?" + query
				}
				if _, err := url.ParseRequestURI(target); err != nil {
					return
				}
				rec := httptest.NewRecorder()
				e.srv.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
				if rec.Code >= 500 {
					t.Fatalf("%s: GET %s: status %d %s", e.name, target, rec.Code, rec.Body)
				}
				checkProblemBody(t, rec)
			}
		}
	})
}

// fuzzEnv is one server per store driver: memory, SQLite and, with
// STEPWISE_TEST_POSTGRES set, PostgreSQL; each input goes to all of them.
type fuzzEnv struct {
	targets []*fuzzTarget
}

type fuzzTarget struct {
	name  string
	srv   *Server
	eng   *stepwise.Engine
	store store.Store
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	stores := map[string]store.Store{"memory": newMemoryStore(), "sqlite": openSQLite(f)}
	if os.Getenv("STEPWISE_TEST_POSTGRES") != "" || os.Getenv("STEPWISE_REQUIRE_POSTGRES") == "1" {
		stores["postgres"] = openPostgres(f)
	}
	env := &fuzzEnv{}
	for _, name := range []string{"memory", "sqlite", "postgres"} {
		st, ok := stores[name]
		if !ok {
			continue
		}
		eng, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{chatAgent("chat", "hello")}})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { _ = eng.Close() })
		srv, err := New(Config{Engine: eng, MaxBodyBytes: 64 << 10, Logger: discardLogger()})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(srv.Close)
		env.targets = append(env.targets, &fuzzTarget{name: name, srv: srv, eng: eng, store: st})
	}
	return env
}

func (e *fuzzTarget) post(path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	return rec
}

// checkProblemBody checks that an error response is a problem.
func checkProblemBody(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code < 400 {
		return
	}
	if rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d with content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	p := decode[Problem](t, rec.Body.Bytes())
	if p.Status != rec.Code || p.Code == "" || p.Code == CodeInternal {
		t.Fatalf("problem %+v", p)
	}
}
