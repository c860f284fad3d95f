package cli

import (
	"context"
	"errors"

	"github.com/stepwise-run/stepwise"
)

// serveDemo is replaced when the server lands.
func (e *env) serveDemo(ctx context.Context, eng *stepwise.Engine, addr string) error {
	return errors.New("the dashboard server is not built yet; use --no-serve")
}
