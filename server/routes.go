package server

import "net/http"

// register installs every endpoint. The OpenAPI document (openapi.go) lists
// the same routes; a test keeps the two in step.
func (s *Server) register() {
	get, post, del := http.MethodGet, http.MethodPost, http.MethodDelete

	s.handle(get, "/v1/openapi.json", s.openAPI)
	s.handle(get, "/v1/health", s.health)

	s.handle(get, "/v1/agents", s.listAgents)
	s.handle(get, "/v1/agents/{name}", s.getAgent)

	s.handle(post, "/v1/runs", s.initiate)
	s.handle(get, "/v1/runs/{id}", s.getRun)
	s.handle(post, "/v1/runs/{id}/cancel", s.cancelRun)
	s.handle(get, "/v1/runs/{id}/next", s.nextStep)
	s.handle(get, "/v1/runs/{id}/events", s.runEvents)
	s.handle(get, "/v1/runs/{id}/inputs", s.runInputs)
	s.handle(post, "/v1/runs/{id}/inputs/{request_id}", s.answer)
	s.handle(get, "/v1/inputs", s.allInputs)

	s.handle(get, "/v1/sessions", s.listSessions)
	s.handle(post, "/v1/sessions", s.createSession)
	s.handle(get, "/v1/sessions/{id}", s.getSession)
	s.handle(del, "/v1/sessions/{id}", s.deleteSession)
	s.handle(get, "/v1/sessions/{id}/summary", s.summary)
	s.handle(get, "/v1/sessions/{id}/context", s.contextPreview)
	s.handle(post, "/v1/sessions/{id}/fork", s.fork)
	s.handle(post, "/v1/sessions/{id}/retry", s.retry)
	s.handle(post, "/v1/sessions/{id}/replay", s.replay)
	s.handle(get, "/v1/sessions/{id}/forks", s.forks)
	s.handle(get, "/v1/sessions/{id}/tree", s.tree)
	s.handle(get, "/v1/sessions/{id}/events", s.sessionEvents)

	s.handle(get, "/v1/sessions/{id}/steps", s.listSteps)
	s.handle(post, "/v1/sessions/{id}/steps", s.ingest)
	s.handle(del, "/v1/sessions/{id}/steps", s.truncate)
	s.handle(get, "/v1/sessions/{id}/steps/{sequence}", s.getStep)

	s.handle(post, "/v1/agui/{agent}", s.agui)

	s.registerDashboardAPI()   // graph, overview, session rows (dashboard.go)
	s.registerObservationAPI() // evals, attachments, events, datasets, experiments (observe.go)
	s.registerSearchAPI()      // similarity search over past steps (search.go)
	s.registerOTLP()           // OTLP/HTTP receiver: GenAI spans become steps (otlp.go)
	s.registerLangSmith()      // LangSmith run trees become steps (langsmith.go)
	s.registerMetricsAPI()     // time-series analytics (metrics.go)
	s.registerJudgeAPI()       // LLM judges on demand (judge.go)
	s.registerWorkerAPI()      // the worker protocol (workers.go)
	s.registerA2A()            // A2A agent cards and JSON-RPC (a2a.go)
	s.registerLangGraph()      // the LangGraph Server API (langgraph.go)
}
