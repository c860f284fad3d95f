package telemetry

import "go.opentelemetry.io/otel/attribute"

// semconv holds the semantic-convention names and values this package
// writes, exactly as go.opentelemetry.io/otel/semconv/v1.41.0 defines them
// (TestSemconvMatchesV141 compares every one with that package). They are
// written out instead of imported because the OpenTelemetry API and SDK
// already link their own, newer, semconv package: a second version was one
// more of the largest packages of the module to compile on a cold build of
// the binary ("First run and binary size" in docs/PERFORMANCE.md).
var semconv = struct {
	SchemaURL string

	ErrorTypeKey, GenAIProviderNameKey, GenAIToolCallArgumentsKey, GenAIToolCallResultKey,
	GenAIOutputMessagesKey attribute.Key
	GenAIInputMessagesKey attribute.Key

	GenAIOperationNameChat, GenAIOperationNameInvokeAgent, GenAIOperationNameExecuteTool,
	TelemetrySDKLanguageGo attribute.KeyValue

	GenAIAgentName, GenAIConversationID, GenAIRequestModel, GenAIToolName, GenAIToolCallID,
	GenAIToolType, GenAIResponseModel, ServiceName, TelemetrySDKName func(string) attribute.KeyValue

	GenAIUsageInputTokens, GenAIUsageOutputTokens, GenAIUsageCacheReadInputTokens,
	GenAIUsageReasoningOutputTokens func(int) attribute.KeyValue

	GenAIResponseTimeToFirstChunk func(float64) attribute.KeyValue
	GenAIResponseFinishReasons    func(...string) attribute.KeyValue
}{
	SchemaURL: "https://opentelemetry.io/schemas/1.41.0",

	ErrorTypeKey:              "error.type",
	GenAIProviderNameKey:      "gen_ai.provider.name",
	GenAIToolCallArgumentsKey: "gen_ai.tool.call.arguments",
	GenAIToolCallResultKey:    "gen_ai.tool.call.result",
	GenAIOutputMessagesKey:    "gen_ai.output.messages",
	GenAIInputMessagesKey:     "gen_ai.input.messages",

	GenAIOperationNameChat:        attribute.String("gen_ai.operation.name", "chat"),
	GenAIOperationNameInvokeAgent: attribute.String("gen_ai.operation.name", "invoke_agent"),
	GenAIOperationNameExecuteTool: attribute.String("gen_ai.operation.name", "execute_tool"),
	TelemetrySDKLanguageGo:        attribute.String("telemetry.sdk.language", "go"),

	GenAIAgentName:      attribute.Key("gen_ai.agent.name").String,
	GenAIConversationID: attribute.Key("gen_ai.conversation.id").String,
	GenAIRequestModel:   attribute.Key("gen_ai.request.model").String,
	GenAIToolName:       attribute.Key("gen_ai.tool.name").String,
	GenAIToolCallID:     attribute.Key("gen_ai.tool.call.id").String,
	GenAIToolType:       attribute.Key("gen_ai.tool.type").String,
	GenAIResponseModel:  attribute.Key("gen_ai.response.model").String,
	ServiceName:         attribute.Key("service.name").String,
	TelemetrySDKName:    attribute.Key("telemetry.sdk.name").String,

	GenAIUsageInputTokens:           attribute.Key("gen_ai.usage.input_tokens").Int,
	GenAIUsageOutputTokens:          attribute.Key("gen_ai.usage.output_tokens").Int,
	GenAIUsageCacheReadInputTokens:  attribute.Key("gen_ai.usage.cache_read.input_tokens").Int,
	GenAIUsageReasoningOutputTokens: attribute.Key("gen_ai.usage.reasoning.output_tokens").Int,

	GenAIResponseTimeToFirstChunk: attribute.Key("gen_ai.response.time_to_first_chunk").Float64,
	GenAIResponseFinishReasons: func(v ...string) attribute.KeyValue {
		return attribute.Key("gen_ai.response.finish_reasons").StringSlice(v)
	},
}
