package telemetry

import (
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// encodeExport is the protobuf body of an OTLP trace export: the
// ExportTraceServiceRequest message, whose only field is
// `repeated ResourceSpans resource_spans = 1`, written around the
// ResourceSpans messages so that the collector's service package (and
// gRPC with it) is not linked.
func encodeExport(rss []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, rs := range rss {
		m, err := proto.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("telemetry: encode spans: %w", err)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, nil
}

// resourceSpans groups SDK spans by resource and instrumentation scope into
// OTLP ResourceSpans, keeping the order of first appearance.
func resourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		name, version, schema string
		attrs                 attribute.Distinct
	}
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]int{}
	byScope := map[attribute.Distinct]map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := res.Equivalent()
		i, ok := byRes[rk]
		if !ok {
			i = len(out)
			byRes[rk] = i
			byScope[rk] = map[scopeKey]*tracepb.ScopeSpans{}
			out = append(out, &tracepb.ResourceSpans{
				Resource:  &resourcepb.Resource{Attributes: keyValues(res.Attributes())},
				SchemaUrl: res.SchemaURL(),
			})
		}
		sc := s.InstrumentationScope()
		sk := scopeKey{sc.Name, sc.Version, sc.SchemaURL, sc.Attributes.Equivalent()}
		ss := byScope[rk][sk]
		if ss == nil {
			ss = &tracepb.ScopeSpans{
				Scope: &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version,
					Attributes: keyValues(sc.Attributes.ToSlice())},
				SchemaUrl: sc.SchemaURL,
			}
			byScope[rk][sk] = ss
			out[i].ScopeSpans = append(out[i].ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, span(s))
	}
	return out
}

// span converts one SDK span.
func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Flags:                  spanFlags(sc.TraceFlags(), s.Parent()),
		Name:                   s.Name(),
		Kind:                   spanKind(s.SpanKind()),
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(max(s.DroppedAttributes(), 0)),
		DroppedEventsCount:     uint32(max(s.DroppedEvents(), 0)),
		DroppedLinksCount:      uint32(max(s.DroppedLinks(), 0)),
	}
	if ps := s.Parent().SpanID(); ps.IsValid() {
		p.ParentSpanId = ps[:]
	}
	switch st := s.Status(); st.Code {
	case codes.Ok:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK, Message: st.Description}
	case codes.Error:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	default:
		p.Status = &tracepb.Status{Message: st.Description}
	}
	for _, e := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{Name: e.Name, TimeUnixNano: unixNano(e.Time),
			Attributes: keyValues(e.Attributes), DroppedAttributesCount: uint32(max(e.DroppedAttributeCount, 0))})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{TraceId: ltid[:], SpanId: lsid[:],
			TraceState: l.SpanContext.TraceState().String(), Attributes: keyValues(l.Attributes),
			DroppedAttributesCount: uint32(max(l.DroppedAttributeCount, 0)),
			Flags:                  spanFlags(l.SpanContext.TraceFlags(), l.SpanContext)})
	}
	return p
}

// spanFlags are the W3C trace flags plus the bits saying whether the
// parent (or linked) context is remote.
func spanFlags(f trace.TraceFlags, parent trace.SpanContext) uint32 {
	out := uint32(f) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		out |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return out
}

func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

// anyValue converts an attribute value; every attribute type has an OTLP
// counterpart (EMPTY is an AnyValue with no value set).
func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return array(v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	}
	return &commonpb.AnyValue{}
}

func array[T any](xs []T, val func(T) attribute.Value) *commonpb.AnyValue {
	a := &commonpb.ArrayValue{Values: make([]*commonpb.AnyValue, len(xs))}
	for i, x := range xs {
		a.Values[i] = anyValue(val(x))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: a}}
}
