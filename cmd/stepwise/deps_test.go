package main_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryDependencies: modules (and standard-library packages) the binary must not link (see "First run
// and binary size" in docs/PERFORMANCE.md). gRPC, grpc-gateway and genproto
// came with the OTLP exporter and the collector's service packages; the
// provider SDKs with the model adapters. Test-only imports do not count:
// `go list -deps` follows the binary's imports only.
func TestBinaryDependencies(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	denied := []string{
		"google.golang.org/grpc",
		"github.com/grpc-ecosystem/grpc-gateway/v2",
		"google.golang.org/genproto/googleapis/api",
		"google.golang.org/genproto/googleapis/rpc",
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace",
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp",
		"github.com/openai/openai-go",
		"github.com/anthropics/anthropic-sdk-go",
	}
	// Standard-library packages the binary has no use for: httptest is a
	// test helper (internal/fakeopenai and `bench queries` serve and record
	// with net/http directly).
	deniedStd := []string{"net/http/httptest"}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 100 {
		t.Fatalf("go list -deps listed %d packages; expected the whole binary:\n%s", len(lines), out)
	}
	for _, line := range lines {
		pkg, mod, _ := strings.Cut(line, " ")
		if slices.Contains(deniedStd, pkg) {
			t.Errorf("the binary links %s", pkg)
		}
		for _, d := range denied {
			if mod == d || strings.HasPrefix(mod, d+"/") || strings.HasPrefix(pkg, "go.opentelemetry.io/proto/otlp/collector/") {
				t.Errorf("the binary links %s (module %s)", pkg, mod)
				break
			}
		}
	}
}

// TestBinaryBuildOrder: the SQLite driver's compile chain (modernc.org/libc,
// then modernc.org/sqlite/lib: the two longest compiles of a cold build, one
// after the other) comes first in the order the go command prefers among
// ready compile actions — the depth-first order `go list -deps` prints —
// so that on an empty build cache it runs beside the rest of the binary
// instead of alone at the end (internal/buildorder; "First run and binary
// size" in docs/PERFORMANCE.md).
func TestBinaryBuildOrder(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	at := map[string]int{}
	for i, p := range pkgs {
		at[p] = i
	}
	lib, ok := at["modernc.org/sqlite/lib"]
	if !ok {
		t.Fatalf("go list -deps does not list modernc.org/sqlite/lib:\n%s", out)
	}
	for i, p := range pkgs[:lib] {
		if strings.HasPrefix(p, "github.com/stepwise-run/stepwise") {
			t.Errorf("%s (#%d) comes before modernc.org/sqlite/lib (#%d) in the build order; cmd/stepwise must import internal/buildorder, sorted before its other Stepwise imports", p, i+1, lib+1)
		}
	}
}
