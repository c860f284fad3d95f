package server

import (
	"context"
	"testing"
)

// A step read from the API can be ingested again: progress is a field of
// the step wire format, version 1 (docs/step_format.md).
func TestIngestAcceptsProgress(t *testing.T) {
	t.Parallel()
	env := newEnv(t, nil)
	sess, err := env.c.CreateSession(context.Background(), "elsewhere", "")
	if err != nil {
		t.Fatal(err)
	}
	status, body := env.call("POST", "/v1/sessions/"+sess.ID+"/steps",
		`{"steps":[{"kind":"user","role":"user","content":"hi","progress":{"fraction":0.5,"message":"half"}}]}`)
	if status != 201 {
		t.Fatalf("ingest with progress: %d %s", status, body)
	}
}
