package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The SDKs' own test suites (sdk/typescript: node's test runner;
// sdk/python: unittest) run here, against the binary this package built,
// on SQLite and on PostgreSQL: each suite starts `stepwise serve` itself
// (STEPWISE_BIN) on the database of STEPWISE_SDK_DB (a fresh PostgreSQL
// schema; unset: a SQLite file per server). A suite that fails fails the
// test with its output. Without node (python3) the test skips, unless
// STEPWISE_REQUIRE_NPM=1 (STEPWISE_REQUIRE_PYTHON=1), which makes it fail.

func TestSDKTypeScript(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal("STEPWISE_REQUIRE_NPM=1 but node is not installed")
		}
		t.Skip("node is not installed")
	}
	dir := filepath.Join("..", "..", "sdk", "typescript")
	files, err := filepath.Glob(filepath.Join(dir, "test", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no TypeScript SDK tests under %s: %v", dir, err)
	}
	args := []string{"--test", "--test-concurrency=1", "--test-reporter=spec"}
	for _, f := range files {
		args = append(args, strings.TrimPrefix(f, dir+string(filepath.Separator)))
	}
	runSDKSuite(t, dir, node, args...)
}

func TestSDKPython(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err == nil {
		out, verr := exec.Command(py, "-c", "import sys; print(sys.version_info >= (3, 10))").Output()
		if verr != nil || strings.TrimSpace(string(out)) != "True" {
			err = exec.ErrNotFound
		}
	}
	if err != nil {
		if os.Getenv("STEPWISE_REQUIRE_PYTHON") == "1" {
			t.Fatal("STEPWISE_REQUIRE_PYTHON=1 but python3 ≥ 3.10 is not installed")
		}
		t.Skip("python3 ≥ 3.10 is not installed")
	}
	runSDKSuite(t, filepath.Join("..", "..", "sdk", "python"), py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
}

// runSDKSuite runs one suite in dir on SQLite, then on PostgreSQL.
func runSDKSuite(t *testing.T, dir, prog string, args ...string) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			env := append(os.Environ(), "STEPWISE_BIN="+bin, "STEPWISE_SDK_DB=", "STEPWISE_DB=", "STEPWISE_SERVER=",
				"PYTHONDONTWRITEBYTECODE=1", "STEPWISE_SDK_SEED="+strconv.FormatInt(time.Now().UnixNano()%100000, 10))
			if db == "postgres" {
				env = append(env, "STEPWISE_SDK_DB="+postgresSchemaDSN(t))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, prog, args...)
			cmd.Dir = dir
			cmd.Env = env
			cmd.WaitDelay = 10 * time.Second
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s (%s): %v\n%s", filepath.Base(prog), strings.Join(args, " "), db, err, out)
			}
			t.Logf("%s suite passed on %s in %s", filepath.Base(dir), db, time.Since(start).Round(time.Millisecond))
		})
	}
}
