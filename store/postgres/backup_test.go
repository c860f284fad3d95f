package postgres_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// pgTool finds a PostgreSQL client program: on PATH, else the highest
// /usr/lib/postgresql/*/bin. Under STEPWISE_REQUIRE_POSTGRES=1 a missing
// program fails the test.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(dirs) > 0 {
		return dirs[len(dirs)-1]
	}
	if os.Getenv("STEPWISE_REQUIRE_POSTGRES") == "1" {
		t.Fatalf("%s not found (install the PostgreSQL client programs)", name)
	}
	t.Skipf("%s not found", name)
	return ""
}

// The PostgreSQL backup of docs/operations.md: pg_dump of the store's
// schema, taken while a store is open, restored with pg_restore after the
// schema was dropped, opens as a store with everything in it — steps,
// observation data, blobs and vectors — and keeps working (the vector
// delete trigger included).
func TestBackupPgDumpRestore(t *testing.T) {
	t.Parallel()
	pgDump, pgRestore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")
	ctx := t.Context()
	schema := freshSchema(t)
	cfg := postgres.Config{DSN: pgtest.DSN(t), Schema: schema}
	st := open(t, cfg)
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s", Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"1", "2", "3"} {
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: id, SessionID: "s",
			Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "step " + id}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{
		{StepID: "1", Vector: []float32{1, 0}}, {StepID: "2", Vector: []float32{0, 1}}, {StepID: "3", Vector: []float32{1, 1}}}}); err != nil {
		t.Fatal(err)
	}
	blob, err := st.BlobPut(ctx, &store.BlobPutParams{Data: []byte("\x89PNG screenshot"), ContentType: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AttachmentAdd(ctx, &store.AttachmentAddParams{Attachment: &store.Attachment{ID: "att", StepID: "2",
		Name: "shot", Kind: "screenshot", BlobHash: blob.Hash}}); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "stepwise.dump")
	if out, err := exec.CommandContext(ctx, pgDump, "--format=custom", "--schema="+schema, "--file="+dump, pgtest.DSN(t)).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	st.Close()
	if _, err := rawConn(t).Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, pgRestore, "--dbname="+pgtest.DSN(t), dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	st = open(t, cfg)
	if n, err := st.StepCount(ctx, &store.StepCountParams{SessionID: "s"}); err != nil || n != 3 {
		t.Errorf("restored: %d steps, %v", n, err)
	}
	if b, err := st.BlobGet(ctx, &store.BlobGetParams{Hash: blob.Hash}); err != nil || string(b.Data) != "\x89PNG screenshot" {
		t.Errorf("restored blob: %v %v", b, err)
	}
	hits, err := st.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{0, 1}, K: 3})
	if err != nil || len(hits) != 3 || hits[0].Step.ID != "2" {
		t.Fatalf("restored search: %v %v", hits, err)
	}
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "s", StartSeq: 2}); err != nil {
		t.Fatal(err)
	}
	if hits, err = st.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{0, 1}, K: 3}); err != nil || len(hits) != 1 {
		t.Errorf("search after a truncate of the restored store: %v %v", hits, err)
	}
}
