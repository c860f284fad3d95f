// Package bedrock is an [llm.Model] over the Amazon Bedrock Converse API
// (converse and converse-stream), signed with Signature Version 4.
//
//	m, err := bedrock.New(bedrock.Config{Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}) // region and keys from the environment
//	for r, err := range m.Generate(ctx, &llm.Request{
//		System:   "Be brief.",
//		Messages: []llm.Message{{Role: steptype.RoleUser, Content: "Hi"}},
//	}) {
//		if err != nil {
//			return err
//		}
//		if r.Partial {
//			fmt.Print(r.Content) // a delta
//		}
//	}
//
// # Credentials, region, endpoint
//
// Each request is signed (SigV4, service "bedrock") with the credentials
// of Config.Credentials, by default [DefaultCredentials]: the
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN variables,
// then the AWS_PROFILE profile of ~/.aws/credentials and ~/.aws/config
// (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE) — a role it assumes with
// STS, its keys or its credential_process —, then a web identity (EKS
// IRSA), then the ECS / EKS Pod Identity container endpoint, then the EC2
// instance metadata service. They are read before every
// request (expiring ones are kept until shortly before they expire), so
// rotated keys are picked up. A Bedrock API key
// (Config.BearerToken, AWS_BEARER_TOKEN_BEDROCK) replaces the signature
// with a bearer token. The region is Config.Region, else [DefaultRegion];
// the endpoint https://bedrock-runtime.REGION.amazonaws.com, or
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME / AWS_ENDPOINT_URL. The signing, the
// credential files and the event stream framing are written here, without
// the AWS SDK.
//
// # What is sent
//
// POST /model/{modelId}/converse-stream (or /converse with Config.Unary),
// the model id escaped as AWS does (an inference profile id or an ARN
// works too). The system prompt and system messages are the system
// blocks; consecutive messages of one side merge into one turn, so the
// results of parallel tool calls go back as toolResult blocks of one user
// message; assistant tool calls are toolUse blocks. Tools are
// toolConfig.tools with their JSON Schema unchanged. Request.MaxTokens,
// else Config.MaxTokens, and Request.Temperature are inferenceConfig.
// Config.PromptCaching ends the last message with a cachePoint block.
// Reasoning from earlier turns is not sent back (it needs the signature
// the model issued, which llm.Message has no field for).
//
// # What comes back
//
// converse-stream answers with binary event stream messages (prelude,
// headers, payload, CRC-32 checksums, all checked). Partial responses
// carry the text, reasoningContent and toolUse input deltas; a toolUse
// block's start yields a ToolCallDelta with its id and name. The final
// response, after messageStop, has the whole text and reasoning, the tool
// calls, the stop reason, the model id called (the stream names none) and
// the usage of the metadata event: InputTokens
// counts inputTokens + cacheReadInputTokens + cacheWriteInputTokens,
// CachedTokens the cache reads.
//
// # Errors
//
// One HTTP attempt per call: the engine retries and records each attempt.
// Failures are *llm.Error, classified for it, with an *APIError (the
// exception's type, message and x-amzn-RequestId) as the cause:
//
//   - HTTP errors by [llm.ClassifyHTTP] (ThrottlingException 429 and
//     ServiceUnavailableException 503 transient, ValidationException 400
//     and AccessDeniedException 403 permanent), except that
//     ModelErrorException, ModelNotReadyException, ModelTimeoutException and
//     ModelStreamErrorException are transient with Code "model_error";
//     the wait is Retry-After when the response has one;
//   - exceptions inside the stream by their type, the same way;
//   - a model that takes tools only without streaming:
//     its ValidationException is transient, Code "stream_unsupported",
//     and the Model sends requests with tools to converse from then on;
//   - no credentials: permanent, Code "auth", wrapping ErrNoCredentials;
//   - refused or reset connections and timeouts: transient;
//   - a stream that ends before messageStop: transient, Code
//     "stream_truncated";
//   - a message with a bad checksum or broken JSON: transient, Code
//     "bad_chunk";
//   - Config.Timeout expiring: transient, Code "timeout".
//
// Cancelling the caller's context stops the stream at once and yields
// ctx.Err() itself.
package bedrock
