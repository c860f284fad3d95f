// Package telemetry exports Stepwise runs and steps as OpenTelemetry traces
// with the GenAI semantic conventions (go.opentelemetry.io/otel/semconv/v1.41.0):
// gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model and
// gen_ai.response.model, token usage, gen_ai.tool.name and
// gen_ai.tool.call.id, gen_ai.conversation.id (the session) and
// gen_ai.agent.name. Spans go out over OTLP/HTTP (protobuf) through
// OTLPExporter, configured by the standard OTEL_EXPORTER_OTLP_* environment
// variables; it writes the OTLP data types itself and links no gRPC.
//
//	x, err := telemetry.New(ctx, telemetry.Config{Store: st})
//	if err != nil { … }
//	defer x.Shutdown(context.Background())
//	defer e.Observe(x)()
package telemetry
