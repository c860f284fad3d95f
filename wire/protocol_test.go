package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestProtocolErrorIsAnError(t *testing.T) {
	cases := []struct {
		e    *Error
		want string
	}{
		{&Error{Message: "run cancelled"}, "stepwise: run cancelled"},
		{&Error{Message: "step failed", Cause: "boom"}, "stepwise: step failed: boom"},
		{&Error{Message: "boom", Cause: "boom"}, "stepwise: boom"},
	}
	for _, c := range cases {
		var err error = c.e
		if got := err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		var as *Error
		if !errors.As(fmt.Errorf("next step: %w", err), &as) || as != c.e {
			t.Errorf("errors.As did not find %#v", c.e)
		}
	}
}

func TestProtocolErrorJSON(t *testing.T) {
	b, err := json.Marshal(&Error{Message: "m", Cause: "c", RetryCount: 2, Recoverable: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"message":"m","cause":"c","retry_count":2,"recoverable":true}`; string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
}

func TestNextStepRoundTrip(t *testing.T) {
	frac := 0.5
	steps := []AgentStep{
		&Continuation{Status: "running", CurrentStep: "llm", Progress: &frac},
		&HumanInputRequest{RequestID: "r1", Prompt: "ok?"},
		&Result{Value: "done"},
		&Error{Message: "run failed", Cause: "boom", RetryCount: 1},
	}
	for _, step := range steps {
		b, err := json.Marshal(NextStepOf(step, "3:0"))
		if err != nil {
			t.Fatal(err)
		}
		var got NextStep
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Cursor != "3:0" || got.Step() == nil {
			t.Fatalf("%s decoded to %+v", b, got)
		}
		again, err := json.Marshal(NextStepOf(got.Step(), got.Cursor))
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(b) {
			t.Errorf("round trip changed the body:\n%s\n%s", b, again)
		}
	}
	var unknown NextStep
	if err := json.Unmarshal([]byte(`{"type":"other","cursor":"1:0"}`), &unknown); err != nil || unknown.Step() != nil {
		t.Fatalf("unknown type decoded to %+v, %v", unknown, err)
	}
}
