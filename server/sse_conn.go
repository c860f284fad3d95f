package server

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"syscall"
)

// An SSE stream of an HTTP/1.1 request, once net/http has sent the
// response's head and first chunk, writes its chunks straight to the
// connection: one buffer, into which events are encoded behind room for
// the chunk's size line, and one write per flush, instead of a copy into
// each of net/http's two buffers and a formatted chunk header per flush.
// net/http keeps the connection: it still reads it (a client closing it
// cancels the stream), ends the body with its last chunk when the handler
// returns, keeps the connection alive for the next request, and closes it
// with the server. The bytes on the wire are those net/http would send.
//
// The handler learns the connection from the request's context, where
// ConnContext put it: Serve and the load harness (internal/loadgen) set it on their http.Server; a
// server without it streams through net/http's ResponseWriter.

// connKey is the context key of the request's connection (ConnContext).
type connKey struct{}

// ConnContext is an http.Server's ConnContext hook that lets the SSE
// streams of the connection's HTTP/1.1 requests write their chunks to the
// connection directly (less CPU per event; the same bytes). Serve uses it;
// set it on an http.Server of your own that serves this package's handler.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// chunkRoom is the room kept at the front of the buffer for a chunk's size
// line: up to eight hex digits and CRLF (connFlushAt bounds a chunk).
const chunkRoom = 10

// connFlushAt is the size at which the events written are sent as a chunk
// without waiting for the flush (a long replay).
const connFlushAt = 32 << 10

// directConn returns the connection an SSE response to r may write its
// chunks to, nil if it must go through w: the connection is known
// (ConnContext), the request an HTTP/1.1 GET (net/http chunks the body), w
// net/http's own writer (one that only wraps, with Unwrap, wants to see
// the writes) and no header set that would change the framing.
func directConn(w http.ResponseWriter, r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if c == nil || r.Method != http.MethodGet || r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return nil
	}
	if _, ok := w.(http.Hijacker); !ok {
		return nil
	}
	if h := w.Header(); h.Get("Content-Length") != "" || h.Get("Transfer-Encoding") != "" {
		return nil
	}
	return c
}

// flushConn sends the events written since the last flush as one chunk,
// after what a flushNoWait left pending.
func (s *sseWriter) flushConn() error {
	b := s.chunk()
	if len(s.pending) > 0 {
		b = append(s.pending, b...)
		s.pending = s.pending[:0]
	}
	if b == nil {
		return nil
	}
	err := s.writeConn(b)
	s.buf = s.buf[:chunkRoom]
	return err
}

// rawConn returns the connection's file descriptor access for flushNoWait,
// nil if it offers none.
func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// flushNoWait is flushConn for a caller that must not block (a publisher
// delivering directly, see heartbeat.direct): one write(2) of the chunk,
// and whatever the socket does not take at once (a full send buffer, an
// error, an expired deadline) is kept pending for the next flush, whose
// blocking write sends it or reports the error. It reports whether
// everything went out; s.raw must be set.
func (s *sseWriter) flushNoWait() bool {
	if s.extendDeadline() != nil || s.broken || len(s.pending) > 0 {
		return false
	}
	b := s.chunk()
	if b == nil {
		return true
	}
	if s.writeNoWait == nil {
		s.writeNoWait = s.writeOnce
	}
	s.out, s.sent = b, 0
	_ = s.raw.Write(s.writeNoWait)
	n := s.sent
	s.out = nil
	if n < len(b) {
		s.pending = append(s.pending[:0], b[n:]...)
	}
	s.buf = s.buf[:chunkRoom]
	return n == len(b)
}

// writeOnce is flushNoWait's write of s.out to the descriptor: one
// write(2), whatever it takes noted in s.sent; it never waits for the
// socket. A method value kept in s.writeNoWait, so that a direct write
// allocates nothing (a closure over the chunk would be allocated per call).
func (s *sseWriter) writeOnce(fd uintptr) bool {
	for {
		m, err := syscall.Write(int(fd), s.out)
		if err == syscall.EINTR {
			continue
		}
		if m > 0 {
			s.sent = m
		}
		return true
	}
}

// chunk frames the events written since the last flush as a chunk, in
// place; nil if there are none.
func (s *sseWriter) chunk() []byte {
	n := len(s.buf) - chunkRoom
	if n <= 0 {
		return nil
	}
	var size [chunkRoom]byte
	line := append(strconv.AppendInt(size[:0], int64(n), 16), '\r', '\n')
	start := chunkRoom - len(line)
	copy(s.buf[start:], line)
	s.buf = append(s.buf, '\r', '\n')
	return s.buf[start:]
}

// writeConn writes b to the connection. A failed (or partial) write
// leaves the chunked body broken: the connection is closed, and net/http,
// writing its last chunk, finds it so.
func (s *sseWriter) writeConn(b []byte) error {
	if s.broken {
		return net.ErrClosed
	}
	if _, err := s.conn.Write(b); err != nil {
		s.broken = true
		s.conn.Close()
		return err
	}
	return nil
}

// end sends what is written and not flushed, on a stream writing its
// connection; net/http then ends the body. Nothing is written after end.
func (s *sseWriter) end() {
	if s.conn != nil {
		_ = s.flushConn()
		s.broken = true
	}
}
