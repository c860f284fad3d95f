package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
)

// SubscribeParams.Flush is called once the events received so far are
// delivered and the client is about to wait for the network: here the
// server sends its second batch only after that call.
func TestSubscribeFlushBeforeWaiting(t *testing.T) {
	t.Parallel()
	flushed := make(chan struct{}, 8)
	event := func(seq int) string {
		return fmt.Sprintf("id: %d:0\nevent: step_delta\ndata: {\"id\":\"%d:0\",\"type\":\"step_delta\",\"session_id\":\"s\",\"run_id\":\"r\",\"time\":\"2026-01-01T00:00:00Z\",\"delta\":{\"content\":\"e%d\"}}\n\n", seq, seq, seq)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = w.Write([]byte(event(1) + event(2) + event(3)))
		_ = rc.Flush()
		select { // the client delivered e1..e3 and waits
		case <-flushed:
		case <-time.After(10 * time.Second):
		}
		_, _ = w.Write([]byte(event(4) + event(5)))
		_ = rc.Flush()
	}))
	defer ts.Close()
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var log []string
	p := stepwise.SubscribeParams{SessionID: "s", Flush: func() error {
		log = append(log, "flush")
		if len(log) > 1 && log[len(log)-2] == "e3" {
			flushed <- struct{}{}
		}
		return nil
	}}
	for ev, err := range c.Subscribe(ctx, p) {
		if err != nil {
			break
		}
		log = append(log, ev.Delta.Content)
		if ev.Delta.Content == "e5" {
			break
		}
	}
	got := strings.Join(log, " ")
	events := strings.Join(strings.Fields(strings.ReplaceAll(got, "flush", "")), " ")
	if !strings.Contains(got, "e3 flush e4") || !strings.HasPrefix(got, "flush") || events != "e1 e2 e3 e4 e5" {
		t.Fatalf("calls %q, want e1..e5 in order with a flush before each wait (one between e3 and e4)", got)
	}
}
