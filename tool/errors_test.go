package tool_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

func TestClassMarkers(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want steptype.ErrorClass
	}{
		{tool.Transient(base), steptype.ErrorTransient},
		{tool.Permanent(base), steptype.ErrorPermanent},
		{fmt.Errorf("wrapped: %w", tool.Transient(base)), steptype.ErrorTransient},
		// Permanent overrides what would otherwise be classified transient.
		{tool.Permanent(context.DeadlineExceeded), steptype.ErrorPermanent},
		{tool.Transient(context.Canceled), steptype.ErrorTransient},
	} {
		if got := llm.Classify(tc.err); got != tc.want {
			t.Errorf("%v: class %q, want %q", tc.err, got, tc.want)
		}
	}
	if err := tool.Transient(base); !errors.Is(err, base) || err.Error() != "boom" {
		t.Errorf("Transient hides its cause: %v", err)
	}
	if tool.Transient(nil) != nil || tool.Permanent(nil) != nil {
		t.Error("marking nil gave an error")
	}
}
