package telemetry_test

import (
	"bytes"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stepwise-run/stepwise/telemetry"
)

// script is an OTLP/HTTP receiver answering each POST with the next
// scripted status (200 once the script is spent) and decoding accepted
// bodies with the collector's own ExportTraceServiceRequest.
type script struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header // set on every answer
	body     []byte      // answer body (200 included)
	attempts int
	got      []*coltrace.ExportTraceServiceRequest
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	status := http.StatusOK
	if len(s.statuses) > 0 {
		status, s.statuses = s.statuses[0], s.statuses[1:]
	}
	for k, v := range s.header {
		w.Header()[k] = v
	}
	if status == http.StatusOK {
		req := &coltrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			status = http.StatusBadRequest
		} else {
			s.got = append(s.got, req)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(s.body)
}

func (s *script) counts() (attempts, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, len(s.got)
}

var (
	tid  = trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sid  = trace.SpanID{1, 1, 1, 1, 1, 1, 1, 1}
	psid = trace.SpanID{2, 2, 2, 2, 2, 2, 2, 2}
	lsid = trace.SpanID{3, 3, 3, 3, 3, 3, 3, 3}
	t0   = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
)

func oneSpan() []sdktrace.ReadOnlySpan {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return tracetest.SpanStubs{{Name: "one", SpanContext: sc, StartTime: t0, EndTime: t0.Add(time.Second),
		Resource: resource.NewSchemaless(attribute.String("service.name", "s"))}}.Snapshots()
}

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

