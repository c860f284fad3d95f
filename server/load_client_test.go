package server

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLoadStreamChecksDelivery: the load client fails a stream whose event
// ids go backwards, whose deltas come twice or out of order, or that
// finishes with a delta or a step missing, and accepts the stream in order.
func TestLoadStreamChecksDelivery(t *testing.T) {
	t.Parallel()
	delta := func(id, stamp string) string {
		return "id: " + id + "\nevent: step_delta\ndata: {\"delta\":{\"content\":\"t" + stamp + "|\"}}\n\n"
	}
	step := func(id string) string { return "id: " + id + "\nevent: step_completed\ndata: {}\n\n" }
	finish := "id: 3:0\nevent: run_finished\ndata: {\"run_id\":\"r1\",\"run\":{\"status\":\"completed\"}}\n\n"
	for _, c := range []struct {
		name, stream, err string
	}{
		{"in order", delta("1:1", "100") + delta("1:2", "200") + step("1:3") + step("2:0") + finish, ""},
		{"id backwards", delta("1:2", "100") + delta("1:1", "200") + step("1:3") + step("2:0") + finish, "event id"},
		{"delta twice", delta("1:1", "100") + delta("1:2", "100") + step("1:3") + step("2:0") + finish, "out of order"},
		{"deltas swapped", delta("1:1", "200") + delta("1:2", "100") + step("1:3") + step("2:0") + finish, "out of order"},
		{"delta missing", delta("1:1", "100") + step("1:3") + step("2:0") + finish, "1 deltas and 2 steps"},
		{"step missing", delta("1:1", "100") + delta("1:2", "200") + step("2:0") + finish, "2 deltas and 1 steps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"run":{"id":"r1","status":"running"}}`))
			}))
			defer ts.Close()
			l := &loadStream{sessionID: "s1", body: http.NoBody, r: bufio.NewReader(strings.NewReader(c.stream))}
			var steps, deltas atomic.Int64
			_, err := l.run(context.Background(), ts.Client(), loadClientConfig{Base: ts.URL, Turns: 1, Deltas: 2}, &steps, &deltas)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("in-order stream: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one with %q", err, c.err)
			}
		})
	}
}
