package agentfile

import (
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// Spec is a parsed agent file: a neutral description that the engine turns
// into an agent. Zero values mean "not set, use the engine's default". Paths
// in the file (scripted model, files root, sub-agents, MCP commands with a
// slash) are resolved against Dir. See docs/agent_file.md.
type Spec struct {
	// File is the file name given to Parse or Load.
	File string
	// Dir is the directory of File, against which relative paths were
	// resolved.
	Dir string

	// Name identifies the agent: 1–64 characters of [a-z0-9_-]. Required.
	Name string
	// Description says what the agent does (shown to a parent agent that
	// calls it as a sub-agent).
	Description string
	// Instructions are the system prompt.
	Instructions string
	// Model is the model the agent calls. Required.
	Model Model
	// ModelOptions tune the model client.
	ModelOptions ModelOptions
	// Tools are the built-in tools the agent may call, in file order.
	Tools []Tool
	// MCPServers are MCP servers whose tools the agent may call.
	MCPServers []MCPServer
	// SubAgents are the paths of agent files callable as sub-agents,
	// resolved against Dir. They are not read by Parse.
	SubAgents []string
	// A2AAgents are remote agents reached over A2A (Agent2Agent, JSON-RPC),
	// listed in sub_agents as mappings: each is a tool of this agent whose
	// call is a task on the remote agent.
	A2AAgents []A2AAgent
	// StartStep is the name of the first step of a run; "" means the
	// engine's default ("llm").
	StartStep string
	// Limits bound a run.
	Limits Limits
	// Retry is the retry policy of model and tool calls.
	Retry Retry
	// Approvals maps a tool name (or "*", every other tool) to whether a
	// human must approve its calls.
	Approvals map[string]Approval
	// Context bounds the model context.
	Context ContextPolicy
	// Embeddings says which steps get an embedding vector.
	Embeddings Embeddings
	// Prices maps a model string ("openai:gpt-4o-mini") to its price.
	Prices map[string]Price
	// Reducers maps a run-state key to how its updates combine: "replace",
	// "append", "merge" or "sum" (ReducerNames).
	Reducers map[string]string
	// OnUpdate is what runs started on an older version of this agent do
	// when this version is loaded: UpdateContinue, UpdateRestart or
	// UpdateFail; "" means the engine's default (continue).
	OnUpdate string
	// StepMap maps a step name of an older version to its name in this
	// one, for runs whose cursor names a step that no longer exists.
	StepMap map[string]string
	// Breakpoints pause every run of the agent before or after the steps
	// they select (docs/breakpoints.md).
	Breakpoints Breakpoints
	// Metadata is free-form, JSON-compatible data.
	Metadata map[string]any
	// Observe configures events inside steps, summaries and judges.
	Observe Observe
}

// Model providers.
const (
	ProviderScripted  = "scripted"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderGemini    = "gemini"
	ProviderBedrock   = "bedrock"
)

// Model names a model as "provider:name".
type Model struct {
	// Provider is ProviderScripted, ProviderOpenAI, ProviderAnthropic,
	// ProviderGemini or ProviderBedrock.
	Provider string
	// Name is the provider's model id ("gpt-4o-mini"); for scripted models,
	// the script path resolved against the agent file's directory.
	Name string
}

// String returns "provider:name".
func (m Model) String() string { return m.Provider + ":" + m.Name }

// ModelOptions tune the model client. Scripted models ignore them.
type ModelOptions struct {
	// BaseURL overrides the provider's API endpoint (an http or https URL),
	// e.g. a local OpenAI-compatible server.
	BaseURL string
	// APIKeyEnv is the environment variable holding the API key; "" means
	// the provider's usual one (OPENAI_API_KEY, ANTHROPIC_API_KEY,
	// GOOGLE_API_KEY or GEMINI_API_KEY; for Bedrock an API key,
	// AWS_BEARER_TOKEN_BEDROCK, which replaces the SigV4 credentials).
	APIKeyEnv string
	// Temperature is the sampling temperature, 0–2; nil means the provider's
	// default.
	Temperature *float64
	// MaxTokens caps the output tokens of one call; 0 means the provider's
	// default.
	MaxTokens int
	// Timeout bounds one model call; 0 means the client's default.
	Timeout time.Duration
}

// Built-in tool names accepted in the tools list.
const (
	ToolCalculator      = "calculator"
	ToolClock           = "clock"
	ToolFiles           = "files"
	ToolHTTPGet         = "http_get"
	ToolAskHuman        = "ask_human"
	ToolPastStepsSearch = "past_steps_search"
	ToolTrace           = "trace"
)

// BuiltinTools lists the built-in tool names in a stable order.
var BuiltinTools = []string{ToolCalculator, ToolClock, ToolFiles, ToolHTTPGet, ToolAskHuman, ToolPastStepsSearch, ToolTrace}

// Tool is a built-in tool and its configuration.
type Tool struct {
	// Name is one of BuiltinTools.
	Name string
	// Root is the directory the files tool works in, resolved against the
	// agent file's directory. Required for files, empty otherwise.
	Root string
	// AllowHosts are the hosts http_get may fetch: "example.com",
	// "*.example.com", "localhost:8080", or "*" for any host. Required for
	// http_get, empty otherwise.
	AllowHosts []string
}

// MCPServer is an MCP server reached either by starting Command (stdio
// transport) or at URL (streamable HTTP transport); exactly one is set.
type MCPServer struct {
	// Name identifies the server: [a-z0-9_-]. Required, unique.
	Name string
	// Command starts the server. A command containing a slash is resolved
	// against the agent file's directory; a bare name is looked up in PATH
	// when started.
	Command string
	// Args are the command's arguments.
	Args []string
	// Env are extra environment variables for the command, taken literally.
	Env map[string]string
	// URL is the server's http or https endpoint.
	URL string
	// Headers are sent with every request to URL, taken literally.
	Headers map[string]string
	// Elicitation lets the server ask a person during a tool call
	// (elicitation/create): each request becomes a waiting input request of
	// the run, and the call is made again with the answers. The server's
	// calls then run one at a time.
	Elicitation bool
}

// A2AAgent is a remote A2A agent used as a sub-agent.
type A2AAgent struct {
	// URL is the agent's card (a URL whose path ends in .json) or its
	// JSON-RPC endpoint, whose card is then at
	// URL/.well-known/agent-card.json. Required.
	URL string
	// Name is the tool name the model calls ([a-z0-9_-]); "" means the
	// card's name.
	Name string
	// Description is shown to the model; "" means the card's.
	Description string
	// Headers are sent with every request (card and JSON-RPC), literally.
	Headers map[string]string
	// TokenEnv names the environment variable holding a bearer token sent
	// as Authorization: Bearer <token>; read when the agent is built.
	TokenEnv string
}

// Limits bound a run; zero means the engine's default.
type Limits struct {
	MaxSteps         int           // steps per run
	StepTimeout      time.Duration // one step
	RunTimeout       time.Duration // a whole run
	MaxParallelTools int           // tool calls executed at once
	MaxDepth         int           // sub-agent nesting
}

// Retry is the retry policy of transient model and tool errors; zero means
// the engine's default.
type Retry struct {
	MaxAttempts     int           // attempts in all, the first included
	InitialInterval time.Duration // backoff before the second attempt
	MaxInterval     time.Duration // backoff cap; not below InitialInterval
}

// Approval says whether a tool's calls need a human's approval.
type Approval string

// Approval values.
const (
	ApprovalAlways Approval = "always" // every call waits for approval
	ApprovalNever  Approval = "never"  // calls run without asking
)

// Context strategies.
const (
	StrategyTrim      = "trim"      // drop the oldest steps
	StrategySummarize = "summarize" // replace the oldest steps by a summary
)

// NoTokenBudget is ContextPolicy.TokenBudget for `token_budget: none`: the
// model sees every message (stepwise.NoTokenBudget).
const NoTokenBudget = -1

// ContextPolicy bounds the model context.
type ContextPolicy struct {
	// TokenBudget is the most tokens the context may hold; 0 means the
	// engine's default (from the model's context window), NoTokenBudget
	// ("none" in the file) no budget at all.
	TokenBudget int
	// Strategy is StrategyTrim or StrategySummarize; "" means the engine's
	// default.
	Strategy string
}

// Embeddings says which steps get an embedding vector.
type Embeddings struct {
	// Kinds are the step kinds to embed.
	Kinds []steptype.Kind
	// Embedder names the embedding model, e.g.
	// "openai:text-embedding-3-small"; "" means the engine's default.
	Embedder string
	// Reranker, when set, has a model rerank what past_steps_search finds.
	Reranker *Reranker
}

// Reranker configures an LLM reranker of similarity search results.
type Reranker struct {
	// Model ranks the candidates. Required.
	Model Model
	// DropUnlisted drops the candidates the model does not list.
	DropUnlisted bool
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input  float64 // uncached input tokens
	Output float64 // output tokens
	Cached float64 // cached input tokens
}

// Breakpoints are selectors of steps to pause a run before or after: a step
// name, a kind (llm, tool, custom), a tool name, "*", or "step:NAME",
// "kind:KIND", "tool:NAME".
type Breakpoints struct {
	Before []string
	After  []string
}
