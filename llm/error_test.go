package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestClassifyNetworkErrors(t *testing.T) {
	// A real lookup of a name that cannot resolve (.invalid is reserved).
	_, dnsErr := http.Get("http://stepwise-test.invalid/")
	var dns *net.DNSError
	if !errors.As(dnsErr, &dns) {
		t.Fatalf("lookup of .invalid: %v, want a *net.DNSError", dnsErr)
	}
	for _, c := range []struct {
		err  error
		want steptype.ErrorClass
	}{
		{dnsErr, steptype.ErrorTransient},
		{fmt.Errorf("call: %w", &net.DNSError{Err: "server misbehaving", Name: "api.example.com", IsTemporary: true}), steptype.ErrorTransient},
		{context.DeadlineExceeded, steptype.ErrorTransient},
		{context.Canceled, steptype.ErrorPermanent},
		{errors.New("bad input"), steptype.ErrorPermanent},
	} {
		if got := llm.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
