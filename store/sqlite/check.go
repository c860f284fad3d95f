package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/store"
)

// IntegrityCheck runs SQLite's quick_check over the whole file and fails
// with store.ErrCorrupt, naming the first problems, when the file is
// damaged or was cut short (a copy taken mid-write, a full disk). It reads
// every page, so it takes about as long as reading the database once.
func (s *Store) IntegrityCheck(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	rows, err := s.rdb.QueryContext(ctx, `PRAGMA quick_check(5)`)
	if err != nil {
		return fmt.Errorf("%w: %v", store.ErrCorrupt, mapErr(err))
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("%w: %v", store.ErrCorrupt, mapErr(err))
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %v", store.ErrCorrupt, mapErr(err))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s", store.ErrCorrupt, s.path, strings.Join(problems, "; "))
	}
	return nil
}
