//go:build race

package steptype

// raceEnabled: the race detector changes what escapes to the heap, so
// allocation counts are only checked without it (scripts/test runs them
// once more without -race).
const raceEnabled = true
