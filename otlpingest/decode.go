package otlpingest

import (
	"context"
	"strings"
	"time"

	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// logRecord is a GenAI log record linked to a span.
type logRecord struct {
	traceID, spanID string
	ev              event
}

// Traces records the spans of one OTLP trace export (the resource_spans of
// an ExportTraceServiceRequest). Spans without a valid
// trace or span id are rejected (counted in the result); spans no
// convention recognises are accepted and ignored. An error means nothing
// of the export may have been recorded and it should be retried
// (ErrUnavailable).
func (in *Ingester) Traces(ctx context.Context, rss []*tracepb.ResourceSpans) (*Result, error) {
	res := &Result{}
	var spans []*span
	for _, rs := range rss {
		resAttrs := toAttrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s, msg := decodeSpan(sp)
				if s == nil {
					res.reject(1, msg)
					continue
				}
				s.res = resAttrs
				spans = append(spans, s)
			}
		}
	}
	if len(spans) == 0 {
		return res, nil
	}
	return res, in.ingestSpans(ctx, spans)
}

// Logs records the GenAI log records of one OTLP logs export (the
// resource_logs of an ExportLogsServiceRequest): records whose
// event name starts with "gen_ai." and that carry a trace and span id are
// attached to their span; other records are accepted and ignored.
func (in *Ingester) Logs(ctx context.Context, rls []*logspb.ResourceLogs) (*Result, error) {
	res := &Result{}
	var recs []*logRecord
	for _, rl := range rls {
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				a := toAttrs(lr.GetAttributes())
				name := lr.GetEventName()
				if name == "" {
					name = a.str("event.name")
				}
				if !strings.HasPrefix(name, "gen_ai.") {
					continue
				}
				if !validID(lr.GetTraceId(), 16) || !validID(lr.GetSpanId(), 8) {
					continue // not linked to a span: nothing to attach it to
				}
				t := lr.GetTimeUnixNano()
				if t == 0 {
					t = lr.GetObservedTimeUnixNano()
				}
				recs = append(recs, &logRecord{traceID: hexID(lr.GetTraceId()), spanID: hexID(lr.GetSpanId()),
					ev: event{name: name, time: unixNano(t), a: a, body: anyValue(lr.GetBody())}})
			}
		}
	}
	if len(recs) == 0 {
		return res, nil
	}
	return res, in.ingestLogs(ctx, recs, res)
}

func decodeSpan(sp *tracepb.Span) (*span, string) {
	if !validID(sp.GetTraceId(), 16) {
		return nil, "span with an invalid trace id (want 16 bytes, not all zero)"
	}
	if !validID(sp.GetSpanId(), 8) {
		return nil, "span with an invalid span id (want 8 bytes, not all zero)"
	}
	parent := ""
	if p := sp.GetParentSpanId(); len(p) != 0 {
		if len(p) != 8 {
			return nil, "span with an invalid parent span id (want 8 bytes)"
		}
		if validID(p, 8) {
			parent = hexID(p)
		}
	}
	s := &span{traceID: hexID(sp.GetTraceId()), spanID: hexID(sp.GetSpanId()), parentID: parent, name: sp.GetName(),
		start: unixNano(sp.GetStartTimeUnixNano()), end: unixNano(sp.GetEndTimeUnixNano()), a: toAttrs(sp.GetAttributes()),
		failed: sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR, statusMsg: sp.GetStatus().GetMessage()}
	for _, e := range sp.GetEvents() {
		s.events = append(s.events, event{name: e.GetName(), time: unixNano(e.GetTimeUnixNano()), a: toAttrs(e.GetAttributes())})
	}
	return s, ""
}

func validID(b []byte, n int) bool {
	if len(b) != n {
		return false
	}
	for _, c := range b {
		if c != 0 {
			return true
		}
	}
	return false
}

func unixNano(n uint64) time.Time {
	if n == 0 || n > 1<<63-1 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}
