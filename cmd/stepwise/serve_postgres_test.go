package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
)

// postgresSchemaDSN returns a DSN of the test server whose search_path is a
// fresh schema, dropped when the test ends. Without STEPWISE_TEST_POSTGRES
// the test skips, or fails under STEPWISE_REQUIRE_POSTGRES=1.
func postgresSchemaDSN(t *testing.T) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "swcli_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = c.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
			c.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestServeOnPostgresObservation runs `stepwise serve --db postgres://…`
// and uses, through HTTP, everything the SQLite store serves beside the
// steps: evals, annotations, attachments and their content, step events,
// datasets, experiments (created by a second process, the CLI, on the same
// database) and GET /v1/search over the vectors the server's memory
// worker embedded. Before the PostgreSQL driver had these, they answered
// 501 and search 500.
func TestServeOnPostgresObservation(t *testing.T) {
	t.Parallel()
	dsn := postgresSchemaDSN(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "--db", dsn, "serve", "--addr", addr)
	srv.Dir = dir
	srv.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(base + "/v1/agents"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start: %s", srvErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	call := func(want int, method, path, ctype string, body []byte) []byte {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
		}
		return data
	}

	out, errOut, code := stepwise(t, dir, "--server", base, "run", "--agent", "analyst", "--input", "What is the population of Paris and Berlin?")
	if code != 0 || !strings.Contains(out, "completed") {
		t.Fatalf("remote run: exit %d\n%s\n%s", code, out, errOut)
	}
	session := runLine.FindStringSubmatch(out)[1]
	var steps struct {
		Steps []struct {
			ID string `json:"id"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(call(200, "GET", "/v1/sessions/"+session+"/steps", "", nil), &steps); err != nil || len(steps.Steps) < 2 {
		t.Fatalf("steps: %v %+v", err, steps)
	}
	step := steps.Steps[1].ID

	// Evals of a step, listed back.
	call(201, "POST", "/v1/steps/"+step+"/evals", "application/json", []byte(`{"name":"helpful","score":0.75}`))
	if got := call(200, "GET", "/v1/steps/"+step+"/evals", "", nil); !bytes.Contains(got, []byte(`"helpful"`)) {
		t.Errorf("evals: %s", got)
	}
	call(422, "POST", "/v1/steps/"+step+"/evals", "application/json", []byte(`{"name":"helpful","score":7}`))
	// Annotations.
	call(200, "PUT", "/v1/steps/"+step+"/annotations", "application/json", []byte(`{"goal":"find both populations"}`))
	if got := call(200, "GET", "/v1/steps/"+step+"/annotations", "", nil); !bytes.Contains(got, []byte("find both populations")) {
		t.Errorf("annotations: %s", got)
	}
	// An attachment: stored by content hash, served back byte for byte.
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 100)...)
	var att struct {
		ID       string `json:"id"`
		BlobHash string `json:"blob_hash"`
	}
	if err := json.Unmarshal(call(201, "POST", "/v1/steps/"+step+"/attachments?name=shot.png&kind=screenshot", "image/png", png), &att); err != nil || att.BlobHash == "" {
		t.Fatalf("attachment: %v %+v", err, att)
	}
	if got := call(200, "GET", "/v1/attachments/"+att.ID+"/content", "", nil); !bytes.Equal(got, png) {
		t.Errorf("attachment content: %d bytes, want %d", len(got), len(png))
	}
	call(200, "GET", "/v1/steps/"+step+"/events", "", nil)
	// A dataset over HTTP; an experiment run by the CLI, another process
	// on the same database; both read back through the server.
	call(201, "POST", "/v1/datasets?name=qa", "application/x-ndjson",
		[]byte("{\"input\":\"What is the population of Paris?\",\"expected\":\"2.1 million\"}\n"))
	if got := call(200, "GET", "/v1/datasets", "", nil); !bytes.Contains(got, []byte(`"qa"`)) {
		t.Errorf("datasets: %s", got)
	}
	out, errOut, code = stepwise(t, dir, "--db", dsn, "eval", "run", "--dataset", "qa", "--agent", "analyst", "--name", "baseline")
	if code != 0 {
		t.Fatalf("eval run: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := call(200, "GET", "/v1/experiments/baseline", "", nil); !bytes.Contains(got, []byte(`"completed"`)) {
		t.Errorf("experiment: %s", got)
	}
	// Search: the server's memory worker embeds the committed steps in
	// the background; wait until they are searchable.
	deadline = time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/v1/search?q="+url.QueryEscape("population of Paris")+"&k=3", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && bytes.Contains(data, []byte(session)) {
			break
		}
		if resp.StatusCode != 200 && resp.StatusCode != 404 || time.Now().After(deadline) {
			t.Fatalf("search: %d %s", resp.StatusCode, data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// `stepwise bench --store postgres` measures the engine loop on the
// server of --db, in a schema of its own that it drops afterwards.
func TestBenchOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := postgresSchemaDSN(t)
	out, errOut, code := stepwise(t, t.TempDir(), "--db", dsn, "bench", "--store", "postgres", "--steps", "40", "--runs", "2", "--json")
	var res struct {
		Results []struct {
			Store string  `json:"store"`
			Steps int     `json:"steps"`
			Rate  float64 `json:"steps_per_s"`
		} `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Results) != 1 || res.Results[0].Store != "postgres" {
		t.Fatalf("bench: exit %d\n%s\n%s", code, out, errOut)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'stepwise\_bench\_%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d bench schemas left behind (%v)", left, err)
	}
	if _, errOut, code := stepwise(t, t.TempDir(), "--db", "memory:", "bench", "--store", "postgres"); code == 0 || !strings.Contains(errOut, "--db postgres://") {
		t.Errorf("bench --store postgres without a PostgreSQL --db: exit %d %q", code, errOut)
	}
}
