package postgres_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/raceflag"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// A group reads its locked runs with a decoder of its own: the runs equal
// what pgx's scan reads (every column, NULL and empty byte columns, an
// error, multibyte text), the texts the group already holds are its own
// strings, and the read allocates less than pgx's scan.
func TestGroupReadsRunsAsScanRuns(t *testing.T) {
	f := newGroupFixture(t)
	ctx := t.Context()
	for _, id := range []string{"s1", "s2", "s3"} {
		f.session(id)
	}
	f.run("r1", "s1", steptype.RunRunning)
	f.run("r2", "s2", steptype.RunRunning)
	f.run("r3", "s3", steptype.RunQueued)
	r4 := &steptype.Run{ID: "r4", SessionID: "s3", Agent: "agent ✓", Status: steptype.RunFailed, Hop: 2, ParentRunID: "r3",
		ParentStepID: "st-9", Cursor: "c-ü", Input: "input <&>", Output: "out", State: json.RawMessage(`{"k":[1,2]}`),
		Options: json.RawMessage(`{"o":true}`), Error: &steptype.StepError{Message: "boom", Code: "E1"}, StepCount: 41,
		LeaseOwner: "other", LeaseExpires: time.Now().Add(time.Minute), FinishedAt: time.Now()}
	if _, err := f.st.RunCreate(ctx, &store.RunCreateParams{Run: r4}); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t)
	runs := pgx.Identifier{f.schema, "runs"}.Sanitize()
	// An empty (not NULL) state and a NULL options on r2.
	if _, err := conn.Exec(ctx, `UPDATE `+runs+` SET state = ''::bytea, options = NULL, cursor = 'x' WHERE id = 'r2'`); err != nil {
		t.Fatal(err)
	}
	ids, sessions := []string{"r1", "r2", "r3", "r4"}, []string{"s1", "s2", "s3"}
	group, plain, groupAllocs, plainAllocs, err := f.st.ReadRuns(ctx, ids, sessions)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 4 || !reflect.DeepEqual(group, plain) {
		t.Fatalf("the group read\n%#v\npgx's scan\n%#v", group, plain)
	}
	for i, r := range group {
		if unsafe.StringData(r.ID) != unsafe.StringData(ids[i]) {
			t.Errorf("run %s: its id is a new string, not the group's", r.ID)
		}
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	// Long ids too (a string made for a lookup would be on the heap).
	long := []string{"run-0000000000000000000000000000000000000001", "run-0000000000000000000000000000000000000002"}
	longSessions := []string{"session-00000000000000000000000000000000000000001", "session-00000000000000000000000000000000000000002"}
	for i, id := range long {
		f.session(longSessions[i])
		f.run(id, longSessions[i], steptype.RunRunning)
	}
	_, _, longAllocs, _, err := f.st.ReadRuns(ctx, long, longSessions)
	if err != nil {
		t.Fatal(err)
	}
	_, _, shortAllocs, _, err := f.st.ReadRuns(ctx, []string{"r1", "r2"}, []string{"s1", "s2"})
	if err != nil {
		t.Fatal(err)
	}
	if longAllocs > shortAllocs {
		t.Errorf("reading 2 runs of long ids: %.0f allocations, of short ids %.0f; want no more", longAllocs, shortAllocs)
	}
	// 47 fewer: the rows are allocated together (one slab per group; 31
	// allocations with one per row, 28 with the slab) and r4's state and
	// options copied into one buffer (27; one allocation each before).
	if groupAllocs > plainAllocs-47 {
		t.Errorf("reading 4 runs: %.0f allocations, pgx's scan %.0f; want at least 47 fewer", groupAllocs, plainAllocs)
	}
	t.Logf("reading 4 runs: %.0f allocations, pgx's scan %.0f", groupAllocs, plainAllocs)
}

// A group reads its locked sessions with a decoder of its own: the
// sessions equal what pgx's scan reads (metadata, a parent, a fork
// sequence, totals, multibyte text), their ids are the group's strings,
// and the read allocates less.
func TestGroupReadsSessionsAsScanSession(t *testing.T) {
	f := newGroupFixture(t)
	ctx := t.Context()
	f.session("session-00000000000000000000000000000000000000001")
	if _, err := f.st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s2", Agent: "agent ✓", Title: "title <&>",
		Metadata: json.RawMessage(`{"k":"v"}`)}); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t)
	sessions := pgx.Identifier{f.schema, "sessions"}.Sanitize()
	if _, err := conn.Exec(ctx, `UPDATE `+sessions+` SET parent_session_id = 'session-00000000000000000000000000000000000000001',
		fork_sequence = 7, last_seq = 9, input_tokens = 11, output_tokens = 13, cost = 0.125 WHERE id = 's2'`); err != nil {
		t.Fatal(err)
	}
	ids := []string{"s2", "session-00000000000000000000000000000000000000001"}
	group, plain, groupAllocs, plainAllocs, err := f.st.ReadSessions(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 2 || !reflect.DeepEqual(group, plain) {
		t.Fatalf("the group read\n%#v\npgx's scan\n%#v", group, plain)
	}
	for i, s := range group {
		if unsafe.StringData(s.ID) != unsafe.StringData(ids[i]) {
			t.Errorf("session %s: its id is a new string, not the group's", s.ID)
		}
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	// 6 fewer per session: the rows are allocated together (16
	// allocations with one per row, 15 with the slab).
	if groupAllocs > plainAllocs-2*6 {
		t.Errorf("reading 2 sessions: %.0f allocations, pgx's scan %.0f; want at least 6 fewer per session", groupAllocs, plainAllocs)
	}
	t.Logf("reading 2 sessions: %.0f allocations, pgx's scan %.0f", groupAllocs, plainAllocs)
}
