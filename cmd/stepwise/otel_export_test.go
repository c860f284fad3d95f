package main_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stepwise-run/stepwise/telemetry"
)

// TestDemoExportsOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, the binary
// exports the demo run as OTLP/HTTP protobuf (gzip, the configured
// headers), decoded here with the collector's own ExportTraceServiceRequest:
// one trace for the run and its sub-agent, every span inside it, one root;
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true adds the model's
// output and the tools' arguments.
func TestDemoExportsOTLP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var spans []*tracepb.Span
	var service string
	var bad []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("X-Tenant") != "t 1" ||
			r.Header.Get("Content-Type") != "application/x-protobuf" {
			bad = append(bad, r.URL.Path+" "+r.Header.Get("Content-Encoding")+" "+r.Header.Get("X-Tenant"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		var b []byte
		if err == nil {
			b, err = io.ReadAll(zr)
		}
		req := &coltracepb.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(b, req)
		}
		if err != nil {
			bad = append(bad, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--no-serve", "--fast")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=", "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_EXPORTER_OTLP_COMPRESSION=gzip", "OTEL_EXPORTER_OTLP_HEADERS=x-tenant=t%201",
		"OTEL_SERVICE_NAME=demo-svc", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	m := runLine.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no run line:\n%s", stdout.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("bad exports: %q", bad)
	}
	if service != "demo-svc" {
		t.Errorf("service.name = %q", service)
	}
	if len(spans) < 10 {
		t.Fatalf("%d spans exported", len(spans))
	}
	trace := telemetry.TraceID(m[2]).String()
	roots, agents := 0, 0
	content := map[string]bool{}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if kv.Key == "gen_ai.output.messages" || kv.Key == "gen_ai.tool.call.arguments" {
				content[kv.Key] = kv.GetValue().GetStringValue() != ""
			}
		}
		if hex.EncodeToString(s.TraceId) != trace {
			t.Errorf("span %q in trace %x, want %s", s.Name, s.TraceId, trace)
		}
		if len(s.ParentSpanId) == 0 {
			roots++
		}
		if strings.HasPrefix(s.Name, "invoke_agent ") {
			agents++
		}
	}
	if roots != 1 || agents != 2 {
		t.Errorf("%d root spans, %d invoke_agent spans; want 1 and 2 (the run and its sub-agent)", roots, agents)
	}
	if !content["gen_ai.output.messages"] || !content["gen_ai.tool.call.arguments"] {
		t.Errorf("message content in spans %v, want output messages and tool arguments", content)
	}
}

// TestDemoBadOTLPConfig: an invalid OTEL_EXPORTER_OTLP_* value stops the
// command at start with an error naming the variable.
func TestDemoBadOTLPConfig(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--no-serve", "--fast")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=", "OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "OTEL_EXPORTER_OTLP_ENDPOINT") ||
		!strings.Contains(string(out), "not an http:// or https:// URL") {
		t.Fatalf("exit %v:\n%s", err, out)
	}
	if strings.Contains(string(out), "#1") {
		t.Errorf("the demo ran despite the invalid configuration:\n%s", out)
	}
	cmd = exec.CommandContext(ctx, bin, "demo", "--no-serve", "--fast")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=yes")
	out, err = cmd.CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=yes: want true or false") {
		t.Fatalf("capture content yes: exit %v:\n%s", err, out)
	}
}
