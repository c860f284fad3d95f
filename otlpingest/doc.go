// Package otlpingest turns OpenTelemetry GenAI spans and log records into
// Stepwise steps, so that an agent written in any language and instrumented
// with OpenTelemetry gets the same step log, streams, dashboard, workflow
// graph and evals as a Stepwise agent.
//
// It also records LangSmith run trees (Ingester.IngestRuns and the
// ServeRun… handlers the server mounts under /langsmith): each run is
// mapped as a span of its trace would be (docs/protocols.md).
//
// It understands three conventions: the OpenTelemetry GenAI semantic
// conventions (gen_ai.* attributes, per-message events and log records),
// OpenInference (openinference.span.kind, llm.*, tool.*) and the Vercel AI
// SDK (ai.* spans). The mapping is documented in docs/otlp_ingest.md.
//
// An Ingester receives decoded OTLP export requests (the server package
// exposes it at POST /v1/traces and POST /v1/logs). Every span becomes at
// most one step whose id is derived from the span id, so a re-sent export
// never duplicates a step; steps are appended through Engine.Ingest in
// start-time order within their session.
package otlpingest
