package telemetry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// InstrumentationName is the instrumentation scope of the spans.
const InstrumentationName = "github.com/stepwise-run/stepwise/telemetry"

// Config configures an Exporter.
type Config struct {
	// Exporter receives the spans. Default: an OTLPExporter (OTLP over
	// HTTP/protobuf) configured by the standard environment variables
	// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
	// OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT,
	// OTEL_EXPORTER_OTLP_COMPRESSION, the TLS files
	// OTEL_EXPORTER_OTLP_CERTIFICATE, OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE,
	// OTEL_EXPORTER_OTLP_CLIENT_KEY, and their _TRACES_ variants.
	Exporter sdktrace.SpanExporter
	// Store resolves the root run of nested sub-agent runs, whose spans go
	// into the trace of the top-level run. Without it a run at depth 2 or
	// more starts a trace of its own. Optional.
	Store store.Store
	// ServiceName is the service.name resource attribute. Default
	// "stepwise"; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override.
	ServiceName string
	// CaptureContent adds message content to spans: the model's input
	// (gen_ai.input.messages: the messages of the run before the call, as
	// this exporter saw them, the newest 64) and output
	// (gen_ai.output.messages), tool arguments and results. Default false:
	// content may be sensitive; OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
	// turns it on.
	CaptureContent bool
	// BatchOptions tune the batch span processor (OTEL_BSP_* variables are
	// honoured too).
	BatchOptions []sdktrace.BatchSpanProcessorOption
	// Logger receives failures to resolve runs. Default slog.Default().
	Logger *slog.Logger
}

// Exporter exports runs and steps as OpenTelemetry spans with the GenAI
// semantic conventions: each top-level run is a trace whose root span is
// the run ("invoke_agent <agent>"); each step is a child span ("chat
// <model>", "execute_tool <tool>", "<kind> <name>"), exported as soon as it
// commits; a sub-agent's run is a child of the parent's agent step. Trace
// and span ids derive from run and step ids, so a run resumed by another
// process continues the same trace, and the dashboard can link a run to its
// trace with TraceID.
//
// Register it with e.Observe(x); close it with Shutdown to flush.
type Exporter struct {
	cfg    Config
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer

	mu    sync.Mutex
	roots map[string]string // run id → root run id
	// msgs are the messages of each run seen so far (with CaptureContent):
	// the gen_ai.input.messages of its next model call.
	msgs map[string][]genAIMessage
}

var _ stepwise.Observer = (*Exporter)(nil)

// New returns an Exporter.
func New(ctx context.Context, cfg Config) (*Exporter, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "stepwise"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if !cfg.CaptureContent {
		on, err := captureFromEnv()
		if err != nil {
			return nil, err
		}
		cfg.CaptureContent = on
	}
	if cfg.Exporter == nil {
		exp, err := NewOTLPExporter(OTLPConfig{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		cfg.Exporter = exp
	}
	res, err := resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(cfg.ServiceName), semconv.TelemetrySDKName("opentelemetry"),
			semconv.TelemetrySDKLanguageGo),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(cfg.Exporter, cfg.BatchOptions...),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return &Exporter{cfg: cfg, tp: tp, tracer: tp.Tracer(InstrumentationName, trace.WithSchemaURL(semconv.SchemaURL)),
		roots: map[string]string{}, msgs: map[string][]genAIMessage{}}, nil
}

// ForceFlush exports the spans buffered so far.
func (x *Exporter) ForceFlush(ctx context.Context) error { return x.tp.ForceFlush(ctx) }

// Shutdown flushes and stops the exporter.
func (x *Exporter) Shutdown(ctx context.Context) error { return x.tp.Shutdown(ctx) }

// TraceID is the trace of a top-level run (and of its sub-agent runs).
func TraceID(rootRunID string) trace.TraceID {
	var id trace.TraceID
	h := sha256.Sum256([]byte("stepwise.trace\x00" + rootRunID))
	copy(id[:], h[:])
	return id
}

// RunSpanID is the span of a run.
func RunSpanID(runID string) trace.SpanID { return spanID("run", runID) }

// StepSpanID is the span of a step.
func StepSpanID(stepID string) trace.SpanID { return spanID("step", stepID) }

func spanID(kind, id string) trace.SpanID {
	var s trace.SpanID
	h := sha256.Sum256([]byte("stepwise." + kind + "\x00" + id))
	copy(s[:], h[:])
	return s
}

// idKey carries the ids the next span must have.
type idKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

// idGenerator hands the SDK the ids derived from run and step ids.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idKey{}).(ids); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	_, _ = rand.Read(t[:])
	return t, idGenerator{}.NewSpanID(ctx, t)
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idKey{}).(ids); ok {
		return v.span
	}
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

// rootOf returns the top-level run of r's sub-agent chain.
func (x *Exporter) rootOf(ctx context.Context, r *stepwise.Run) string {
	if r.ParentRunID == "" {
		return r.ID
	}
	x.mu.Lock()
	root, ok := x.roots[r.ID]
	x.mu.Unlock()
	if ok {
		return root
	}
	root = r.ParentRunID
	if x.cfg.Store != nil {
		for id, hops := r.ParentRunID, 0; id != "" && hops < 64; hops++ {
			p, err := x.cfg.Store.RunGet(ctx, &store.RunGetParams{ID: id})
			if err != nil {
				x.cfg.Logger.Warn("stepwise: telemetry: resolve parent run", "run", id, "err", err)
				break
			}
			root, id = p.ID, p.ParentRunID
		}
	}
	x.mu.Lock()
	if len(x.roots) > 10000 {
		clear(x.roots)
	}
	x.roots[r.ID] = root
	x.mu.Unlock()
	return root
}

// parent returns the context of the span a new span of run r hangs under:
// the run's span for a step; for a run, the calling agent step's span (nil
// for a top-level run).
func parent(ctx context.Context, tid trace.TraceID, span trace.SpanID) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: span, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
}
