package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// ErrOTLPExport wraps the failure of an export: a refused request (its
// HTTP status and the receiver's message) or the last transport error once
// the retries are spent.
var ErrOTLPExport = errors.New("stepwise: telemetry: OTLP export failed")

// maxRetryInterval caps the exponential backoff between retries.
const maxRetryInterval = 30 * time.Second

// OTLPConfig configures an OTLPExporter. Zero fields are taken from the
// standard environment variables, the _TRACES_ variant first
// (OTEL_EXPORTER_OTLP_TRACES_HEADERS before OTEL_EXPORTER_OTLP_HEADERS),
// then from the OTLP defaults.
type OTLPConfig struct {
	// Endpoint is the URL spans are POSTed to. Default:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
	// OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces", else DefaultOTLPEndpoint.
	Endpoint string
	// Headers are set on every request (OTEL_EXPORTER_OTLP_HEADERS:
	// "k1=v1,k2=v2", values percent-encoded).
	Headers map[string]string
	// Timeout bounds each attempt (OTEL_EXPORTER_OTLP_TIMEOUT, in
	// milliseconds). Default 10 s.
	Timeout time.Duration
	// Compression is "gzip" or "none" (OTEL_EXPORTER_OTLP_COMPRESSION).
	// Default none.
	Compression string
	// RetryInterval is the first wait before retrying an export refused
	// with 429, 502, 503 or 504 or lost in transport; it doubles (with
	// jitter) up to 30 s, and a Retry-After header replaces it. Default 5 s.
	RetryInterval time.Duration
	// RetryMaxElapsed bounds the time spent retrying one export. Default
	// 1 min; negative: no retry.
	RetryMaxElapsed time.Duration
	// Client sends the requests. Default: http.DefaultTransport's
	// settings, trusting the PEM CAs of OTEL_EXPORTER_OTLP_CERTIFICATE
	// instead of the system roots when set, with
	// OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY
	// for mutual TLS.
	Client *http.Client
	// Logger receives the receiver's partial-success warnings. Default
	// slog.Default().
	Logger *slog.Logger
}

// OTLPExporter is a trace exporter (sdktrace.SpanExporter) that POSTs spans
// to an OTLP/HTTP endpoint as protobuf: the OTLP data types with the
// export request's envelope written by hand, so that neither gRPC nor the
// collector's service stubs are linked.
type OTLPExporter struct {
	cfg    OTLPConfig
	stop   context.Context
	cancel context.CancelFunc
	once   sync.Once
}

var _ sdktrace.SpanExporter = (*OTLPExporter)(nil)

// NewOTLPExporter returns an exporter configured by cfg and the
// environment; an invalid setting is an error wrapping ErrOTLPConfig.
func NewOTLPExporter(cfg OTLPConfig) (*OTLPExporter, error) {
	if err := cfg.fromEnv(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	x := &OTLPExporter{cfg: cfg}
	x.stop, x.cancel = context.WithCancel(context.Background())
	return x, nil
}

// Endpoint is the URL the exporter POSTs to.
func (x *OTLPExporter) Endpoint() string { return x.cfg.Endpoint }

// ExportSpans implements sdktrace.SpanExporter: one POST carrying all
// spans, retried as OTLPConfig says. After Shutdown it does nothing.
func (x *OTLPExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if x.stop.Err() != nil {
		return nil
	}
	rss := resourceSpans(spans)
	if len(rss) == 0 {
		return nil
	}
	body, err := encodeExport(rss)
	if err != nil {
		return err
	}
	if x.cfg.Compression == "gzip" {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("telemetry: gzip: %w", err)
		}
		body = buf.Bytes()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(x.stop, cancel)()
	return x.send(ctx, body)
}

// Shutdown implements sdktrace.SpanExporter: exports in flight are
// cancelled and later ones dropped.
func (x *OTLPExporter) Shutdown(context.Context) error {
	x.once.Do(func() {
		x.cancel()
		x.cfg.Client.CloseIdleConnections()
	})
	return nil
}

// send POSTs body until it is accepted, refused for good, or the retry
// budget or ctx runs out.
func (x *OTLPExporter) send(ctx context.Context, body []byte) error {
	start, wait := time.Now(), x.cfg.RetryInterval
	for attempt := 1; ; attempt++ {
		retry, after, err := x.post(ctx, body)
		if err == nil || !retry || x.cfg.RetryMaxElapsed < 0 {
			return err
		}
		d := after
		if d <= 0 {
			d = wait/2 + rand.N(wait/2+1)
			wait = min(2*wait, maxRetryInterval)
		}
		if time.Since(start)+d > x.cfg.RetryMaxElapsed {
			return fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%v after %d attempts)", err, context.Cause(ctx), attempt)
		case <-t.C:
		}
	}
}

