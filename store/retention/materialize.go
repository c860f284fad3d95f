package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

var timeNow = time.Now

// copyNamespace derives the ids of materialised step copies: the copy of
// step S in fork F is always the same id, so an interrupted
// materialisation runs again without duplicating anything.
var copyNamespace = uuid.MustParse("6f1c0b7e-3d5a-4c1e-9b0a-5f7e2d8c4a10")

// CopyID is the id of the copy of step stepID materialised into fork
// forkID.
func CopyID(forkID, stepID string) string {
	return uuid.NewSHA1(copyNamespace, []byte(forkID+"\x00"+stepID)).String()
}

// Materialize gives a fork its own copies of the steps it inherits
// (sequences 1..its fork sequence, read through its lineage) and cuts its
// lineage, so its parent can be deleted. The copies keep the content,
// sequence, run and timestamps of the originals; they get new ids
// (CopyID) and the fork's session id. Copies are written batch steps per
// transaction; the lineage is cut last, in one small transaction, so
// readers see the fork unchanged throughout. A session that is not a fork
// is left alone. It returns how many steps it copied.
func Materialize(ctx context.Context, st store.Store, forkID string, batch int) (int64, error) {
	if batch <= 0 {
		batch = 200
	}
	f, err := st.SessionGet(ctx, &store.SessionGetParams{ID: forkID})
	if err != nil || f.ParentSessionID == "" {
		return 0, err
	}
	var copied int64
	det := &store.SessionDetachParams{ID: f.ID}
	for start := int64(1); start <= f.ForkSequence; {
		end := min(start+int64(batch)-1, f.ForkSequence)
		steps, err := st.StepList(ctx, &store.StepListParams{SessionID: f.ID, StartSeq: start, EndSeq: end})
		if err != nil {
			return copied, err
		}
		if len(steps) == 0 {
			return copied, fmt.Errorf("%w: fork %s reads no step %d through its lineage", store.ErrCorrupt, f.ID, start)
		}
		copies := make([]*steptype.Step, len(steps))
		for i, s := range steps {
			c := *s
			c.ID, c.SessionID = CopyID(f.ID, s.ID), f.ID
			copies[i] = &c
			det.InputTokens += s.Metrics.InputTokens
			det.OutputTokens += s.Metrics.OutputTokens
			det.Cost += s.Metrics.Cost
		}
		if err := st.StepImport(ctx, &store.StepImportParams{Steps: copies}); err != nil {
			return copied, err
		}
		copied += int64(len(copies))
		start = steps[len(steps)-1].Sequence + 1
	}
	return copied, st.SessionDetach(ctx, det)
}
