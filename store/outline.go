package store

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
)

// StepOutliner is the part of Store that reads the outline
// of steps: what statistics and workflow graphs use (identity, kind, name,
// status, tool name and calls, error, metrics, annotations, fingerprint,
// times) without decoding the bulky members. In an outline, Content,
// Reasoning, the tool calls' Arguments and, except for input and decision
// steps, Inputs and Outputs hold a short digest of the value instead
// ("#" and hex; equal values have equal digests within one process, so
// "the same thing again" stays recognisable), and StatePatch, Vector,
// Embedder and Metadata are empty.
type StepOutliner interface {
	// StepOutline is StepList returning outlines.
	StepOutline(ctx context.Context, p *StepListParams) ([]*steptype.Step, error)
}
