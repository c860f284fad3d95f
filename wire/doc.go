// Package wire holds the types of Stepwise's HTTP API, written once: the
// request and response bodies of the /v1 endpoints, the events of the SSE
// streams, the payloads of the step-by-step protocol (continuation,
// human-input request, result, error) and the search query. Package server
// encodes them, package client decodes them, the root package stepwise
// names most of them through aliases, and a test in package server checks
// the OpenAPI document against their JSON fields.
//
// It imports only the shared types (steptype), the model contract (llm)
// and the store contract (store), so a program that talks to a server
// links no engine.
package wire
