package telemetry

import (
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	v141 "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// TestSemconvMatchesV141: every name and value of semconv is the one of
// go.opentelemetry.io/otel/semconv/v1.41.0, so the exported spans carry
// the same attributes and schema URL as when the package was imported.
func TestSemconvMatchesV141(t *testing.T) {
	if semconv.SchemaURL != v141.SchemaURL {
		t.Errorf("SchemaURL = %q, want %q", semconv.SchemaURL, v141.SchemaURL)
	}
	keys := []struct{ got, want attribute.Key }{
		{semconv.ErrorTypeKey, v141.ErrorTypeKey},
		{semconv.GenAIProviderNameKey, v141.GenAIProviderNameKey},
		{semconv.GenAIToolCallArgumentsKey, v141.GenAIToolCallArgumentsKey},
		{semconv.GenAIToolCallResultKey, v141.GenAIToolCallResultKey},
		{semconv.GenAIOutputMessagesKey, v141.GenAIOutputMessagesKey},
		{semconv.GenAIInputMessagesKey, v141.GenAIInputMessagesKey},
	}
	for _, k := range keys {
		if k.got != k.want {
			t.Errorf("key %q, want %q", k.got, k.want)
		}
	}
	kvs := []struct{ got, want attribute.KeyValue }{
		{semconv.GenAIOperationNameChat, v141.GenAIOperationNameChat},
		{semconv.GenAIOperationNameInvokeAgent, v141.GenAIOperationNameInvokeAgent},
		{semconv.GenAIOperationNameExecuteTool, v141.GenAIOperationNameExecuteTool},
		{semconv.TelemetrySDKLanguageGo, v141.TelemetrySDKLanguageGo},
		{semconv.GenAIAgentName("a"), v141.GenAIAgentName("a")},
		{semconv.GenAIConversationID("c"), v141.GenAIConversationID("c")},
		{semconv.GenAIRequestModel("m"), v141.GenAIRequestModel("m")},
		{semconv.GenAIToolName("t"), v141.GenAIToolName("t")},
		{semconv.GenAIToolCallID("i"), v141.GenAIToolCallID("i")},
		{semconv.GenAIToolType("extension"), v141.GenAIToolType("extension")},
		{semconv.GenAIResponseModel("r"), v141.GenAIResponseModel("r")},
		{semconv.ServiceName("s"), v141.ServiceName("s")},
		{semconv.TelemetrySDKName("opentelemetry"), v141.TelemetrySDKName("opentelemetry")},
		{semconv.GenAIUsageInputTokens(3), v141.GenAIUsageInputTokens(3)},
		{semconv.GenAIUsageOutputTokens(4), v141.GenAIUsageOutputTokens(4)},
		{semconv.GenAIUsageCacheReadInputTokens(5), v141.GenAIUsageCacheReadInputTokens(5)},
		{semconv.GenAIUsageReasoningOutputTokens(6), v141.GenAIUsageReasoningOutputTokens(6)},
		{semconv.GenAIResponseTimeToFirstChunk(0.25), v141.GenAIResponseTimeToFirstChunk(0.25)},
		{semconv.GenAIResponseFinishReasons("stop"), v141.GenAIResponseFinishReasons("stop")},
		{semconv.GenAIResponseFinishReasons("stop", "length"), v141.GenAIResponseFinishReasons("stop", "length")},
	}
	for _, kv := range kvs {
		got, want := kv.got.Value.AsInterface(), kv.want.Value.AsInterface()
		if kv.got.Key != kv.want.Key || kv.got.Value.Type() != kv.want.Value.Type() || !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%v (%s), want %s=%v (%s)", kv.got.Key, got, kv.got.Value.Type(), kv.want.Key, want, kv.want.Value.Type())
		}
	}
}
