package cli

import (
	"errors"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// lastLoaded is the name of the agent loaded last from a file.
var lastLoaded string

func loadAgentFile(st store.Store, path string) (*stepwise.Agent, error) {
	return nil, errors.New("agent files are being wired")
}
