package stepwise

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/google/uuid"
)

// idClock keeps UUIDv7 ids of this process strictly increasing: the 12
// bits after the millisecond timestamp carry the sub-millisecond time (in
// units of 256 ns), bumped when two ids would share it — the layout
// github.com/google/uuid's NewV7 uses.
var idClock struct {
	mu   sync.Mutex
	last int64 // milliseconds << 12 | sequence of the last id
}

// NewID returns a new sortable id (UUIDv7). It allocates only the string.
func NewID() string {
	var u uuid.UUID
	if _, err := rand.Read(u[:]); err != nil {
		return uuid.NewString()
	}
	nano := time.Now().UnixNano()
	now := nano/int64(time.Millisecond)<<12 + (nano%int64(time.Millisecond))>>8
	idClock.mu.Lock()
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
