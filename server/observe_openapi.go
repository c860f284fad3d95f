package server

// The OpenAPI operations and schemas of the observation endpoints
// (observe.go, observe_attach.go, observe_experiments.go). apiOps and
// schemas include them once registerObservationAPI is part of register.

func observationOps() []apiOp {
	pStep := pathParam("id", "step id")
	pRun := pathParam("id", "run id")
	pSession := pathParam("id", "session id")
	pExperiment := pathParam("id", "experiment id or name")
	pLimit := queryParam("limit", "integer", "at most this many, 0..1000; 0 means no limit")
	evalFilters := []apiParam{queryParam("name", "string", "only evals of this name"), queryParam("source", "string", "only user, llm-judge or heuristic evals")}
	evalOps := func(kind, what string, p apiParam) []apiOp {
		return []apiOp{
			{method: "GET", path: "/v1/" + kind + "s/{id}/evals", id: "list" + title(kind) + "Evals", summary: "Evals of " + what + ", oldest first",
				params: append([]apiParam{p}, evalFilters...), status: 200, resp: "EvalList", errors: read},
			{method: "POST", path: "/v1/" + kind + "s/{id}/evals", id: "score" + title(kind), summary: "Record a user score of the " + kind + " (422: score outside [0, 1])",
				params: []apiParam{p}, body: "ScoreRequest", status: 201, resp: "Eval", errors: write},
		}
	}
	ops := evalOps("step", "a step", pStep)
	ops = append(ops, evalOps("run", "a run and of its steps", pRun)...)
	ops = append(ops, evalOps("session", "a session, its runs and steps", pSession)...)
	return append(ops,
		apiOp{method: "GET", path: "/v1/steps/{id}/attachments", id: "listAttachments", summary: "Attachments of a step, oldest first",
			params: []apiParam{pStep}, status: 200, resp: "AttachmentList", errors: read},
		apiOp{method: "POST", path: "/v1/steps/{id}/attachments", id: "addAttachment",
			summary: "Attach a file to a step: multipart/form-data with a file part (and name, kind fields), or the raw content with its Content-Type and ?name=&kind=; the content decides the type (413: too large, 415: type refused)",
			params:  []apiParam{pStep, queryParam("name", "string", "file name (raw uploads)"), queryParam("kind", "string", "screenshot, image or file")},
			status:  201, resp: "Attachment", errors: []int{400, 401, 404, 413, 415, 422}},
		apiOp{method: "GET", path: "/v1/attachments/{id}/content", id: "attachmentContent",
			summary: "The attachment's bytes with its type; served as a download unless a raster image",
			params:  []apiParam{pathParam("id", "attachment id")}, status: 200, errors: read},
		apiOp{method: "GET", path: "/v1/steps/{id}/events", id: "listStepEvents", summary: "Events inside a step (provider requests and responses, tool invocations, HTTP exchanges), payloads inlined",
			params: []apiParam{pStep, queryParam("type", "string", "only events of this type (repeatable)")}, status: 200, resp: "StepEventList", errors: read},
		apiOp{method: "GET", path: "/v1/steps/{id}/annotations", id: "getAnnotations", summary: "A step's effective annotations (committed, overlaid by those set through the API)",
			params: []apiParam{pStep}, status: 200, resp: "AnnotationView", errors: read},
		apiOp{method: "PUT", path: "/v1/steps/{id}/annotations", id: "putAnnotations", summary: "Set the state, goal or action of a committed step (fields left out are kept)",
			params: []apiParam{pStep}, body: "AnnotationRequest", status: 200, resp: "AnnotationView", errors: []int{400, 401, 404, 413, 415, 422}},
		apiOp{method: "GET", path: "/v1/datasets", id: "listDatasets", summary: "Datasets, newest first", params: []apiParam{pLimit}, status: 200, resp: "DatasetList", errors: []int{400, 401}},
		apiOp{method: "POST", path: "/v1/datasets", id: "importDataset",
			summary: "Import a JSONL dataset (body: application/x-ndjson, one {input, expected, metadata} per line); malformed lines are listed in errors, the rest imported (422 with errors when none is valid, 409 for a taken name)",
			params:  []apiParam{{name: "name", in: "query", typ: "string", desc: "unique dataset name", required: true}, queryParam("description", "string", "")},
			status:  201, resp: "ImportResult", errors: []int{400, 401, 409, 413, 415, 422}},
		apiOp{method: "GET", path: "/v1/experiments", id: "listExperiments", summary: "Experiments, newest first",
			params: []apiParam{queryParam("dataset", "string", "only experiments over this dataset (id or name)"), pLimit}, status: 200, resp: "ExperimentList", errors: []int{400, 401, 404}},
		apiOp{method: "GET", path: "/v1/experiments/compare", id: "compareExperiments", summary: "Two experiments over the same dataset side by side (422: different datasets)",
			params: []apiParam{{name: "a", in: "query", typ: "string", desc: "experiment A, id or name", required: true}, {name: "b", in: "query", typ: "string", desc: "experiment B, id or name", required: true}},
			status: 200, resp: "Comparison", errors: []int{400, 401, 404, 422}},
		apiOp{method: "GET", path: "/v1/experiments/{id}", id: "getExperiment", summary: "An experiment with its dataset, summary and item results",
			params: []apiParam{pExperiment}, status: 200, resp: "ExperimentReport", errors: []int{400, 401, 404}},
	)
}

