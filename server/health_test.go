package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// Deleting the SQLite file under a running server: /v1/health turns
// unhealthy and says why, and writes are refused with 503
// storage_unavailable instead of going into the unlinked file.
func TestHealthAfterDatabaseFileDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "served.db")
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	env := newEnvStore(t, st, []*stepwise.Agent{chatAgent("chat", "hi")})
	if status, body := env.call("GET", "/v1/health", ""); status != 200 || decode[Health](t, body).Status != "ok" {
		t.Fatalf("health of a fresh server: %d %s", status, body)
	}
	sid := finishedSession(t, env, "chat", "one")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	resp := env.raw("GET", "/v1/health", "")
	p := decodeProblem(t, resp)
	if resp.StatusCode != 503 || p.Code != CodeStorageDown || !strings.Contains(p.Detail, "no longer exists") || !strings.Contains(p.Detail, path) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("health after the file was deleted: %d %+v", resp.StatusCode, p)
	}
	for _, rq := range [][3]string{{"POST", "/v1/sessions", `{"agent":"chat"}`}, {"POST", "/v1/runs", `{"agent":"chat","input":"two","session_id":"` + sid + `"}`}} {
		resp := env.raw(rq[0], rq[1], rq[2])
		p := decodeProblem(t, resp)
		if resp.StatusCode != 503 || p.Code != CodeStorageDown {
			t.Fatalf("%s %s after the file was deleted: %d %+v", rq[0], rq[1], resp.StatusCode, p)
		}
	}
	// Reads of what the open store holds still answer.
	if status, body := env.call("GET", "/v1/sessions/"+sid, ""); status != 200 {
		t.Fatalf("read after the file was deleted: %d %s", status, body)
	}
}
