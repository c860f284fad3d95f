package server

import (
	"github.com/stepwise-run/stepwise/wire"
	"net/http"
	"sort"
)

// listAgents: GET /v1/agents.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	out := &wire.AgentList{Agents: []*wire.Agent{}}
	for _, a := range s.eng.Agents() {
		out.Agents = append(out.Agents, agentWire(a))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getAgent: GET /v1/agents/{name}.
func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.eng.Agent(r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentWire(a))
	return nil
}

func sortStrings(s []string) { sort.Strings(s) }
