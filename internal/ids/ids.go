package ids

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/google/uuid"
)

// idClock keeps UUIDv7 ids of this process strictly increasing: the 12
// bits after the millisecond timestamp carry the sub-millisecond time (in
// units of 256 ns), bumped when two ids would share it — the layout
// github.com/google/uuid's NewV7 uses. It also holds random bytes read
// from crypto/rand ahead, 8 per id (a read costs about as much for 256
// bytes as for 16; every engine step takes one or two ids); each byte is
// used once.
var idClock struct {
	mu   sync.Mutex
	last int64 // milliseconds << 12 | sequence of the last id
	rnd  [256]byte
	left int // bytes of rnd not handed out yet, the first left ones
}

// At returns a new sortable id (UUIDv7) with its time read by the caller
// (t, from time.Now: a time the caller records too, so that the clock is
// read once), or read here when t is zero. It allocates only the string.
func At(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	var u uuid.UUID
	nano := t.UnixNano()
	now := nano/int64(time.Millisecond)<<12 + (nano%int64(time.Millisecond))>>8
	idClock.mu.Lock()
	if idClock.left == 0 {
		_, _ = rand.Read(idClock.rnd[:]) // never fails: it always fills the buffer (Go 1.24)
		idClock.left = len(idClock.rnd)
	}
	idClock.left -= 8
	taken := idClock.rnd[idClock.left : idClock.left+8]
	copy(u[8:], taken)
	clear(taken)
	if now <= idClock.last {
		now = idClock.last + 1
	}
	idClock.last = now
	idClock.mu.Unlock()
	ms, seq := now>>12, now&0xfff
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = 0x70 | byte(seq>>8)&0x0f
	u[7] = byte(seq)
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return u.String()
}
