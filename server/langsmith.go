package server

import (
	"net/http"
	"strings"
)

// The LangSmith ingest endpoints under /langsmith: a langsmith client with
// LANGSMITH_ENDPOINT=<server>/langsmith records its run trees as sessions
// and steps (package otlpingest, docs/otlp_ingest.md). The API key the
// client sends (x-api-key) is checked as a bearer token would be.

// langSmithPrefix is where the LangSmith API root is mounted.
const langSmithPrefix = "/langsmith"

func (s *Server) registerLangSmith() {
	s.handle(http.MethodGet, langSmithPrefix+"/info", func(w http.ResponseWriter, r *http.Request) error {
		s.otlp.ServeLangSmithInfo(w, s.cfg.MaxOTLPBytes)
		return nil
	})
	s.handle(http.MethodPost, langSmithPrefix+"/runs", func(w http.ResponseWriter, r *http.Request) error {
		s.otlp.ServeRunCreate(w, r, s.cfg.MaxOTLPBytes)
		return nil
	})
	s.handle(http.MethodPatch, langSmithPrefix+"/runs/{id}", func(w http.ResponseWriter, r *http.Request) error {
		s.otlp.ServeRunUpdate(w, r, r.PathValue("id"), s.cfg.MaxOTLPBytes)
		return nil
	})
	s.handle(http.MethodPost, langSmithPrefix+"/runs/batch", func(w http.ResponseWriter, r *http.Request) error {
		s.otlp.ServeRunBatch(w, r, s.cfg.MaxOTLPBytes)
		return nil
	})
	s.handle(http.MethodPost, langSmithPrefix+"/runs/multipart", func(w http.ResponseWriter, r *http.Request) error {
		s.otlp.ServeRunMultipart(w, r, s.cfg.MaxOTLPBytes)
		return nil
	})
}

// langSmithKey is the credential of a LangSmith client: its x-api-key
// header as a bearer token, on the LangSmith endpoints only.
func langSmithKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" && strings.HasPrefix(r.URL.Path, langSmithPrefix+"/") {
		return "Bearer " + k
	}
	return ""
}

func langSmithOps() []apiOp {
	errs := []int{400, 413, 422, 503}
	return []apiOp{
		{method: "GET", path: langSmithPrefix + "/info", id: "langSmithInfo", status: 200, resp: "LangSmithInfo", errors: []int{401},
			summary: "LangSmith server info: what a langsmith client reads to choose its ingest endpoint"},
		{method: "POST", path: langSmithPrefix + "/runs", id: "langSmithRunCreate", body: "LangSmithRun", status: 202, resp: "LangSmithAccepted", errors: []int{401}, detailErrors: errs,
			summary: "Create a LangSmith run (chain, llm, tool, retriever …); it is recorded as a step when it has ended"},
		{method: "PATCH", path: langSmithPrefix + "/runs/{id}", id: "langSmithRunUpdate", params: []apiParam{pathParam("id", "the run id")}, body: "LangSmithRun", status: 202, resp: "LangSmithAccepted", errors: []int{401}, detailErrors: errs,
			summary: "Update a LangSmith run: its end time, outputs, error"},
		{method: "POST", path: langSmithPrefix + "/runs/batch", id: "langSmithRunBatch", body: "LangSmithBatch", status: 202, resp: "LangSmithAccepted", errors: []int{401}, detailErrors: errs,
			summary: "Create and update LangSmith runs in one request"},
		{method: "POST", path: langSmithPrefix + "/runs/multipart", id: "langSmithRunMultipart", form: true, status: 202, resp: "LangSmithAccepted", errors: []int{401}, detailErrors: errs,
			summary: "Create and update LangSmith runs as multipart/form-data parts (the langsmith clients' default)"},
	}
}

func langSmithSchemas() obj {
	run := obj{"type": "object", "required": []string{"id"}, "description": "a LangSmith run: id, trace_id, dotted_order, parent_run_id, name, run_type (llm, chain, tool, retriever, embedding, prompt, parser), start_time, end_time, inputs, outputs, error, extra.metadata (session_id, thread_id or conversation_id name the session), extra.invocation_params",
		"additionalProperties": true}
	return obj{
		"LangSmithRun":      run,
		"LangSmithBatch":    object(false, nil, obj{"post": obj{"type": "array", "items": ref("LangSmithRun")}, "patch": obj{"type": "array", "items": ref("LangSmithRun")}}),
		"LangSmithAccepted": obj{"type": "object"},
		"LangSmithInfo":     obj{"type": "object", "additionalProperties": true, "description": "version, batch_ingest_config, instance_flags"},
		"LangSmithDetail":   object(false, []string{"detail"}, obj{"detail": str("")}),
	}
}
