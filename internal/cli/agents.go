package cli

import (
	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/demo"
	"github.com/stepwise-run/stepwise/store"
)

// builtinAgents are always registered: the demo agent and its sub-agent.
func builtinAgents(fast bool) ([]*stepwise.Agent, error) {
	a, err := demo.Agents(demo.Options{Fast: fast})
	if err != nil {
		return nil, err
	}
	return []*stepwise.Agent{a}, nil
}

// loadAgents returns the built-in agents and those of the agent files.
func loadAgents(st store.Store, files ...string) ([]*stepwise.Agent, error) {
	agents, err := builtinAgents(false)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		a, err := loadAgentFile(st, f)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	return agents, nil
}
