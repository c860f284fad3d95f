package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/transfer"
)

func init() { register(copyCmd) }

func copyCmd(e *env) *cobra.Command {
	var from, to, checkpoint string
	var page int
	var quiet, jsonOut bool
	c := &cobra.Command{
		Use:   "copy --from DB --to DB",
		Short: "Copy a database to another one, of any driver (SQLite → PostgreSQL)",
		Long: `Copy every session (fork lineage, runs, steps, inputs), the observation data
(evals, annotations, attachments and their blobs, step events, datasets,
experiments) and the step vectors of --from into --to. DB is sqlite:PATH (or a
path) or postgres://…; the destination is created and migrated when missing.

Steps are streamed --page at a time, so memory stays bounded. Unfinished runs
stay resumable on the destination: their leases are cleared and the next
server claims them. Every session is read back from the destination and its
counts and content hash compared with the source; each is printed.

The copy is resumable: progress is kept in --checkpoint (default: beside a
SQLite destination, else in the working directory), and a copy run again
continues after the last session it finished. Rows the destination holds with
the same content are accepted; a destination holding different data under
the same ids is refused and nothing more is written. Copy a database nothing
writes to meanwhile (stop its server).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return usagef("copy needs --from DB and --to DB")
			}
			if page < 1 || page > 10000 {
				return usagef("--page %d: want 1..10000", page)
			}
			for _, dsn := range []string{from, to} {
				if dsn == "memory:" || dsn == "memory" {
					return usagef("copy works between databases: sqlite:PATH or postgres://…, not %q", dsn)
				}
			}
			if sameDB(from, to) {
				return usagef("--from and --to are the same database")
			}
			return e.copy(cmd.Context(), from, to, checkpoint, page, quiet, jsonOut)
		},
	}
	c.Flags().StringVar(&from, "from", "", "source database: sqlite:PATH or postgres://…")
	c.Flags().StringVar(&to, "to", "", "destination database: sqlite:PATH or postgres://…")
	c.Flags().StringVar(&checkpoint, "checkpoint", "", "progress file of a resumable copy")
	c.Flags().IntVar(&page, "page", 500, "steps per read and write")
	c.Flags().BoolVar(&quiet, "quiet", false, "print the summary only, not each verified session")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the verification and summary as JSON lines")
	return c
}

func sameDB(a, b string) bool {
	if strings.Contains(a, "://") || strings.Contains(b, "://") {
		return a == b
	}
	pa, err1 := filepath.Abs(strings.TrimPrefix(a, "sqlite:"))
	pb, err2 := filepath.Abs(strings.TrimPrefix(b, "sqlite:"))
	return err1 == nil && err2 == nil && pa == pb
}

// checkpointPath is the default checkpoint of a copy: beside a SQLite
// destination, else in the working directory, named after both databases.
func checkpointPath(from, to string) string {
	if !strings.Contains(to, "://") {
		return strings.TrimPrefix(to, "sqlite:") + ".copy-checkpoint"
	}
	h := sha256.Sum256([]byte(from + "\x00" + to))
	return "stepwise-copy-" + hex.EncodeToString(h[:6]) + ".checkpoint"
}

func (e *env) copy(ctx context.Context, from, to, checkpoint string, page int, quiet, jsonOut bool) error {
	src, err := openStore(ctx, from, true)
	if err != nil {
		return fmt.Errorf("open source %s: %w", from, err)
	}
	defer src.Close()
	if c, ok := src.(interface{ IntegrityCheck(context.Context) error }); ok {
		if err := c.IntegrityCheck(ctx); err != nil {
			return fmt.Errorf("source %s: %w; nothing was copied", from, err)
		}
	}
	dst, err := openStore(ctx, to, false)
	if err != nil {
		return fmt.Errorf("open destination %s: %w; nothing was copied", to, err)
	}
	defer dst.Close()
	if checkpoint == "" {
		checkpoint = checkpointPath(from, to)
	}
	cp := &transfer.FileCheckpoint{Path: checkpoint, From: redact(from), To: redact(to)}
	bar := newProgressBar(e.stderr)
	enc := json.NewEncoder(e.stdout)
	opts := transfer.Options{
		PageSize:   page,
		Checkpoint: cp,
		Progress:   bar.update,
		Verified: func(r *transfer.SessionReport) {
			switch {
			case jsonOut:
				_ = enc.Encode(map[string]any{"session": r.ID, "ok": r.OK, "source": r.Source, "destination": r.Dst})
			case !quiet || !r.OK:
				bar.clear()
				status := "ok"
				if !r.OK {
					status = "MISMATCH destination " + r.Dst.String()
				}
				fmt.Fprintf(e.stdout, "verified %s %s %s\n", r.ID, r.Source.String(), status)
			}
		},
	}
	if after, err := cp.Load(); err == nil && after != "" {
		fmt.Fprintf(e.stderr, "resuming the copy after session %s (checkpoint %s)\n", after, checkpoint)
	}
	rep, err := transfer.Copy(ctx, src, dst, opts)
	bar.done()
	switch {
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("copy refused: %w (copy into an empty database, or one this copy wrote)", err)
	case errors.Is(err, transfer.ErrVerify):
		return fmt.Errorf("copy: %w", err)
	case err != nil:
		return fmt.Errorf("copy: %w (progress is kept in %s: run the same command again to continue)", err, checkpoint)
	}
	if jsonOut {
		return enc.Encode(rep)
	}
	rate := 0.0
	if s := rep.Elapsed.Seconds(); s > 0 {
		rate = float64(rep.Steps) / s
	}
	fmt.Fprintf(e.stdout, "copied %d sessions, %d steps, %d datasets, %d experiments in %s (%.0f steps/s); %d sessions done by an earlier run; verified: all match\n",
		rep.Sessions, rep.Steps, rep.Datasets, rep.Experiments, rep.Elapsed.Round(1e6), rate, rep.Skipped)
	return nil
}

// redact drops the password of a postgres:// DSN.
func redact(dsn string) string {
	i := strings.Index(dsn, "://")
	at := strings.LastIndex(dsn, "@")
	if i < 0 || at < i {
		return dsn
	}
	cred := dsn[i+3 : at]
	if c := strings.Index(cred, ":"); c >= 0 {
		cred = cred[:c] + ":***"
	}
	return dsn[:i+3] + cred + dsn[at:]
}
