package runexec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// Idempotency keys are the ones tools saw before (a re-executed call after
// an upgrade must present the same key).
func TestIdempotencyKeyUnchanged(t *testing.T) {
	for _, b := range []IdemSeed{{}, {RunID: "0190c0de-0000-7000-8000-000000000001", Seq: 42, Set: true}, {RunID: strings.Repeat("r", 200), Seq: -1, Set: true}} {
		base := ""
		if b.Set {
			base = b.RunID + ":" + fmt.Sprint(b.Seq)
		}
		sum := sha256.Sum256([]byte(base + ":" + "call_1"))
		if got, want := b.Key("call_1"), hex.EncodeToString(sum[:16]); got != want {
			t.Errorf("%+v: key %s, want %s", b, got, want)
		}
	}
}
