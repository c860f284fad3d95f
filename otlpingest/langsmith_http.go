package otlpingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"unicode/utf8"
)

// The LangSmith ingest endpoints, relative to the API root a langsmith
// client is pointed at (LANGSMITH_ENDPOINT): GET /info, POST /runs, PATCH
// /runs/{id}, POST /runs/batch and POST /runs/multipart. Errors are
// {"detail": "…"} bodies, as the LangSmith API answers.

// ServeLangSmithInfo answers GET /info: what the clients read to choose
// their ingest endpoint (multipart, uncompressed bodies).
func (in *Ingester) ServeLangSmithInfo(w http.ResponseWriter, maxBytes int64) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBodyBytes
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"version": "stepwise",
		"batch_ingest_config": map[string]any{"use_multipart_endpoint": true, "size_limit_bytes": maxBytes,
			"size_limit": 100, "scale_up_qsize_trigger": 1000, "scale_up_nthreads_limit": 16, "scale_down_nempty_trigger": 4},
		"instance_flags": map[string]any{"gzip_body_enabled": false, "zstd_compression_enabled": false},
	})
}

// ServeRunCreate answers POST /runs: one run's create.
func (in *Ingester) ServeRunCreate(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	in.serveRuns(w, r, maxBytes, func(body []byte) (*RunOps, error) {
		m, err := decodeRun(body)
		return &RunOps{Post: []map[string]any{m}}, err
	})
}

// ServeRunUpdate answers PATCH /runs/{id}: one run's update; id is the
// run of the path, which the body may repeat but not contradict.
func (in *Ingester) ServeRunUpdate(w http.ResponseWriter, r *http.Request, id string, maxBytes int64) {
	in.serveRuns(w, r, maxBytes, func(body []byte) (*RunOps, error) {
		m, err := decodeRun(body)
		if err != nil {
			return nil, err
		}
		if b, ok := m["id"]; ok && b != id {
			return nil, fmt.Errorf("the body's id %v is not the path's %q", b, id)
		}
		m["id"] = id
		return &RunOps{Patch: []map[string]any{m}}, nil
	})
}

// ServeRunBatch answers POST /runs/batch: {"post": [...], "patch": [...]}.
func (in *Ingester) ServeRunBatch(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	in.serveRuns(w, r, maxBytes, func(body []byte) (*RunOps, error) {
		var ops RunOps
		if err := strictJSON(body, &ops); err != nil {
			return nil, err
		}
		return &ops, nil
	})
}

// ServeRunMultipart answers POST /runs/multipart: a multipart/form-data
// body whose parts are named post.ID or patch.ID (the run without its
// large fields), post.ID.FIELD or patch.ID.FIELD (inputs, outputs, events,
// extra, error, serialized), feedback.ID and attachment.ID.NAME. Feedback
// and attachments are accepted and not recorded (docs/otlp_ingest.md).
func (in *Ingester) ServeRunMultipart(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	boundary := params["boundary"]
	in.serveRuns(w, r, maxBytes, func(body []byte) (*RunOps, error) {
		if err != nil || boundary == "" {
			return nil, errors.New("Content-Type must be multipart/form-data with a boundary")
		}
		return decodeMultipart(body, boundary)
	})
}

func (in *Ingester) serveRuns(w http.ResponseWriter, r *http.Request, maxBytes int64, decode func([]byte) (*RunOps, error)) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBodyBytes
	}
	body, err := readBody(w, r, maxBytes)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			writeDetail(w, he.status, he.msg)
		} else {
			writeDetail(w, http.StatusBadRequest, err.Error())
		}
		return
	}
	ops, err := decode(body)
	if err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, "malformed run: "+err.Error())
		return
	}
	switch err := in.IngestRuns(r.Context(), ops); {
	case errors.Is(err, ErrInvalidRun):
		writeDetail(w, http.StatusUnprocessableEntity, err.Error())
	case err != nil:
		in.cfg.Logger.Error("stepwise: langsmith ingest", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeDetail(w, http.StatusServiceUnavailable, "the runs could not be recorded; retry")
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{})
	}
}

// decodeRun decodes one run object.
func decodeRun(body []byte) (map[string]any, error) {
	var m map[string]any
	if err := strictJSON(body, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("the body must be a JSON object")
	}
	return m, nil
}

// strictJSON decodes body into v, refusing invalid UTF-8 and trailing data.
func strictJSON(body []byte, v any) error {
	if !utf8.Valid(body) {
		return errors.New("the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// decodeMultipart gathers the run operations of a multipart body.
func decodeMultipart(body []byte, boundary string) (*RunOps, error) {
	type opKey struct{ method, id string }
	runs := map[opKey]map[string]any{}
	var order []opKey
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("multipart: %v", err)
		}
		name := p.FormName()
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("part %q: %v", name, err)
		}
		method, rest, _ := strings.Cut(name, ".")
		if method == "feedback" || method == "attachment" {
			continue
		}
		if method != "post" && method != "patch" {
			return nil, fmt.Errorf("part %q: the name must start with post, patch, feedback or attachment and a dot", name)
		}
		id, fieldName, hasField := strings.Cut(rest, ".")
		if id == "" {
			return nil, fmt.Errorf("part %q names no run", name)
		}
		k := opKey{method, id}
		m := runs[k]
		if m == nil {
			m = map[string]any{"id": id}
			runs[k] = m
			order = append(order, k)
		}
		var v any
		if err := strictJSON(data, &v); err != nil {
			return nil, fmt.Errorf("part %q: %v", name, err)
		}
		if !hasField {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("part %q must be a JSON object", name)
			}
			for f, x := range obj {
				if f == "id" && x != id {
					return nil, fmt.Errorf("part %q: its id %v is not the part's", name, x)
				}
				m[f] = x
			}
			continue
		}
		switch fieldName {
		case "inputs", "outputs", "events", "extra", "error", "serialized":
			m[fieldName] = v
		default:
			return nil, fmt.Errorf("part %q: unknown field %q", name, fieldName)
		}
	}
	ops := &RunOps{}
	for _, k := range order {
		if k.method == "post" {
			ops.Post = append(ops.Post, runs[k])
		} else {
			ops.Patch = append(ops.Patch, runs[k])
		}
	}
	return ops, nil
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
