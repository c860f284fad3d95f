package postgres

import (
	"context"
)

// MapErr exposes mapErr to the tests.
var MapErr = mapErr

// TxAttempts runs a transaction whose function fails with err on its
// first failures attempts, and reports how many attempts ran.
func (s *Store) TxAttempts(ctx context.Context, failures int, err error) (int, error) {
	n := 0
	_, txErr := inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		n++
		if n <= failures {
			return struct{}{}, err
		}
		_, err := tx.Exec(ctx, `SELECT 1`)
		return struct{}{}, err
	})
	return n, txErr
}
