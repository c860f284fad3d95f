package eval

import (
	"context"
	"fmt"
	"strings"
)

// ExactMatch compares a run's output with the expected output of its
// dataset item, ignoring surrounding and repeated whitespace (and case,
// unless CaseSensitive). Runs without an expected output are not judged.
type ExactMatch struct {
	CaseSensitive bool
}

// Name returns "exact_match".
func (*ExactMatch) Name() string { return "exact_match" }

// Evaluate scores 1 for a match, else 0.
func (m *ExactMatch) Evaluate(_ context.Context, in *Input) ([]Result, error) {
	if in.Expected == "" {
		return nil, nil
	}
	got, want := normalize(in.Run.Output, m.CaseSensitive), normalize(in.Expected, m.CaseSensitive)
	if got == want {
		return []Result{{Score: 1, Label: "match"}}, nil
	}
	return []Result{{Score: 0, Label: "mismatch", Description: fmt.Sprintf("got %q, want %q", clip(in.Run.Output, 200), clip(in.Expected, 200))}}, nil
}

// Contains checks that a run's output contains the expected output of its
// dataset item (case-insensitively unless CaseSensitive). Runs without an
// expected output are not judged.
type Contains struct {
	CaseSensitive bool
}

// Name returns "contains".
func (*Contains) Name() string { return "contains" }

// Evaluate scores 1 when the expected text occurs in the output, else 0.
func (m *Contains) Evaluate(_ context.Context, in *Input) ([]Result, error) {
	if in.Expected == "" {
		return nil, nil
	}
	if strings.Contains(normalize(in.Run.Output, m.CaseSensitive), normalize(in.Expected, m.CaseSensitive)) {
		return []Result{{Score: 1, Label: "match"}}, nil
	}
	return []Result{{Score: 0, Label: "mismatch", Description: fmt.Sprintf("%q not found in the output", clip(in.Expected, 200))}}, nil
}

func normalize(s string, caseSensitive bool) string {
	s = strings.Join(strings.Fields(s), " ")
	if !caseSensitive {
		s = strings.ToLower(s)
	}
	return s
}
