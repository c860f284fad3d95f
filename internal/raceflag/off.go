//go:build !race

// Package raceflag tells tests whether the race detector is on: it changes
// what escapes to the heap, so allocation counts are checked only without
// it (scripts/test runs those tests once more without -race).
package raceflag

// Enabled reports whether the binary was built with -race.
const Enabled = false
