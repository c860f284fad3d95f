package sqlite_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/store/storetest"
)

func open(t *testing.T, cfg sqlite.Config) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	}, storetest.Options{
		Exclusive: true,
		Reopen: func(t *testing.T, st store.Store) store.Store {
			path := st.(*sqlite.Store).Path()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, sqlite.Config{Path: path})
		},
	})
}

func TestConformanceFull(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("synchronous=FULL run skipped in -short mode")
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db"), Synchronous: "full", Readers: 1})
	}, storetest.Options{Concurrency: 8, PerGoroutine: 5, Exclusive: true})
}

func TestCorruptFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "junk.db")
	junk := make([]byte, 8192)
	rand.Read(junk)
	if err := os.WriteFile(path, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, ReadOnly: ro})
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Open(junk, readonly=%v) = %v, want ErrCorrupt", ro, err)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a database") {
			t.Errorf("error %q should name the file and say it is not a database", err)
		}
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(junk) {
		t.Error("Open modified a file that is not a database")
	}
	// A lock taken by the failed open must have been released.
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, sqlite.Config{Path: path})
}

func TestForeignDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "other.db")
	// Build a valid SQLite file with someone else's table.
	db := mustRawDB(t, path)
	if _, err := db.Exec(`CREATE TABLE accounts (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "no stepwise_schema table") {
		t.Fatalf("Open(foreign db) = %v, want ErrCorrupt naming the missing schema", err)
	}
}

func TestSecondWriterLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	first := open(t, sqlite.Config{Path: path})
	_, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	want := "stepwise: database " + path + " is in use by another stepwise process (pid " + itoa(os.Getpid()) + ")"
	if err.Error() != want {
		t.Errorf("error = %q\n want %q", err, want)
	}
	// Readers take no lock and see the writer's data.
	ctx := t.Context()
	if _, err := first.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	ro := open(t, sqlite.Config{Path: path, ReadOnly: true})
	if _, err := ro.SessionGet(ctx, &store.SessionGetParams{ID: "s1"}); err != nil {
		t.Errorf("read-only SessionGet: %v", err)
	}
	_, err = ro.SessionCreate(ctx, &store.SessionCreateParams{ID: "s2"})
	if !errors.Is(err, sqlite.ErrReadOnly) {
		t.Errorf("read-only write = %v, want ErrReadOnly", err)
	}
	// After Close the lock is free again.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := open(t, sqlite.Config{Path: path})
	if _, err := again.SessionGet(ctx, &store.SessionGetParams{ID: "s1"}); err != nil {
		t.Errorf("after reopen: %v", err)
	}
}

func TestReopenKeepsDataAndMigrationsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "s.db")
	st := open(t, sqlite.Config{Path: path})
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "x", SessionID: "s1",
		Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for range 3 {
		st = open(t, sqlite.Config{Path: path})
		got, err := st.StepGet(ctx, &store.StepGetParams{SessionID: "s1", Sequence: 1})
		if err != nil || got.Content != "hi" {
			t.Fatalf("after reopen: %v, %v", got, err)
		}
		st.Close()
	}
	db := mustRawDB(t, path)
	defer db.Close()
	var n, applied int
	if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE version_id > 0) FROM stepwise_schema`).Scan(&n, &applied); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(files) {
		t.Errorf("stepwise_schema holds %d applied migrations after 4 opens, want %d (one per file)", applied, len(files))
	}
}

// A database with no data yet — empty, or left by a creation killed before
// its schema committed — reads as empty through a read-only open (never
// "corrupt" or "no such table"), and the next writable open creates it.
func TestReadOnlyNoDataYet(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(path string){
		"empty file": func(path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"header only": func(path string) {
			db := mustRawDB(t, path)
			db.Exec(`PRAGMA user_version = 1`)
			db.Close()
		},
		"version table only, in its log": func(path string) {
			db := mustRawDB(t, path)
			db.SetMaxOpenConns(1)
			for _, q := range []string{`PRAGMA journal_mode=WAL`, `PRAGMA wal_autocheckpoint=0`,
				`CREATE TABLE stepwise_schema (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')))`} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			// Keep the log as a killed process leaves it: copy the files
			// while the connection is open.
			for _, suffix := range []string{"", "-wal"} {
				b, err := os.ReadFile(path + suffix)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path+suffix+".kept", b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			for _, suffix := range []string{"", "-wal"} {
				if err := os.Rename(path+suffix+".kept", path+suffix); err != nil {
					t.Fatal(err)
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "half.db")
			setup(path)
			ro, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only Open: %v, want an empty store", err)
			}
			page, err := ro.SessionList(t.Context(), &store.SessionListParams{})
			if err != nil || len(page.Sessions) != 0 {
				t.Errorf("SessionList = %v, %v; want no sessions", page, err)
			}
			if _, err := ro.SessionGet(t.Context(), &store.SessionGetParams{ID: "x"}); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("SessionGet = %v, want ErrNotFound", err)
			}
			_, err = ro.SessionCreate(t.Context(), &store.SessionCreateParams{ID: "x"})
			if !errors.Is(err, sqlite.ErrReadOnly) {
				t.Errorf("write through the read-only store = %v, want ErrReadOnly", err)
			}
			ro.Close()
			st := open(t, sqlite.Config{Path: path})
			if _, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: "s"}); err != nil {
				t.Fatalf("the writable open did not create a usable database: %v", err)
			}
			st.Close()
			ro2, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro2.Close()
			if _, err := ro2.SessionGet(t.Context(), &store.SessionGetParams{ID: "s"}); err != nil {
				t.Errorf("read-only open after creation: %v", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, cfg := range []sqlite.Config{
		{},
		{Path: filepath.Join(dir, "a.db"), Synchronous: "OFF"},
		{Path: filepath.Join(dir, "a.db"), Readers: -1},
		{Path: filepath.Join(dir, "a.db"), BusyTimeout: -1},
	} {
		if _, err := sqlite.Open(t.Context(), cfg); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a.db")); !os.IsNotExist(err) {
		t.Errorf("an invalid config created the database: %v", err)
	}
	def := sqlite.Config{Path: "x"}.WithDefaults()
	if def.Synchronous != "NORMAL" || def.Readers != 4 || def.BusyTimeout != sqlite.DefaultBusyTimeout {
		t.Errorf("defaults = %+v", def)
	}
}

func TestCancelledWriteNotWritten(t *testing.T) {
	t.Parallel()
	st := open(t, sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled create = %v", err)
	}
	if _, err := st.SessionGet(t.Context(), &store.SessionGetParams{ID: "s1"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancelled create was written: %v", err)
	}
}

func TestBusyIsLocked(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "s.db")
	st := open(t, sqlite.Config{Path: path, BusyTimeout: 50 * time.Millisecond})
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	// A foreign connection (not a stepwise process) holds the write lock.
	db := mustRawDB(t, path)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	_, err = st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s2"})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("write under a foreign lock = %v, want ErrLocked", err)
	}
	if _, err := st.SessionGet(ctx, &store.SessionGetParams{ID: "s1"}); err != nil {
		t.Errorf("reads must not wait for the write lock (WAL): %v", err)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s2"}); err != nil {
		t.Errorf("write after the lock is gone: %v", err)
	}
}
