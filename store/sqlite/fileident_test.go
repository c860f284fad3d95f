package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// A database file deleted or replaced under the open store: Health says
// so, and every write is refused with ErrFileReplaced (an
// ErrUnavailable) instead of going to a file no later open sees.
func TestFileDeletedOrReplacedRefusesWrites(t *testing.T) {
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "gone.db")
			st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
				t.Fatal(err)
			}
			if err := st.Health(ctx); err != nil {
				t.Fatalf("health of a fresh store: %v", err)
			}
			switch how {
			case "deleted":
				err = os.Remove(path)
			case "replaced":
				if err = os.WriteFile(path+".new", []byte{}, 0o644); err == nil {
					err = os.Rename(path+".new", path)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			// Without a health check, a write notices within the check
			// interval.
			deadline := time.Now().Add(5 * time.Second)
			var werr error
			for i := 0; time.Now().Before(deadline); i++ {
				if _, werr = st.SessionCreate(ctx, &store.SessionCreateParams{ID: "w" + itoa(i)}); werr != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if !errors.Is(werr, sqlite.ErrFileReplaced) || !errors.Is(werr, store.ErrUnavailable) {
				t.Fatalf("write after the file was %s: %v", how, werr)
			}
			if err := st.Health(ctx); !errors.Is(err, sqlite.ErrFileReplaced) {
				t.Fatalf("health after the file was %s: %v", how, err)
			}
			if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "later"}); !errors.Is(err, sqlite.ErrFileReplaced) {
				t.Fatalf("a later write: %v", err)
			}
		})
	}
}
