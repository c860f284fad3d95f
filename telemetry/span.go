package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Stepwise attributes beside the GenAI conventions.
const (
	AttrSessionID  = attribute.Key("stepwise.session.id")
	AttrRunID      = attribute.Key("stepwise.run.id")
	AttrRunStatus  = attribute.Key("stepwise.run.status")
	AttrRunSteps   = attribute.Key("stepwise.run.step_count")
	AttrParentRun  = attribute.Key("stepwise.run.parent_id")
	AttrStepID     = attribute.Key("stepwise.step.id")
	AttrStepSeq    = attribute.Key("stepwise.step.sequence")
	AttrStepKind   = attribute.Key("stepwise.step.kind")
	AttrStepName   = attribute.Key("stepwise.step.name")
	AttrStepStatus = attribute.Key("stepwise.step.status")
	AttrAttempt    = attribute.Key("stepwise.step.attempt")
	AttrCost       = attribute.Key("stepwise.step.cost_usd")
	// AttrWorker is the worker process that served the step or tool call
	// (docs/workers.md): its metadata "worker".
	AttrWorker = attribute.Key("stepwise.step.worker")
)

// StepCommitted implements stepwise.Observer: the step becomes a span of
// its run's trace, exported at once.
func (x *Exporter) StepCommitted(ctx context.Context, r *stepwise.Run, s *stepwise.Step) {
	tid := TraceID(x.rootOf(ctx, r))
	sctx := context.WithValue(parent(ctx, tid, RunSpanID(r.ID)), idKey{}, ids{trace: tid, span: StepSpanID(s.ID)})
	start, end := s.Metrics.StartedAt, s.Metrics.FinishedAt
	if start.IsZero() {
		start = s.CreatedAt
	}
	if end.IsZero() || end.Before(start) {
		end = start
	}
	name, kind, attrs := x.stepSpan(r, s)
	if x.cfg.CaptureContent {
		if in := x.inputMessages(r, s); s.Kind == steptype.KindLLM {
			b, _ := json.Marshal(in)
			attrs = append(attrs, semconv.GenAIInputMessagesKey.String(string(b)))
		}
	}
	_, span := x.tracer.Start(sctx, name, trace.WithTimestamp(start), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if s.Error != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(s.Error)))
		span.SetStatus(codes.Error, s.Error.Message)
	}
	span.End(trace.WithTimestamp(end))
}

// RunFinished implements stepwise.Observer: the run's span is exported.
func (x *Exporter) RunFinished(ctx context.Context, r *stepwise.Run) {
	x.forget(r.ID)
	tid := TraceID(x.rootOf(ctx, r))
	rctx, root := ctx, trace.WithNewRoot()
	if r.ParentRunID != "" && r.ParentStepID != "" {
		rctx, root = parent(ctx, tid, StepSpanID(r.ParentStepID)), trace.WithSpanKind(trace.SpanKindInternal)
	}
	rctx = context.WithValue(rctx, idKey{}, ids{trace: tid, span: RunSpanID(r.ID)})
	end := r.FinishedAt
	if end.IsZero() {
		end = r.UpdatedAt
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName(r.Agent), semconv.GenAIConversationID(r.SessionID),
		AttrSessionID.String(r.SessionID), AttrRunID.String(r.ID), AttrRunStatus.String(string(r.Status)),
		AttrRunSteps.Int64(r.StepCount),
	}
	if r.ParentRunID != "" {
		attrs = append(attrs, AttrParentRun.String(r.ParentRunID))
	}
	_, span := x.tracer.Start(rctx, "invoke_agent "+r.Agent, trace.WithTimestamp(r.CreatedAt), root,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	switch {
	case r.Status == steptype.RunFailed || r.Status == steptype.RunCancelled:
		msg, typ := string(r.Status), string(r.Status)
		if r.Error != nil {
			msg, typ = r.Error.Message, errorType(r.Error)
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(typ))
		span.SetStatus(codes.Error, msg)
	case r.Status == steptype.RunCompleted:
		span.SetStatus(codes.Ok, "")
	}
	span.End(trace.WithTimestamp(end))
}

// ExportRun exports a stored run, its sub-agent runs and their steps, as if
// they had been observed live: for runs executed before the exporter was
// registered, or by a process without one. An unfinished run exports its
// steps only.
func (x *Exporter) ExportRun(ctx context.Context, st store.Store, runID string) error {
	r, err := st.RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return fmt.Errorf("run %q: %w", runID, err)
	}
	steps, err := st.StepList(ctx, &store.StepListParams{RunID: runID})
	if err != nil {
		return fmt.Errorf("steps of run %q: %w", runID, err)
	}
	for _, s := range steps {
		x.StepCommitted(ctx, r, s)
	}
	kids, err := st.RunList(ctx, &store.RunListParams{ParentRunID: runID})
	if err != nil {
		return fmt.Errorf("sub-agent runs of %q: %w", runID, err)
	}
	for _, k := range kids {
		if err := x.ExportRun(ctx, st, k.ID); err != nil {
			return err
		}
	}
	if r.Status.Terminal() {
		x.RunFinished(ctx, r)
	}
	return nil
}

