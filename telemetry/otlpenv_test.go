package telemetry_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/telemetry"
)

// The endpoint variables: the signal's own used as is, the generic one
// with /v1/traces appended, the OTLP default otherwise.
func TestOTLPEndpointFromEnv(t *testing.T) {
	for _, tc := range []struct{ generic, traces, want string }{
		{"", "", telemetry.DefaultOTLPEndpoint},
		{"http://collector:4318", "", "http://collector:4318/v1/traces"},
		{"http://collector:4318/base/", "", "http://collector:4318/base/v1/traces"},
		{"http://collector:4318", "https://other/custom", "https://other/custom"},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.generic)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tc.traces)
		x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if got := x.Endpoint(); got != tc.want {
			t.Errorf("ENDPOINT=%q TRACES_ENDPOINT=%q: endpoint %q, want %q", tc.generic, tc.traces, got, tc.want)
		}
	}
}

// Headers: percent-decoded values, the _TRACES_ variant replacing the
// generic one.
func TestOTLPHeadersFromEnv(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-generic=1")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", " Authorization = Bearer%20abc%3D ,x-tenant=acme,")
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ExportSpans(t.Context(), oneSpan()); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("Authorization") != "Bearer abc=" || h.Get("X-Tenant") != "acme" || h.Get("X-Generic") != "" ||
		h.Get("Content-Type") != "application/x-protobuf" || h.Get("User-Agent") != "stepwise-otlp-exporter" {
		t.Errorf("headers = %v", h)
	}
}

// Invalid settings are errors naming the variable, not silent defaults.
func TestOTLPConfigErrors(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "grpc://collector:4317"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "novalue"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "k=%zz"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"},
		{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "-1"},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"},
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/nonexistent/cert.pem"},
	} {
		t.Run(tc.key+"="+tc.val, func(t *testing.T) {
			t.Setenv(tc.key, tc.val)
			_, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{})
			if !errors.Is(err, telemetry.ErrOTLPConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("err = %v, want ErrOTLPConfig naming %s", err, tc.key)
			}
		})
	}
}
