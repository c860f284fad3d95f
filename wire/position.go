package wire

import "github.com/stepwise-run/stepwise/steptype"

// Position orders the events of a session; see steptype.Position.
type Position = steptype.Position

// ParsePosition parses "SEQ:IDX" (or a bare "SEQ", meaning "SEQ:0").
func ParsePosition(s string) (Position, error) { return steptype.ParsePosition(s) }
