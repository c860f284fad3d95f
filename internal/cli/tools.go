package cli

import (
	"github.com/stepwise-run/stepwise/internal/agentfile"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// extraTools are the built-in tools that live outside the agent loader.
func extraTools(st store.Store) map[string]func(agentfile.Tool) (tool.Tool, error) {
	return map[string]func(agentfile.Tool) (tool.Tool, error){
		agentfile.ToolPastStepsSearch: func(agentfile.Tool) (tool.Tool, error) {
			return recall.NewTool(recall.ToolConfig{Store: st, Embedder: recall.DefaultEmbedder()})
		},
	}
}
