package agentfile_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/agentfile"
)

func TestParseErrors(t *testing.T) {
	t.Parallel()
	const base = "name: a\nmodel: openai:gpt-4o\n" // lines 1-2
	tests := []struct{ name, src, want string }{
		{"empty", "", "agent.yaml: empty document"},
		{"not a mapping", "- a\n", "agent.yaml:1: an agent file must be a mapping of fields"},
		{"null document", "&a\n", "agent.yaml:1: an agent file must be a mapping of fields"},
		{"syntax", "name: a\nmodel: [\n", "agent.yaml:"},
		{"missing name", "model: openai:gpt-4o\n", "agent.yaml:1: name: required"},
		{"missing model", "name: a\n", "agent.yaml:1: model: required"},
		{"bad name", "name: Support Bot\nmodel: openai:x\n", "agent.yaml:1: name: must be 1–64 characters of a-z, 0-9, _ and -"},
		{"long name", "name: " + strings.Repeat("a", 65) + "\nmodel: openai:x\n", "agent.yaml:1: name: must be 1–64"},
		{"name not string", "name: [a]\nmodel: openai:x\n", "agent.yaml:1: name: must be a string"},
		{"unknown field", base + "tool: [clock]\n", "agent.yaml:3: tool: unknown field"},
		{"duplicate field", base + "name: b\n", "agent.yaml:3: name: duplicate field"},
		{"model no provider", "name: a\nmodel: gpt-4o\n", `agent.yaml:2: model: must be a model such as "openai:gpt-4o-mini"`},
		{"model unknown provider", "name: a\nmodel: vertex:pro\n", `agent.yaml:2: model: unknown provider "vertex"`},
		{"model empty id", "name: a\nmodel: 'openai:'\n", "agent.yaml:2: model: must be a model"},
		{"model spaces", "name: a\nmodel: openai:gpt 4\n", `agent.yaml:2: model: model id "gpt 4" must not contain spaces`},
		{"base_url", base + "model_options:\n  base_url: localhost:8080\n", "agent.yaml:4: model_options.base_url: must be an http or https URL"},
		{"api_key_env", base + "model_options: {api_key_env: sk-123}\n", "agent.yaml:3: model_options.api_key_env: must be an environment variable name"},
		{"temperature high", base + "model_options:\n  temperature: 3\n", "agent.yaml:4: model_options.temperature: must be a number from 0 to 2"},
		{"temperature string", base + "model_options:\n  temperature: hot\n", "agent.yaml:4: model_options.temperature: must be a number from 0 to 2"},
		{"max_tokens zero", base + "model_options:\n  max_tokens: 0\n", "agent.yaml:4: model_options.max_tokens: must be a positive integer"},
		{"timeout number", base + "model_options:\n  timeout: 30\n", `agent.yaml:4: model_options.timeout: must be a positive Go duration such as "30s" or "5m"`},
		{"unknown option", base + "model_options:\n  top_p: 1\n", "agent.yaml:4: model_options.top_p: unknown field"},
		{"unknown tool", base + "tools:\n  - clock\n  - shell\n", `agent.yaml:5: tools[1]: unknown tool "shell" (want one of calculator, clock, files, http_get, ask_human, past_steps_search, trace)`},
		{"bad reducer", base + "reducers:\n  n: max\n", "agent.yaml:4: reducers.n: must be one of replace, append, merge, sum"},
		{"bad on_update", base + "on_update: later\n", "agent.yaml:3: on_update: must be continue, restart or fail"},
		{"bad step_map", base + "step_map:\n  review: 'a b'\n", "agent.yaml:4: step_map.review: must be a step name"},
		{"bad breakpoint", base + "breakpoints:\n  before: ['a b']\n", "agent.yaml:4: breakpoints.before[0]: must be a step name, a kind"},
		{"breakpoint field", base + "breakpoints:\n  during: [llm]\n", "agent.yaml:4: breakpoints.during: unknown field"},
		{"duplicate tool", base + "tools: [clock, clock]\n", `agent.yaml:3: tools[1]: duplicate tool "clock"`},
		{"tool two keys", base + "tools:\n  - {files: {root: a}, clock: {}}\n", "agent.yaml:4: tools[0]: must be a tool name or a mapping of one tool name to its configuration"},
		{"tool number", base + "tools: [5]\n", "agent.yaml:3: tools[0]: must be a tool name or a mapping"},
		{"files without root", base + "tools:\n  - files\n", "agent.yaml:4: tools[0].files.root: required: the directory the files tool works in"},
		{"files empty root", base + "tools:\n  - files: {root: ''}\n", "agent.yaml:4: tools[0].files.root: must not be empty"},
		{"files bad config", base + "tools:\n  - files:\n      root: a\n      mode: rw\n", "agent.yaml:6: tools[0].files.mode: unknown field"},
		{"config for calculator", base + "tools:\n  - calculator: {precision: 2}\n", "agent.yaml:4: tools[0].calculator.precision: unknown field"},
		{"http_get without hosts", base + "tools: [http_get]\n", "agent.yaml:3: tools[0].http_get.allow_hosts: required"},
		{"http_get empty hosts", base + "tools:\n  - http_get: {allow_hosts: []}\n", "agent.yaml:4: tools[0].http_get.allow_hosts: must list at least one host"},
		{"http_get bad host", base + "tools:\n  - http_get:\n      allow_hosts:\n        - https://x.com\n", `agent.yaml:6: tools[0].http_get.allow_hosts[0]: must be a host such as "api.example.com"`},
		{"mcp no name", base + "mcp_servers:\n  - command: srv\n", "agent.yaml:4: mcp_servers[0].name: required"},
		{"mcp both", base + "mcp_servers:\n  - name: s\n    command: srv\n    url: http://x\n", "agent.yaml:4: mcp_servers[0]: set command or url, not both"},
		{"mcp neither", base + "mcp_servers:\n  - name: s\n", "agent.yaml:4: mcp_servers[0]: needs command (stdio) or url (HTTP)"},
		{"mcp duplicate", base + "mcp_servers:\n  - {name: s, command: a}\n  - {name: s, command: b}\n", `agent.yaml:5: mcp_servers[1].name: duplicate server name "s"`},
		{"mcp bad url", base + "mcp_servers:\n  - name: s\n    url: ftp://x\n", "agent.yaml:5: mcp_servers[0].url: must be an http or https URL"},
		{"mcp env key", base + "mcp_servers:\n  - name: s\n    command: a\n    env: {A-B: x}\n", "agent.yaml:6: mcp_servers[0].env.A-B: key must be an environment variable name"},
		{"mcp env list", base + "mcp_servers:\n  - name: s\n    command: a\n    env: [A=1]\n", "agent.yaml:6: mcp_servers[0].env: must be a mapping"},
		{"mcp header key", base + "mcp_servers:\n  - name: s\n    url: http://x\n    headers: {'a b': x}\n", "agent.yaml:6: mcp_servers[0].headers.a b: key must be an HTTP header name"},
		{"mcp headers with command", base + "mcp_servers:\n  - name: s\n    command: a\n    headers: {A: b}\n", "agent.yaml:4: mcp_servers[0].headers: need url"},
		{"mcp args with url", base + "mcp_servers:\n  - name: s\n    url: http://x\n    args: [a]\n", "agent.yaml:4: mcp_servers[0]: args and env need command"},
		{"sub_agents not list", base + "sub_agents: a.yaml\n", "agent.yaml:3: sub_agents: must be a list"},
		{"sub_agents empty", base + "sub_agents: ['']\n", "agent.yaml:3: sub_agents[0]: must be a path"},
		{"a2a missing url", base + "sub_agents:\n  - name: r\n", "agent.yaml:4: sub_agents[0].a2a: required: the URL of the remote agent's card"},
		{"a2a bad url", base + "sub_agents:\n  - a2a: localhost:8080/a2a/r\n", "agent.yaml:4: sub_agents[0].a2a: must be an http or https URL"},
		{"a2a bad name", base + "sub_agents:\n  - {a2a: 'http://h/a2a/r', name: 'Re search'}\n", "agent.yaml:4: sub_agents[0].name: must be 1–64 characters"},
		{"a2a duplicate", base + "sub_agents:\n  - {a2a: 'http://h/a', name: r}\n  - {a2a: 'http://h/b', name: r}\n", `agent.yaml:5: sub_agents[1].name: duplicate sub-agent name "r"`},
		{"a2a token_env", base + "sub_agents:\n  - {a2a: 'http://h/a', token_env: 'x-y'}\n", "agent.yaml:4: sub_agents[0].token_env: must be an environment variable name"},
		{"a2a header", base + "sub_agents:\n  - {a2a: 'http://h/a', headers: {'a b': x}}\n", "agent.yaml:4: sub_agents[0].headers.a b: key must be an HTTP header name"},
		{"a2a unknown", base + "sub_agents:\n  - {a2a: 'http://h/a', token: x}\n", "agent.yaml:4: sub_agents[0].token: unknown field"},
		{"start_step", base + "start_step: 'my step'\n", "agent.yaml:3: start_step: must be a step name"},
		{"max_steps negative", base + "limits:\n  max_steps: -1\n", "agent.yaml:4: limits.max_steps: must be a positive integer"},
		{"max_steps string", base + "limits:\n  max_steps: '10'\n", "agent.yaml:4: limits.max_steps: must be a positive integer"},
		{"max_steps float", base + "limits:\n  max_steps: 1.5\n", "agent.yaml:4: limits.max_steps: must be a positive integer"},
		{"step_timeout", base + "limits:\n  step_timeout: 10 seconds\n", "agent.yaml:4: limits.step_timeout: must be a positive Go duration"},
		{"run_timeout zero", base + "limits:\n  run_timeout: 0s\n", "agent.yaml:4: limits.run_timeout: must be a positive Go duration"},
		{"max_depth", base + "limits: {max_depth: 0}\n", "agent.yaml:3: limits.max_depth: must be a positive integer"},
		{"limits unknown", base + "limits:\n  max_tokens: 5\n", "agent.yaml:4: limits.max_tokens: unknown field"},
		{"retry attempts", base + "retry:\n  max_attempts: 0\n", "agent.yaml:4: retry.max_attempts: must be a positive integer"},
		{"retry intervals", base + "retry:\n  initial_interval: 10s\n  max_interval: 1s\n", "agent.yaml:5: retry.max_interval: must not be below initial_interval (10s)"},
		{"approval value", base + "approvals:\n  files: sometimes\n", `agent.yaml:4: approvals.files: must be "always" or "never"`},
		{"approval bool", base + "approvals:\n  files: true\n", `agent.yaml:4: approvals.files: must be "always" or "never"`},
		{"approval key", base + "approvals:\n  'rm -rf': always\n", `agent.yaml:4: approvals.rm -rf: key must be a tool name or "*"`},
		{"context strategy", base + "context:\n  strategy: compress\n", `agent.yaml:4: context.strategy: must be "trim" or "summarize"`},
		{"token budget", base + "context: {token_budget: -5}\n", "agent.yaml:3: context.token_budget: must be a positive integer"},
		{"embedding kind", base + "embeddings:\n  kinds: [user, thought]\n", `agent.yaml:4: embeddings.kinds[1]: unknown step kind "thought"`},
		{"embedding duplicate", base + "embeddings:\n  kinds: [user, user]\n", `agent.yaml:4: embeddings.kinds[1]: duplicate kind "user"`},
		{"price negative", base + "prices:\n  openai:gpt-4o:\n    input: -1\n", `agent.yaml:5: prices["openai:gpt-4o"].input: must be a non-negative number`},
		{"price unknown", base + "prices:\n  openai:gpt-4o: {inputs: 1}\n", `agent.yaml:4: prices["openai:gpt-4o"].inputs: unknown field`},
		{"price not mapping", base + "prices:\n  openai:gpt-4o: 5\n", `agent.yaml:4: prices["openai:gpt-4o"]: must be a mapping`},
		{"metadata list", base + "metadata: [a]\n", "agent.yaml:3: metadata: must be a mapping"},
		{"metadata nan", base + "metadata:\n  x: .nan\n", `agent.yaml:4: metadata.x: value ".nan" has no JSON form`},
		{"metadata tag", base + "metadata:\n  x: !secret y\n", "agent.yaml:4: metadata.x: unsupported YAML tag !secret"},
		{"cyclic alias", base + "metadata:\n  a: &x [1, *x]\n", "agent.yaml:4: metadata.a"},
		{"merge key", base + "limits:\n  <<: {max_steps: 1}\n", "agent.yaml:4: limits: merge keys (<<) are not supported"},
		{"two documents", base + "---\nname: b\n", "agent.yaml:3: more than one YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := agentfile.Parse("agent.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error: %+v", s)
			}
			if s != nil {
				t.Fatal("spec returned with an error")
			}
			if !strings.HasPrefix(err.Error(), tt.want) && !strings.Contains(err.Error(), "\n"+tt.want) {
				t.Fatalf("error\n%v\nwant prefix %q", err, tt.want)
			}
			var pe *agentfile.ParseError
			if !errors.As(err, &pe) || pe.File != "agent.yaml" {
				t.Fatalf("%T is not a *ParseError for agent.yaml", err)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	t.Parallel()
	_, err := agentfile.Parse("agents/a.yaml", []byte("name: A\nmodel: openai:x\nlimits:\n  max_steps: 0\n  step_timeout: soon\n"))
	want := "agents/a.yaml:1: name: must be 1–64 characters of a-z, 0-9, _ and -\n" +
		"agents/a.yaml:4: limits.max_steps: must be a positive integer\n" +
		`agents/a.yaml:5: limits.step_timeout: must be a positive Go duration such as "30s" or "5m"`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	var pe *agentfile.ParseError
	if !errors.As(err, &pe) || pe.Line != 1 || pe.Field != "name" {
		t.Fatalf("first error %+v", pe)
	}
}

func TestParseJSONErrors(t *testing.T) {
	t.Parallel()
	_, err := agentfile.Parse("agent.json", []byte("{\n  \"name\": \"a\",\n  \"model\": \"openai:x\",\n}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "agent.json:4: invalid JSON: ") {
		t.Fatalf("got %v", err)
	}
	_, err = agentfile.Parse("agent.json", []byte("{\n\t\"name\": \"a\",\n\t\"model\": \"openai:x\",\n\t\"limits\": {\"max_steps\": \"many\"}\n}\n"))
	if err == nil || err.Error() != "agent.json:4: limits.max_steps: must be a positive integer" {
		t.Fatalf("got %v", err)
	}
}
