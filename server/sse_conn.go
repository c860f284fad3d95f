package server

import (
	"context"
	"net"
	"net/http"
	"strconv"
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
// ConnContext put it: Serve and RunLoad set it on their http.Server; a
// server without it streams through net/http as before.

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

// flushConn sends the events written since the last flush as one chunk.
func (s *sseWriter) flushConn() error {
	b := s.chunk()
	if b == nil {
		return nil
	}
	err := s.writeConn(b)
	s.buf = s.buf[:chunkRoom]
	return err
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
