// Package server exposes a Stepwise engine over HTTP: a JSON API under /v1
// (agents, runs, human input, sessions, steps, fork, retry, replay, ingest),
// resumable Server-Sent Event streams whose event ids are stream positions,
// an AG-UI endpoint for front ends that speak that protocol, and an OpenAPI
// 3.1 description of all of it at /v1/openapi.json.
//
//	srv, err := server.New(server.Config{Engine: eng})
//	if err != nil { … }
//	http.ListenAndServe("127.0.0.1:7700", srv)
//
// or, with bearer tokens, graceful shutdown and the loopback rule enforced:
//
//	err := server.ListenAndServe(ctx, "127.0.0.1:7700", server.Config{Engine: eng})
//
// Under an http.Server of your own, set its ConnContext to ConnContext (as
// Serve does): SSE streams then write their chunks to the connection
// themselves, with less CPU per event and the same bytes.
//
// Errors are RFC 9457 problem details with stable codes (see
// docs/http_api.md); the client package decodes them back into errors that
// match the stepwise sentinels.
package server