// Every field of a span, every attribute type, and the grouping by
// resource and scope, as the official collector types decode them.
func TestOTLPExporterWire(t *testing.T) {
	rc := &script{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := trace.ParseTraceState("k=v")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, Remote: true})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: lsid})
	resA := resource.NewWithAttributes("https://schema/a", attribute.String("service.name", "a"))
	resB := resource.NewSchemaless(attribute.String("service.name", "b"))
	scope := instrumentation.Scope{Name: "scope", Version: "1.0", SchemaURL: "https://schema/s",
		Attributes: attribute.NewSet(attribute.Bool("x", true))}
	stubs := tracetest.SpanStubs{
		{Name: "full", SpanContext: sc, Parent: parent, SpanKind: trace.SpanKindClient, StartTime: t0, EndTime: t0.Add(time.Second),
			Attributes: []attribute.KeyValue{attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 1.5),
				attribute.String("s", "x"), attribute.ByteSlice("y", []byte{0, 1}), attribute.BoolSlice("bs", []bool{true, false}),
				attribute.Int64Slice("is", []int64{1, 2}), attribute.Float64Slice("fs", []float64{0.5}),
				attribute.StringSlice("ss", []string{"p", "q"}), attribute.Slice("sl", attribute.IntValue(3), attribute.StringValue("r")),
				attribute.Map("m", attribute.String("k", "v")), {Key: "e"}},
			Events:            []sdktrace.Event{{Name: "ev", Time: t0.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.Int("n", 1)}, DroppedAttributeCount: 2}},
			Links:             []sdktrace.Link{{SpanContext: link, Attributes: []attribute.KeyValue{attribute.String("l", "1")}, DroppedAttributeCount: 1}},
			Status:            sdktrace.Status{Code: codes.Error, Description: "broke"},
			DroppedAttributes: 3, DroppedEvents: 4, DroppedLinks: 5, Resource: resA, InstrumentationScope: scope},
		{Name: "ok", SpanContext: sc, SpanKind: trace.SpanKindServer, StartTime: t0, EndTime: t0,
			Status: sdktrace.Status{Code: codes.Ok}, Resource: resA, InstrumentationScope: scope},
		{Name: "other scope", SpanContext: sc, SpanKind: trace.SpanKindProducer, Resource: resA, InstrumentationScope: instrumentation.Scope{Name: "two"}},
		{Name: "other resource", SpanContext: sc, SpanKind: trace.SpanKindConsumer, Resource: resB, InstrumentationScope: scope},
	}
	if err := x.ExportSpans(t.Context(), stubs.Snapshots()); err != nil {
		t.Fatal(err)
	}
	sampled := uint32(trace.FlagsSampled) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	arr := func(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	i64 := func(n int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
	}
	bl := func(b bool) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
	}
	dbl := func(f float64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
	}
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	scopePB := &commonpb.InstrumentationScope{Name: "scope", Version: "1.0", Attributes: []*commonpb.KeyValue{kv("x", bl(true))}}
	start, end := uint64(t0.UnixNano()), uint64(t0.Add(time.Second).UnixNano())
	full := &tracepb.Span{TraceId: tid[:], SpanId: sid[:], TraceState: "k=v", ParentSpanId: psid[:],
		Flags: sampled | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK), Name: "full", Kind: tracepb.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: start, EndTimeUnixNano: end,
		Attributes: []*commonpb.KeyValue{kv("b", bl(true)), kv("i", i64(-7)), kv("f", dbl(1.5)), kv("s", str("x")),
			kv("y", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1}}}),
			kv("bs", arr(bl(true), bl(false))), kv("is", arr(i64(1), i64(2))), kv("fs", arr(dbl(0.5))), kv("ss", arr(str("p"), str("q"))),
			kv("sl", arr(i64(3), str("r"))),
			kv("m", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("k", str("v"))}}}}),
			kv("e", &commonpb.AnyValue{})},
		DroppedAttributesCount: 3, DroppedEventsCount: 4, DroppedLinksCount: 5,
		Events: []*tracepb.Span_Event{{Name: "ev", TimeUnixNano: uint64(t0.Add(time.Millisecond).UnixNano()),
			Attributes: []*commonpb.KeyValue{kv("n", i64(1))}, DroppedAttributesCount: 2}},
		Links: []*tracepb.Span_Link{{TraceId: tid[:], SpanId: lsid[:], Attributes: []*commonpb.KeyValue{kv("l", str("1"))},
			DroppedAttributesCount: 1, Flags: uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)}},
		Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "broke"}}
	plain := func(name string, kind tracepb.Span_SpanKind, s, e uint64, st tracepb.Status_StatusCode) *tracepb.Span {
		return &tracepb.Span{TraceId: tid[:], SpanId: sid[:], TraceState: "k=v", Flags: sampled, Name: name, Kind: kind,
			StartTimeUnixNano: s, EndTimeUnixNano: e, Status: &tracepb.Status{Code: st}}
	}
	want := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("a"))}}, SchemaUrl: "https://schema/a",
			ScopeSpans: []*tracepb.ScopeSpans{
				{Scope: scopePB, SchemaUrl: "https://schema/s", Spans: []*tracepb.Span{full,
					plain("ok", tracepb.Span_SPAN_KIND_SERVER, start, start, tracepb.Status_STATUS_CODE_OK)}},
				{Scope: &commonpb.InstrumentationScope{Name: "two"}, Spans: []*tracepb.Span{
					plain("other scope", tracepb.Span_SPAN_KIND_PRODUCER, 0, 0, tracepb.Status_STATUS_CODE_UNSET)}},
			}},
		{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("b"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: scopePB, SchemaUrl: "https://schema/s", Spans: []*tracepb.Span{
				plain("other resource", tracepb.Span_SPAN_KIND_CONSUMER, 0, 0, tracepb.Status_STATUS_CODE_UNSET)}}}},
	}}
	if len(rc.got) != 1 {
		t.Fatalf("%d exports accepted, want 1", len(rc.got))
	}
	if !proto.Equal(rc.got[0], want) {
		t.Errorf("decoded export:\n%s\nwant:\n%s", prototext.Format(rc.got[0]), prototext.Format(want))
	}
}

