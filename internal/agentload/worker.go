package agentload

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/agentfile"
)

// FromWorkerDefinition builds the agent a worker registers
// (docs/workers.md): an agent file as a JSON object. A worker may not make
// the server run or read anything of the server's machine on its behalf:
// MCP servers started by command, sub-agent files, the files tool and
// scripted models (files) are refused.
func FromWorkerDefinition(ctx context.Context, definition json.RawMessage, o Options) (*Loaded, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(definition, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("definition must be a JSON object (an agent file, docs/agent_file.md)")
	}
	spec, err := agentfile.Parse("definition.json", definition)
	if err != nil {
		return nil, err
	}
	if spec.Model.Provider == agentfile.ProviderScripted {
		return nil, fmt.Errorf("model: a scripted model reads a file of the server; a worker cannot register one")
	}
	if len(spec.SubAgents) > 0 {
		return nil, fmt.Errorf("sub_agents: they name files of the server; a worker cannot register them")
	}
	for _, t := range spec.Tools {
		if t.Name == agentfile.ToolFiles {
			return nil, fmt.Errorf("tools: the files tool works on the server's disk; a worker cannot register it")
		}
	}
	for _, m := range spec.MCPServers {
		if m.Command != "" {
			return nil, fmt.Errorf("mcp_servers.%s: a command would run on the server; a worker may name MCP servers by url only", m.Name)
		}
	}
	return FromSpec(ctx, spec, o)
}
