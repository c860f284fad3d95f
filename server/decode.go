package server

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise"
)

// decodeBody decodes the JSON request body into dst strictly: unknown
// fields and trailing data are refused, the body is limited to MaxBodyBytes.
// An empty body is refused unless optional is set (dst is left unchanged).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, optional bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedType, "Content-Type must be application/json, got %q", ct)
		}
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "read request body: %v", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		if optional {
			return nil
		}
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "a JSON request body is required")
	}
	return decodeStrict(data, dst)
}

// decodeStrict decodes one JSON value, refusing unknown fields and trailing
// data, with messages that name the offending field.
func decodeStrict(data []byte, dst any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "unexpected data after the JSON body")
	}
	return nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "%s: expected %s, got JSON %s", field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "truncated JSON body")
	}
	// Unknown fields and errors from custom unmarshalers (e.g. a step of a
	// newer wire version) carry a readable message.
	return errorf(http.StatusBadRequest, CodeInvalidJSON, "invalid JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// writeJSON writes v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, newProblem(http.StatusInternalServerError, CodeInternal, "internal error; the cause is in the server log"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// queryInt parses an optional non-negative integer query parameter.
func queryInt(r *http.Request, name string, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || (max > 0 && n > max) {
		if max > 0 {
			return 0, badParam("query parameter %s=%q: want an integer between 0 and %d", name, v, max)
		}
		return 0, badParam("query parameter %s=%q: want a non-negative integer", name, v)
	}
	return n, nil
}

// pathSeq parses a positive sequence path parameter.
func pathSeq(r *http.Request, name string) (int64, error) {
	v := r.PathValue(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, badParam("path parameter %s=%q: want a sequence number >= 1", name, v)
	}
	return n, nil
}

// pathID returns a path parameter naming an id; ids are printable and short.
func pathID(r *http.Request, name string) (string, error) {
	v := r.PathValue(name)
	if err := checkID(name, v); err != nil {
		return "", err
	}
	return v, nil
}

// maxIDLen bounds ids accepted from clients.
const maxIDLen = 200

func checkID(name, v string) error {
	if v == "" || len(v) > maxIDLen {
		return badParam("%s: want 1 to %d characters", name, maxIDLen)
	}
	for _, c := range v {
		if c <= ' ' || c == 0x7f || c == '/' {
			return badParam("%s %q: must not contain spaces, control characters or '/'", name, v)
		}
	}
	return nil
}

// streamPosition reads where a stream resumes: the Last-Event-ID header
// (sent by reconnecting SSE clients), else the after query parameter, else
// the beginning.
func streamPosition(lastEventID, after string) (stepwise.Position, error) {
	v, from := lastEventID, "Last-Event-ID"
	if strings.TrimSpace(v) == "" {
		v, from = after, "after"
	}
	if strings.TrimSpace(v) == "" {
		return stepwise.Position{}, nil
	}
	p, err := stepwise.ParsePosition(v)
	if err != nil {
		return stepwise.Position{}, errorf(http.StatusBadRequest, CodeInvalidPosition, "%s %q: want SEQ:IDX with non-negative integers, as sent in the id of an event", from, truncate(v, 64))
	}
	return p, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