// title upper-cases the first letter of an ASCII word.
func title(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func observationSchemas() obj {
	scores := obj{"type": "object", "additionalProperties": number(), "description": "eval name → score"}
	nullable := func(o obj) obj { return obj{"oneOf": []any{o, obj{"type": "null"}}} }
	return obj{
		"Eval": object(false, []string{"id", "target_kind", "target_id", "session_id", "name", "source", "score", "created_at", "updated_at"}, obj{
			"id": str(""), "target_kind": obj{"type": "string", "enum": []string{"step", "run", "session"}}, "target_id": str(""),
			"session_id": str(""), "run_id": str(""), "name": str("what was evaluated"),
			"source": obj{"type": "string", "enum": []string{"user", "llm-judge", "heuristic"}},
			"score":  obj{"type": "number", "minimum": 0, "maximum": 1, "description": "1 is best"}, "label": str(""), "description": str(""),
			"author": str(""), "details": anyJSON("evaluator specific"), "created_at": timeStr(), "updated_at": timeStr(),
		}),
		"EvalList": object(false, []string{"evals"}, obj{"evals": arrayOf(ref("Eval"))}),
		"ScoreRequest": object(true, []string{"score"}, obj{
			"score": obj{"type": "number", "minimum": 0, "maximum": 1}, "name": str("what is scored; default user"),
			"label": str(""), "description": str(""), "author": str(""), "source": obj{"type": "string", "enum": []string{"user"}},
		}),
		"Attachment": object(false, []string{"id", "step_id", "session_id", "name", "kind", "content_type", "size", "blob_hash", "created_at"}, obj{
			"id": str(""), "step_id": str(""), "session_id": str(""), "run_id": str(""), "name": str("file name"),
			"kind": obj{"type": "string", "enum": []string{"screenshot", "image", "file"}}, "content_type": str("detected from the content"),
			"size": integer(), "blob_hash": str("SHA-256 of the content"), "created_at": timeStr(),
		}),
		"AttachmentList": object(false, []string{"attachments"}, obj{"attachments": arrayOf(ref("Attachment"))}),
		"StepEvent": object(false, []string{"id", "step_id", "session_id", "index", "type", "size", "created_at"}, obj{
			"id": str(""), "step_id": str(""), "session_id": str(""), "run_id": str(""), "index": integer(),
			"type": str("provider_request, provider_response, tool_invocation, http, …"), "name": str(""), "attempt": integer(),
			"started_at": timeStr(), "duration": obj{"type": "integer", "description": "nanoseconds"}, "error": str(""),
			"payload": anyJSON("the event's JSON (fetched from the blob store when stored out of line)"), "blob_hash": str(""),
			"size": integer(), "created_at": timeStr(),
		}),
		"StepEventList":     object(false, []string{"events"}, obj{"events": arrayOf(ref("StepEvent"))}),
		"AnnotationRequest": object(true, nil, obj{"state": str("\"\" clears"), "goal": str("\"\" clears"), "action": str("\"\" clears")}),
		"AnnotationView": object(false, []string{"step_id", "annotations"}, obj{"step_id": str(""),
			"annotations": object(false, nil, obj{"state": str(""), "state_summary": str(""), "goal": str(""), "goal_summary": str(""),
				"action": str(""), "action_summary": str("")})}),
		"Dataset": object(false, []string{"id", "name", "item_count", "created_at"}, obj{
			"id": str(""), "name": str("unique"), "description": str(""), "item_count": integer(), "created_at": timeStr()}),
		"DatasetList": object(false, []string{"datasets"}, obj{"datasets": arrayOf(ref("Dataset"))}),
		"DatasetItem": object(false, []string{"dataset_id", "index", "input"}, obj{
			"dataset_id": str(""), "index": integer(), "input": str(""), "expected": str(""), "metadata": anyJSON("a JSON object")}),
		"ImportResult": object(false, []string{"imported", "errors"}, obj{"dataset": ref("Dataset"), "imported": integer(),
			"errors": arrayOf(object(false, []string{"line", "error"}, obj{"line": obj{"type": "integer", "description": "1-based"}, "error": str("")}))}),
		"Experiment": object(false, []string{"id", "name", "dataset_id", "agent", "status", "created_at", "updated_at"}, obj{
			"id": str(""), "name": str(""), "dataset_id": str(""), "agent": str(""), "status": str("running, completed, failed or cancelled"),
			"config": anyJSON("as recorded by the runner"), "summary": ref("ExperimentSummary"), "error": str(""),
			"created_at": timeStr(), "updated_at": timeStr(), "finished_at": timeStr(),
		}),
		"ExperimentList": object(false, []string{"experiments"}, obj{"experiments": arrayOf(ref("Experiment"))}),
		"ExperimentSummary": object(false, nil, obj{"items": integer(), "completed": integer(), "unfinished": integer(), "scores": scores,
			"mean_duration_s": number(), "input_tokens": integer(), "output_tokens": integer(), "cost": number()}),
		"ExperimentItem": object(false, []string{"experiment_id", "index", "status"}, obj{
			"experiment_id": str(""), "index": integer(), "session_id": str(""), "run_id": str(""), "status": str("the run's status, or error"),
			"output": str(""), "error": str(""), "scores": scores, "duration": obj{"type": "integer", "description": "nanoseconds"},
			"input_tokens": integer(), "output_tokens": integer(), "cost": number(), "updated_at": timeStr(),
		}),
		"ExperimentReport": object(false, []string{"experiment", "dataset", "summary", "items"}, obj{
			"experiment": ref("Experiment"), "dataset": ref("Dataset"), "summary": ref("ExperimentSummary"),
			"items": arrayOf(object(false, []string{"item", "result"}, obj{"item": ref("DatasetItem"), "result": nullable(ref("ExperimentItem"))})),
		}),
		"Comparison": object(false, []string{"a", "b", "dataset", "metrics", "items"}, obj{
			"a": ref("Experiment"), "b": ref("Experiment"), "dataset": ref("Dataset"),
			"metrics": arrayOf(object(false, []string{"name", "a", "b", "higher_is_better", "delta"}, obj{
				"name": str("success_rate, mean_duration_s, tokens, cost_usd, then each eval name"), "a": nullable(number()), "b": nullable(number()),
				"higher_is_better": boolean(), "delta": obj{"type": "number", "description": "B − A"}, "winner": obj{"type": "string", "enum": []string{"a", "b"}}})),
			"items": arrayOf(object(false, []string{"index", "input", "a", "b"}, obj{
				"index": integer(), "input": str(""), "expected": str(""), "a": nullable(ref("ExperimentItem")), "b": nullable(ref("ExperimentItem")),
				"changed": arrayOf(str("eval name whose score differs"))})),
		}),
	}
}

// withSchemas returns base with the schemas of more added (more wins on a
// name clash; TestObservationOpenAPI checks there is none).
func withSchemas(base obj, more ...obj) obj {
	for _, m := range more {
		for k, v := range m {
			base[k] = v
		}
	}
	return base
}