// post makes one attempt; retry says whether the failure is transient, and
// after is the receiver's Retry-After.
func (x *OTLPExporter) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, x.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("%w: %v", ErrOTLPExport, err)
	}
	req.Header.Set("User-Agent", "stepwise-otlp-exporter")
	for k, v := range x.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if x.cfg.Compression == "gzip" {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := x.cfg.Client.Do(req)
	if err != nil {
		return ctx.Err() == nil, 0, fmt.Errorf("%w: %v", ErrOTLPExport, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		if n, msg := partialSuccess(b, resp.Header.Get("Content-Type")); n > 0 || msg != "" {
			x.cfg.Logger.Warn("stepwise: telemetry: OTLP receiver rejected spans", "rejected", n, "message", msg)
		}
		return false, 0, nil
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		retry, after = true, retryAfter(resp.Header.Get("Retry-After"))
	}
	msg := statusMessage(b, resp.Header.Get("Content-Type"))
	return retry, after, fmt.Errorf("%w: %s: %s", ErrOTLPExport, resp.Status, msg)
}

func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, int64(maxRetryInterval/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), maxRetryInterval)
	}
	return 0
}

func mediaType(ctype string) string {
	mt, _, _ := mime.ParseMediaType(ctype)
	return mt
}

func isJSON(ctype string) bool { return mediaType(ctype) == "application/json" }

func isProtobuf(ctype string) bool {
	mt := mediaType(ctype)
	return mt == "application/x-protobuf" || mt == "application/protobuf"
}

// statusMessage is the message of an OTLP error body (google.rpc.Status,
// field 2, in protobuf or JSON), else the body's start.
func statusMessage(b []byte, ctype string) string {
	if isJSON(ctype) {
		var st struct{ Message string }
		if json.Unmarshal(b, &st) == nil && st.Message != "" {
			return st.Message
		}
	} else if msg, ok := stringField(b, 2); ok && isProtobuf(ctype) {
		return msg
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// partialSuccess reads ExportTraceServiceResponse.partial_success (field 1:
// rejected_spans = 1, error_message = 2).
func partialSuccess(b []byte, ctype string) (int64, string) {
	if isJSON(ctype) {
		var r struct {
			PartialSuccess struct {
				RejectedSpans json.Number
				ErrorMessage  string
			}
		}
		if json.Unmarshal(b, &r) != nil {
			return 0, ""
		}
		n, _ := r.PartialSuccess.RejectedSpans.Int64()
		return n, r.PartialSuccess.ErrorMessage
	}
	ps, ok := bytesField(b, 1)
	if !isProtobuf(ctype) {
		return 0, ""
	}
	if !ok {
		return 0, ""
	}
	var n int64
	if v, ok := varintField(ps, 1); ok {
		n = int64(v)
	}
	msg, _ := stringField(ps, 2)
	return n, msg
}

// scan calls f for each field of a protobuf message until f returns false;
// it stops at the first malformed field.
func scan(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 || !f(num, typ, v, x) {
			return
		}
		b = b[n:]
	}
}

func bytesField(b []byte, want protowire.Number) (out []byte, ok bool) {
	scan(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		if num == want && typ == protowire.BytesType {
			out, ok = v, true
		}
		return true
	})
	return out, ok
}

func stringField(b []byte, want protowire.Number) (string, bool) {
	v, ok := bytesField(b, want)
	return string(v), ok
}

func varintField(b []byte, want protowire.Number) (out uint64, ok bool) {
	scan(b, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) bool {
		if num == want && typ == protowire.VarintType {
			out, ok = x, true
		}
		return true
	})
	return out, ok
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}
