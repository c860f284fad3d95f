package otlpingest_test

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
)

// The export envelope is decoded by hand (see envelope.go): fields other
// than resource_spans are skipped as protobuf skips unknown fields, the
// JSON form takes both field spellings, and the responses read back with
// the collector's own types.
func TestExportEnvelope(t *testing.T) {
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{Settle: -1}})
	t0 := time.Now()

	// Protobuf with unknown fields of every wire type around resource_spans.
	b := protowire.AppendTag(nil, 7, protowire.VarintType)
	b = protowire.AppendVarint(b, 42)
	b = append(b, export(chatSpan(31, 1, 0, t0, "proto"))...)
	b = protowire.AppendTag(b, 8, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 1)
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendString(b, "extension")
	b = protowire.AppendTag(b, 10, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 1)
	if code, body := e.post("/v1/traces", pb, b); code != 200 || len(body) != 0 {
		t.Fatalf("unknown fields: %d %q", code, body)
	}
	if got := render(e.waitSteps(otlpingest.TraceSessionID(fmt.Sprintf("%032x", 31)), 2)); !strings.Contains(got, `content="proto"`) {
		t.Fatalf("steps:\n%s", got)
	}

	// JSON, proto field name, unknown top-level field; one span rejected.
	okSpan, bad := chatSpan(32, 1, 0, t0, "json"), chatSpan(32, 2, 0, t0, "bad")
	bad.SpanId = []byte{1}
	rs, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{okSpan, bad}}}})
	// protojson writes bytes as base64; OTLP/JSON ids are hex.
	js := strings.NewReplacer(
		b64(okSpan.TraceId), hex.EncodeToString(okSpan.TraceId), b64(okSpan.SpanId), hex.EncodeToString(okSpan.SpanId),
		b64(bad.SpanId), hex.EncodeToString(bad.SpanId)).Replace(string(rs))
	code, body := e.post("/v1/traces", "application/json", []byte(`{"future":{"x":1},"resource_spans":[`+js+`]}`))
	var resp coltracepb.ExportTraceServiceResponse
	if err := protojson.Unmarshal(body, &resp); code != 200 || err != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1 ||
		!strings.Contains(resp.GetPartialSuccess().GetErrorMessage(), "invalid span id") {
		t.Fatalf("JSON export: %d %s %v", code, body, err)
	}
	if got := render(e.waitSteps(otlpingest.TraceSessionID(fmt.Sprintf("%032x", 32)), 2)); !strings.Contains(got, `content="json"`) {
		t.Fatalf("steps:\n%s", got)
	}

	// Protobuf partial success, read with the collector's type.
	code, body = e.post("/v1/traces", pb, export(bad))
	resp.Reset()
	if err := proto.Unmarshal(body, &resp); code != 200 || err != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1 {
		t.Fatalf("proto partial success: %d %v %v", code, &resp, err)
	}

	// Logs: both encodings of the envelope, read with the collector's types.
	lr := &logspb.ResourceLogs{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{EventName: "other.event"}}}}}
	lb, _ := proto.Marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{lr}})
	if code, body := e.post("/v1/logs", pb, lb); code != 200 || len(body) != 0 {
		t.Errorf("proto logs: %d %q", code, body)
	}
	lj, _ := protojson.Marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{lr}})
	code, body = e.post("/v1/logs", "application/json", lj)
	var lresp collogspb.ExportLogsServiceResponse
	if err := protojson.Unmarshal(body, &lresp); code != 200 || err != nil {
		t.Errorf("JSON logs: %d %s %v", code, body, err)
	}
	if code, body := e.post("/v1/logs", "application/json", []byte(`{"resourceLogs":[{"scopeLogs":7}]}`)); code != 400 || !strings.Contains(string(body), "malformed OTLP JSON") {
		t.Errorf("malformed JSON logs: %d %s", code, body)
	}

	// Malformed envelopes: a truncated length, a broken ResourceSpans, a
	// JSON array where the object goes, a wrongly typed field.
	for name, body := range map[string][]byte{
		"truncated":      append(protowire.AppendTag(nil, 1, protowire.BytesType), 50, 1, 2),
		"bad element":    protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0x0a, 0xff}),
		"bad tag":        {0x00},
		"json array":     []byte(`[]`),
		"json not array": []byte(`{"resourceSpans": {}}`),
	} {
		ctype := pb
		if name[0] == 'j' {
			ctype = "application/json"
		}
		if code, body := e.post("/v1/traces", ctype, body); code != 400 || !strings.Contains(string(body), "malformed") {
			t.Errorf("%s: %d %q", name, code, body)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
