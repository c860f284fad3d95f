//go:build !race

package stepwise

// raceEnabled: the race detector changes what escapes to the heap, so
// allocation counts are only checked without it.
const raceEnabled = false
