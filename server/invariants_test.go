package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Concurrent starts on one session over HTTP: exactly one is accepted, the
// others get 409 session_busy, and the session has one unfinished run.
func TestConcurrentStartsOneSession(t *testing.T) {
	env := newEnv(t, []*stepwise.Agent{approvalAgent("ops")})
	ctx := context.Background()
	sess, err := env.eng.CreateSession(ctx, "ops", "busy")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	statuses := make([]int, n)
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i], bodies[i] = env.call("POST", "/v1/runs", fmt.Sprintf(`{"agent":"ops","input":"delete %d","session_id":%q}`, i, sess.ID))
		})
	}
	wg.Wait()
	created := 0
	for i, st := range statuses {
		switch st {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			if p := decode[Problem](t, bodies[i]); p.Code != CodeSessionBusy {
				t.Errorf("start %d: problem %+v, want %s", i, p, CodeSessionBusy)
			}
		default:
			t.Errorf("start %d: %d %s", i, st, bodies[i])
		}
	}
	if created != 1 {
		t.Fatalf("%d of %d concurrent starts accepted, want 1", created, n)
	}
	runs, err := env.store.RunList(ctx, &store.RunListParams{SessionID: sess.ID})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of the session: %d, %v; want 1", len(runs), err)
	}
}

// A destructive retry is refused while a run of the session is unfinished,
// exactly like DELETE …/steps: the guard is the store's, for every path.
func TestDestructiveRetryRefusedWhileWaiting(t *testing.T) {
	env := newEnv(t, []*stepwise.Agent{approvalAgent("ops")})
	ctx := context.Background()
	inv, err := env.c.Initiate(ctx, "ops", "delete")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(inv.RunID, steptype.RunWaiting)
	before, err := env.store.SessionGet(ctx, &store.SessionGetParams{ID: inv.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	env.problem(409, CodeConflict, "POST", "/v1/sessions/"+inv.SessionID+"/retry", `{"sequence":1,"destructive":true}`)
	env.problem(409, CodeConflict, "DELETE", "/v1/sessions/"+inv.SessionID+"/steps?start_seq=1", "")
	after, err := env.store.SessionGet(ctx, &store.SessionGetParams{ID: inv.SessionID})
	if err != nil || after.LastSequence != before.LastSequence {
		t.Fatalf("refused retry changed the session: %d steps, was %d (%v)", after.LastSequence, before.LastSequence, err)
	}
	runs, err := env.store.RunList(ctx, &store.RunListParams{SessionID: inv.SessionID})
	if err != nil || len(runs) != 1 || runs[0].Status != steptype.RunWaiting {
		t.Fatalf("runs after the refused retry: %+v, %v; want the one waiting run", runs, err)
	}
	// Cancelled, the request is gone from every listing, and the retry is accepted.
	if _, err := env.c.Cancel(ctx, inv.RunID, "retry instead"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/inputs", "/v1/runs/" + inv.RunID + "/inputs"} {
		if st, body := env.call("GET", path, ""); st != 200 || strings.TrimSpace(string(body)) != `{"inputs":[]}` {
			t.Errorf("GET %s after cancel: %d %s, want no pending request", path, st, body)
		}
	}
	if st, body := env.call("POST", "/v1/sessions/"+inv.SessionID+"/retry", `{"sequence":1,"destructive":true}`); st != http.StatusCreated {
		t.Fatalf("retry after cancel: %d %s", st, body)
	}
}