// 429, 502, 503 and 504 are retried (after Retry-After when given); the
// spans arrive once.
func TestOTLPExporterRetries(t *testing.T) {
	rc := &script{statuses: []int{503, 429, 502, 504}, header: http.Header{"Retry-After": {"0"}}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL, RetryInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ExportSpans(t.Context(), oneSpan()); err != nil {
		t.Fatal(err)
	}
	if a, ok := rc.counts(); a != 5 || ok != 1 {
		t.Errorf("%d attempts, %d accepted; want 5 and 1", a, ok)
	}
}

// A refused export is not retried; the error carries the receiver's
// google.rpc.Status message.
func TestOTLPExporterRefused(t *testing.T) {
	var st []byte
	st = protowire.AppendTag(st, 1, protowire.VarintType)
	st = protowire.AppendVarint(st, 3)
	st = protowire.AppendTag(st, 2, protowire.BytesType)
	st = protowire.AppendString(st, "span too big")
	rc := &script{statuses: []int{400}, header: http.Header{"Content-Type": {"application/x-protobuf"}}, body: st}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL, RetryInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = x.ExportSpans(t.Context(), oneSpan())
	if !errors.Is(err, telemetry.ErrOTLPExport) || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "span too big") {
		t.Errorf("err = %v", err)
	}
	if a, _ := rc.counts(); a != 1 {
		t.Errorf("%d attempts, want 1", a)
	}
}

// Retries stop once RetryMaxElapsed would be exceeded: the waits double
// from 1 ms (1, 2, 4 … 128 ms with jitter) and cannot all fit in 200 ms.
func TestOTLPExporterGivesUp(t *testing.T) {
	rc := &script{statuses: make([]int, 100)}
	for i := range rc.statuses {
		rc.statuses[i] = http.StatusServiceUnavailable
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL, RetryInterval: time.Millisecond,
		RetryMaxElapsed: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = x.ExportSpans(t.Context(), oneSpan())
	if !errors.Is(err, telemetry.ErrOTLPExport) || !strings.Contains(err.Error(), "gave up") {
		t.Errorf("err = %v", err)
	}
	if a, ok := rc.counts(); a < 2 || a > 20 || ok != 0 {
		t.Errorf("%d attempts, %d accepted; want 2..20 and 0", a, ok)
	}
}

// OTEL_EXPORTER_OTLP_TIMEOUT bounds an attempt against a receiver that
// never answers.
func TestOTLPExporterTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "50")
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL, RetryMaxElapsed: -1})
	if err != nil {
		t.Fatal(err)
	}
	err = x.ExportSpans(t.Context(), oneSpan())
	if !errors.Is(err, telemetry.ErrOTLPExport) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("err = %v", err)
	}
}

// OTEL_EXPORTER_OTLP_CERTIFICATE names the CA of an https receiver.
func TestOTLPExporterTLS(t *testing.T) {
	rc := &script{}
	srv := httptest.NewTLSServer(rc)
	defer srv.Close()
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL, RetryMaxElapsed: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ExportSpans(t.Context(), oneSpan()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted receiver: err = %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
	x, err = telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL, RetryMaxElapsed: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ExportSpans(t.Context(), oneSpan()); err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.counts(); ok != 1 {
		t.Errorf("%d accepted, want 1", ok)
	}
}

// A partial success is logged.
func TestOTLPExporterPartialSuccess(t *testing.T) {
	var ps, resp []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, 1)
	ps = protowire.AppendTag(ps, 2, protowire.BytesType)
	ps = protowire.AppendString(ps, "bad span id")
	resp = protowire.AppendTag(resp, 1, protowire.BytesType)
	resp = protowire.AppendBytes(resp, ps)
	rc := &script{header: http.Header{"Content-Type": {"application/x-protobuf"}}, body: resp}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var logs bytes.Buffer
	x, err := telemetry.NewOTLPExporter(telemetry.OTLPConfig{Endpoint: srv.URL, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ExportSpans(t.Context(), oneSpan()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "rejected=1") || !strings.Contains(logs.String(), `message="bad span id"`) {
		t.Errorf("log = %q", logs.String())
	}
}
