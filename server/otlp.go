package server

import (
	"net/http"

	"github.com/stepwise-run/stepwise/otlpingest"
)

// The OTLP/HTTP receiver: POST /v1/traces and POST /v1/logs turn GenAI
// spans and log records of any framework into steps (package otlpingest,
// docs/otlp_ingest.md). Errors use the OTLP format (a google.rpc.Status
// body), not problem+json, as OTLP exporters expect.

func (s *Server) registerOTLP() {
	s.handle(http.MethodPost, "/v1/traces", func(w http.ResponseWriter, r *http.Request) error {
		s.otlp.ServeTraces(w, r, s.cfg.MaxOTLPBytes)
		return nil
	})
	s.handle(http.MethodPost, "/v1/logs", func(w http.ResponseWriter, r *http.Request) error {
		s.otlp.ServeLogs(w, r, s.cfg.MaxOTLPBytes)
		return nil
	})
}

// OTLP returns the server's span ingester (for tests and embedders).
func (s *Server) OTLP() *otlpingest.Ingester { return s.otlp }

func otlpOps() []apiOp {
	errs := []int{401}
	return []apiOp{
		{method: "POST", path: "/v1/traces", id: "otlpTraces", otlp: "ExportTraceServiceRequest", status: 200, resp: "ExportTraceServiceResponse", errors: errs,
			summary: "OTLP/HTTP trace receiver: GenAI spans (OpenTelemetry GenAI, OpenInference, Vercel AI SDK) become steps. Protobuf or JSON, gzip; errors (400, 413, 415, 503) are google.rpc.Status bodies"},
		{method: "POST", path: "/v1/logs", id: "otlpLogs", otlp: "ExportLogsServiceRequest", status: 200, resp: "ExportLogsServiceResponse", errors: errs,
			summary: "OTLP/HTTP logs receiver: gen_ai.* message events linked to spans supply their messages. Protobuf or JSON, gzip; errors as for /v1/traces"},
	}
}

func otlpSchemas() obj {
	partial := func(field string) obj {
		return object(false, nil, obj{"partialSuccess": object(false, nil, obj{field: integer(), "errorMessage": str("")})})
	}
	opaque := func(desc string) obj { return obj{"type": "object", "description": desc} }
	return obj{
		"ExportTraceServiceRequest":  opaque("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest (OTLP/JSON: hex ids, enum integers)"),
		"ExportLogsServiceRequest":   opaque("opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest"),
		"ExportTraceServiceResponse": partial("rejectedSpans"),
		"ExportLogsServiceResponse":  partial("rejectedLogRecords"),
		"OTLPStatus":                 object(false, []string{"code", "message"}, obj{"code": integer(), "message": str("google.rpc.Status")}),
	}
}
