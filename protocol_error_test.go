package stepwise

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
