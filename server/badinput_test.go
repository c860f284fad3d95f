package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// eachDriver runs fn once per store driver: memory, a SQLite file, a fresh
// PostgreSQL schema (STEPWISE_TEST_POSTGRES).
func eachDriver(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("memory", func(t *testing.T) { fn(t, memory.New()) })
	t.Run("sqlite", func(t *testing.T) { fn(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, openPostgres(t)) })
}

func openSQLite(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "server.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func openPostgres(t testing.TB) store.Store {
	t.Helper()
	dsn := pgtest.DSN(t)
	schema := fmt.Sprintf("stepwise_server_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	})
	st, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// badText are escaped path or query values that no driver can store or
// look up: invalid UTF-8 (a lone byte, a truncated sequence, an encoded
// surrogate, an overlong encoding) and NUL.
var badText = []string{"%ff", "%c3%28", "%ed%a0%80", "%c0%af", "%00", "a%00b", "ok%ff"}

// TestBadTextParameters: invalid UTF-8 or NUL in any path or query
// parameter of any endpoint answers 400 invalid_parameter on every driver,
// and changes nothing.
func TestBadTextParameters(t *testing.T) {
	eachDriver(t, func(t *testing.T, st store.Store) {
		env := newEnvStore(t, st, []*stepwise.Agent{chatAgent("chat", "hi")})
		sid := finishedSession(t, env, "chat", "one")
		before, err := env.store.SessionGet(context.Background(), &store.SessionGetParams{ID: sid})
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, rt := range env.srv.routes {
			for _, bad := range badText {
				for _, path := range badPaths(rt.pattern, sid, bad) {
					env.problem(400, CodeInvalidParam, rt.method, path, "")
					checked++
				}
				for _, q := range []string{"agent=" + bad, bad + "=1", "session_id=x&cursor=" + bad, "q=" + bad} {
					env.problem(400, CodeInvalidParam, rt.method, fillPattern(rt.pattern, sid)+"?"+q, "")
					checked++
				}
			}
		}
		if checked < 500 {
			t.Fatalf("only %d requests checked", checked)
		}
		after, err := env.store.SessionGet(context.Background(), &store.SessionGetParams{ID: sid})
		if err != nil || after.LastSequence != before.LastSequence {
			t.Fatalf("refused requests changed the session: %d steps, was %d (%v)", after.LastSequence, before.LastSequence, err)
		}
		page, err := env.store.SessionList(context.Background(), &store.SessionListParams{})
		if err != nil || len(page.Sessions) != 1 {
			t.Fatalf("sessions after bad requests: %d %v", len(page.Sessions), err)
		}
	})
}

// fillPattern fills every wildcard of a route pattern with a valid value.
func fillPattern(pattern, sid string) string {
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			parts[i] = wildcardValue(p, sid)
		}
	}
	return strings.Join(parts, "/")
}

func wildcardValue(w, sid string) string {
	switch {
	case strings.Contains(w, "sequence"), strings.Contains(w, "seq"):
		return "1"
	case w == "{id}":
		return sid
	}
	return "chat"
}

// badPaths returns the pattern with each wildcard in turn set to bad.
func badPaths(pattern, sid, bad string) []string {
	var out []string
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		if !strings.HasPrefix(p, "{") {
			continue
		}
		filled := strings.Split(fillPattern(pattern, sid), "/")
		filled[i] = bad
		out = append(out, strings.Join(filled, "/"))
	}
	return out
}
