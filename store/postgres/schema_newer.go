package postgres

import (
	"context"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/stepwise-run/stepwise/store"
)

// checkNewer fails with store.ErrNewerSchema when the database was
// migrated by a newer stepwise than this one: its tables may hold what
// this binary would misread or overwrite. A database without a version
// table yet passes (Up creates it).
func checkNewer(ctx context.Context, p *goose.Provider) error {
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		return nil
	}
	srcs := p.ListSources()
	if len(srcs) == 0 {
		return nil
	}
	if known := srcs[len(srcs)-1].Version; cur > known {
		return fmt.Errorf("%w: schema version %d, this stepwise knows versions up to %d: upgrade stepwise to open it",
			store.ErrNewerSchema, cur, known)
	}
	return nil
}
