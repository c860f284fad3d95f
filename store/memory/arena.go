package memory

import "sync"

// Chunk sizes of an arena: rowChunk rows (about 12 KB) and slab bytes.
const (
	rowChunk = 64
	slab     = 16 << 10
)

// arena hands out the rows and the packed bytes of one session's steps
// from chunks: a stored step is then a slot of a chunk of rows and a window
// of a slab of bytes instead of two objects of its own. The collector marks
// every stored step in every cycle, and finding the span of each pointer
// (a cache miss when the objects are scattered) was most of that work;
// consecutive steps now share a chunk and a slab. A chunk or a slab lives
// as long as one of its steps (or a string unpacked from them) does: the
// steps of one session only, so deleting a session frees them.
type arena struct {
	mu   sync.Mutex
	rows []stepRow // the free rows of the current chunk
	buf  []byte    // the current slab; its free bytes are after len
}

// row returns a zero row.
func (a *arena) row() *stepRow {
	if a == nil {
		return &stepRow{}
	}
	a.mu.Lock()
	if len(a.rows) == 0 {
		a.rows = make([]stepRow, rowChunk)
	}
	r := &a.rows[0]
	a.rows = a.rows[1:]
	a.mu.Unlock()
	return r
}

// bytes returns an empty slice with capacity n, capped so that appending
// past n cannot reach the bytes of another step.
func (a *arena) bytes(n int) []byte {
	if a == nil || n > slab/8 {
		return make([]byte, 0, n)
	}
	a.mu.Lock()
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, slab)
	}
	at := len(a.buf)
	a.buf = a.buf[:at+n]
	b := a.buf[at : at : at+n]
	a.mu.Unlock()
	return b
}
