package stepwise

import (
	"testing"

	"github.com/google/uuid"
)

// TestNewIDRandomBits checks the ids' form (UUIDv7, RFC 9562 variant,
// strictly increasing) and that no two ids share their random bits: the
// random bytes read ahead are handed out once each.
func TestNewIDRandomBits(t *testing.T) {
	seen := map[[8]byte]bool{}
	prev := ""
	for i := range 5000 {
		id := NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("id %d: %q is not a UUIDv7 (%v)", i, id, err)
		}
		if id <= prev {
			t.Fatalf("id %d: %q after %q", i, id, prev)
		}
		prev = id
		var r [8]byte
		copy(r[:], u[8:])
		r[0] &= 0x3f
		if seen[r] {
			t.Fatalf("id %d: %q repeats the random bits of an earlier id", i, id)
		}
		seen[r] = true
	}
}
