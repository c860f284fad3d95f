package otlpingest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// DefaultMaxBodyBytes is the default limit of an export body, after gzip
// decompression.
const DefaultMaxBodyBytes = 16 << 20

// gRPC status codes used in OTLP error bodies.
const (
	codeInvalidArgument = 3
	codeResourceExhaust = 8
	codeUnavailable     = 14
)

// httpError is an OTLP/HTTP failure: a status code and a google.rpc.Status
// body.
type httpError struct {
	status, code int
	msg          string
}

func (e *httpError) Error() string { return e.msg }

// ServeTraces handles POST /v1/traces (OTLP/HTTP, protobuf or JSON, gzip
// or not). maxBytes bounds the body after decompression (<= 0: default).
func (in *Ingester) ServeTraces(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	in.serve(w, r, maxBytes, "rejectedSpans", func(body []byte, isJSON bool) (*Result, error) {
		var rss []*tracepb.ResourceSpans
		var err error
		newRS := func() *tracepb.ResourceSpans { return &tracepb.ResourceSpans{} }
		if isJSON {
			rss, err = decodeJSONEnvelope(body, "resourceSpans", "resource_spans", newRS)
		} else {
			rss, err = decodeEnvelope(body, newRS)
		}
		if err != nil {
			return nil, malformed(isJSON, err)
		}
		return in.Traces(r.Context(), rss)
	})
}

// ServeLogs handles POST /v1/logs like ServeTraces.
func (in *Ingester) ServeLogs(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	in.serve(w, r, maxBytes, "rejectedLogRecords", func(body []byte, isJSON bool) (*Result, error) {
		var rls []*logspb.ResourceLogs
		var err error
		newRL := func() *logspb.ResourceLogs { return &logspb.ResourceLogs{} }
		if isJSON {
			rls, err = decodeJSONEnvelope(body, "resourceLogs", "resource_logs", newRL)
		} else {
			rls, err = decodeEnvelope(body, newRL)
		}
		if err != nil {
			return nil, malformed(isJSON, err)
		}
		return in.Logs(r.Context(), rls)
	})
}

// serve reads the body and hands it to ingest, which returns an *httpError
// for a malformed export and any other error for a failure to record it.
func (in *Ingester) serve(w http.ResponseWriter, r *http.Request, maxBytes int64, countField string,
	ingest func(body []byte, isJSON bool) (*Result, error)) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBodyBytes
	}
	isJSON, err := contentType(r)
	if err != nil {
		writeStatus(w, false, err)
		return
	}
	body, err := readBody(w, r, maxBytes)
	if err == nil && isJSON {
		if body, err = hexIDsToBase64(body); err != nil {
			err = malformed(true, err)
		}
	}
	var res *Result
	if err == nil {
		res, err = ingest(body, isJSON)
		var he *httpError
		if err != nil && !errors.As(err, &he) {
			in.cfg.Logger.Error("stepwise: otlp ingest", "path", r.URL.Path, "err", err)
			err = &httpError{status: http.StatusServiceUnavailable, code: codeUnavailable, msg: "the export could not be recorded; retry"}
			w.Header().Set("Retry-After", "1")
		}
	}
	if err != nil {
		writeStatus(w, isJSON, err)
		return
	}
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(encodeResponse(res, isJSON, countField))
}

func contentType(r *http.Request) (bool, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case err != nil && r.Header.Get("Content-Type") != "":
		return false, &httpError{http.StatusUnsupportedMediaType, codeInvalidArgument, "unreadable Content-Type"}
	case mt == "application/x-protobuf" || mt == "application/protobuf":
		return false, nil
	case mt == "application/json":
		return true, nil
	}
	return false, &httpError{http.StatusUnsupportedMediaType, codeInvalidArgument,
		fmt.Sprintf("Content-Type %q is not supported; OTLP/HTTP uses application/x-protobuf or application/json", r.Header.Get("Content-Type"))}
}

func tooLarge(limit int64) error {
	return &httpError{http.StatusRequestEntityTooLarge, codeResourceExhaust, fmt.Sprintf("the export is larger than %d bytes; send smaller batches", limit)}
}

// readBody reads the body, gunzipping it when Content-Encoding says so;
// both the sent and the decompressed size are bounded by limit.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, readErr(err, limit, "invalid gzip body")
		}
		defer zr.Close()
		src = io.LimitReader(zr, limit+1)
	default:
		return nil, &httpError{http.StatusUnsupportedMediaType, codeInvalidArgument, fmt.Sprintf("Content-Encoding %q is not supported (gzip or none)", enc)}
	}
	b, err := io.ReadAll(src)
	if err != nil {
		return nil, readErr(err, limit, "invalid gzip body")
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(limit)
	}
	return b, nil
}

func readErr(err error, limit int64, msg string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(limit)
	}
	return &httpError{http.StatusBadRequest, codeInvalidArgument, msg + ": " + err.Error()}
}

// malformed is the 400 answer to an export that cannot be decoded.
func malformed(isJSON bool, err error) error {
	if isJSON {
		return &httpError{http.StatusBadRequest, codeInvalidArgument, "malformed OTLP JSON: " + err.Error()}
	}
	return &httpError{http.StatusBadRequest, codeInvalidArgument, "malformed protobuf: " + err.Error()}
}

// hexIDsToBase64 rewrites the trace and span ids of an OTLP/JSON body,
// which the OTLP specification encodes as hex, to the base64 that protojson
// expects for bytes fields.
func hexIDsToBase64(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id":
					if s, ok := e.(string); ok && s != "" {
						raw, err := hex.DecodeString(s)
						if err != nil {
							return fmt.Errorf("%s %q is not hex", k, s)
						}
						x[k] = base64.StdEncoding.EncodeToString(raw)
					}
					continue
				}
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// writeStatus writes err as an OTLP error: its HTTP status and a
// google.rpc.Status body in the request's encoding.
func writeStatus(w http.ResponseWriter, isJSON bool, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{http.StatusBadRequest, codeInvalidArgument, err.Error()}
	}
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(he.status)
		b, _ := json.Marshal(map[string]any{"code": he.code, "message": he.msg})
		_, _ = w.Write(b)
		return
	}
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(he.code))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, he.msg)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(he.status)
	_, _ = w.Write(b)
}
