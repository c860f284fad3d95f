package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// bin is the stepwise binary built once for the whole-binary tests.
var bin string

func TestMain(m *testing.M) {
	if os.Getenv("STEPWISE_TEST_WORKER") != "" {
		os.Exit(runTestWorker()) // a worker process of TestWorkersCrash
	}
	dir, err := os.MkdirTemp("", "stepwise-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "stepwise")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build stepwise: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stepwise runs the binary in dir and returns stdout, stderr and the exit code.
func stepwise(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	return stepwiseEnv(t, dir, nil, args...)
}

// stepwiseEnv is stepwise with the extra environment variables env.
func stepwiseEnv(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER="), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}
