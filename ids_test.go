package stepwise

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepwise-run/stepwise/internal/raceflag"
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

// NewID returns version-7 UUIDs in strictly increasing order, one
// allocation each.
func TestNewIDSortableV7(t *testing.T) {
	prev := ""
	for range 10000 {
		id := NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%s: %v version %d variant %v", id, err, u.Version(), u.Variant())
		}
		if id <= prev {
			t.Fatalf("%s after %s", id, prev)
		}
		if sec, _ := u.Time().UnixTime(); time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
			t.Fatalf("%s: time %d is not now", id, sec)
		}
		prev = id
	}
	if n := testing.AllocsPerRun(100, func() { NewID() }); n != 1 && !raceflag.Enabled {
		t.Errorf("NewID allocates %.0f times, want 1", n)
	}
}