// stepSpan names a step's span and gives its attributes.
func (x *Exporter) stepSpan(r *stepwise.Run, s *stepwise.Step) (string, trace.SpanKind, []attribute.KeyValue) {
	attrs := []attribute.KeyValue{
		semconv.GenAIConversationID(r.SessionID), semconv.GenAIAgentName(r.Agent),
		AttrSessionID.String(r.SessionID), AttrRunID.String(r.ID), AttrStepID.String(s.ID), AttrStepSeq.Int64(s.Sequence),
		AttrStepKind.String(string(s.Kind)), AttrStepName.String(s.Name), AttrStepStatus.String(string(s.Status)),
	}
	m := s.Metrics
	if m.Attempt > 0 {
		attrs = append(attrs, AttrAttempt.Int(m.Attempt))
	}
	if m.Cost > 0 {
		attrs = append(attrs, AttrCost.Float64(m.Cost))
	}
	if w, ok := s.Metadata["worker"].(string); ok && w != "" {
		attrs = append(attrs, AttrWorker.String(w))
	}
	switch {
	case s.Kind == steptype.KindLLM || (s.Kind == steptype.KindError && s.Name == stepwise.StepLLM && m.Model != ""):
		model := requestModel(m.Model, m.Provider)
		attrs = append(attrs, semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(model))
		if m.Provider != "" {
			attrs = append(attrs, semconv.GenAIProviderNameKey.String(m.Provider))
		}
		if s.Kind == steptype.KindLLM {
			attrs = append(attrs, x.usage(s)...)
		}
		return "chat " + model, trace.SpanKindClient, attrs
	case s.Kind == steptype.KindTool || s.Kind == steptype.KindAgent:
		attrs = append(attrs, semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(s.ToolName),
			semconv.GenAIToolCallID(s.ToolCallID), semconv.GenAIToolType("extension"))
		if x.cfg.CaptureContent {
			attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(string(s.Inputs)), semconv.GenAIToolCallResultKey.String(s.Content))
		}
		return "execute_tool " + s.ToolName, trace.SpanKindInternal, attrs
	}
	return string(s.Kind) + " " + s.Name, trace.SpanKindInternal, attrs
}

// usage returns the response attributes of a model step.
func (x *Exporter) usage(s *stepwise.Step) []attribute.KeyValue {
	m := s.Metrics
	attrs := []attribute.KeyValue{
		semconv.GenAIUsageInputTokens(int(m.InputTokens)), semconv.GenAIUsageOutputTokens(int(m.OutputTokens)),
	}
	if m.CachedTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(m.CachedTokens)))
	}
	if m.ReasoningTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokens(int(m.ReasoningTokens)))
	}
	if m.FirstTokenLatency > 0 {
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk(m.FirstTokenLatency.Seconds()))
	}
	if v, ok := s.Metadata["response_model"].(string); ok && v != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(v))
	}
	if v, ok := s.Metadata["finish_reason"].(string); ok && v != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(v))
	}
	if x.cfg.CaptureContent {
		out, _ := json.Marshal([]genAIMessage{assistantMessage(s)})
		attrs = append(attrs, semconv.GenAIOutputMessagesKey.String(string(out)))
	}
	return attrs
}

// requestModel strips the provider prefix of an engine model name
// ("openai:gpt-4o-mini" → "gpt-4o-mini").
func requestModel(model, provider string) string {
	if p, rest, ok := strings.Cut(model, ":"); ok && (p == provider || provider == "") {
		return rest
	}
	return model
}

func errorType(e *steptype.StepError) string {
	if e.Code != "" {
		return e.Code
	}
	return "_OTHER"
}
