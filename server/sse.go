package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// sseWriter writes Server-Sent Events. Writes have a deadline, so a client
// that stops reading is dropped instead of pinning the handler; the engine
// has already moved such a subscriber to catch-up, so the run never waits
// for it.
type sseWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	deadline time.Time // the write deadline last set
	now      time.Time // the time of the last write or flush
	buf      []byte
	// direct is the connection the response may write its chunks to
	// (directConn), nil if none; conn is set to it once net/http sent the
	// response's head (start). buf then holds, after chunkRoom bytes kept
	// for the chunk's size line, every event written since the last
	// flush, and a flush sends them as one chunk in one write.
	direct, conn net.Conn
	broken       bool // a write to conn failed, or the stream ended
	// raw is conn's descriptor when publishers may deliver deltas to the
	// stream directly (flushNoWait); pending holds what such a write left
	// unsent, framed, for the next flush to send first.
	raw     syscall.RawConn
	pending []byte
	// writeNoWait is writeOnce, made once; out and sent are its chunk and
	// what the write took.
	writeNoWait func(fd uintptr) bool
	out         []byte
	sent        int
}

func newSSEWriter(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	return &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// start sends the headers and the reconnection delay hint.
func (s *sseWriter) start() error { return s.startWith("retry: 1000\n\n") }

// startWith sends the headers and prelude, the stream's first bytes.
func (s *sseWriter) startWith(prelude string) error {
	s.w.WriteHeader(http.StatusOK)
	s.buf = append(s.buf[:0], prelude...)
	if err := s.write(); err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err
	}
	if s.direct != nil {
		// net/http sent the head and the first chunk and holds nothing:
		// the next chunks go straight to the connection.
		s.conn = s.direct
		s.buf = append(s.buf[:0], make([]byte, chunkRoom)...)
	}
	return nil
}

// event writes one event; id and typ may be empty. data must be one line
// (compact JSON is). Call flush to send it.
func (s *sseWriter) event(id, typ string, data []byte) error {
	b := s.next()
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	return s.finish(b, typ, data)
}

// eventHead starts, in the writer's buffer, an event whose id is pos: the
// caller appends its data (one line) and hands the buffer to eventEnd.
// Encoding straight into the buffer saves a copy of every event.
func (s *sseWriter) eventHead(pos stepwise.Position, typ string) []byte {
	b := append(s.next(), "id: "...)
	b = strconv.AppendInt(b, pos.Seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, pos.Idx, 10)
	b = append(b, '\n')
	if typ != "" {
		b = append(b, "event: "...)
		b = append(b, typ...)
		b = append(b, '\n')
	}
	return append(b, "data: "...)
}

// eventEnd writes the event eventHead started.
func (s *sseWriter) eventEnd(b []byte) error {
	s.buf = append(b, '\n', '\n')
	return s.write()
}

func (s *sseWriter) finish(b []byte, typ string, data []byte) error {
	if typ != "" {
		b = append(b, "event: "...)
		b = append(b, typ...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, '\n', '\n')
	s.buf = b
	return s.write()
}

// comment writes a comment line (a heartbeat).
func (s *sseWriter) comment(text string) error {
	s.buf = append(append(append(s.next(), ": "...), text...), '\n', '\n')
	return s.write()
}

// commentLine writes a comment line that ends no event: for clients (the
// LangGraph SDK's) that dispatch an empty event at every blank line.
func (s *sseWriter) commentLine(text string) error {
	s.buf = append(append(append(s.next(), ": "...), text...), '\n')
	return s.write()
}

// next returns the buffer to append the next event to: empty, or on a
// connection taken over, what is not flushed yet.
func (s *sseWriter) next() []byte {
	if s.conn != nil {
		return s.buf
	}
	return s.buf[:0]
}

func (s *sseWriter) write() error {
	if s.conn != nil {
		// The event stays in the buffer until the flush, unless the
		// buffer grew large (a long replay): then it goes as a chunk.
		if len(s.buf) >= connFlushAt {
			return s.flush()
		}
		return nil
	}
	if err := s.extendDeadline(); err != nil {
		return err
	}
	_, err := s.w.Write(s.buf)
	return err
}

// flush sends what was written.
func (s *sseWriter) flush() error {
	if err := s.extendDeadline(); err != nil {
		return err
	}
	if s.conn != nil {
		return s.flushConn()
	}
	return s.rc.Flush()
}

// extendDeadline moves the write deadline timeout ahead, at most every
// quarter of it (setting a deadline is not free).
func (s *sseWriter) extendDeadline() error {
	now := time.Now()
	s.now = now
	if now.Add(s.timeout - s.timeout/4).Before(s.deadline) {
		return nil
	}
	s.deadline = now.Add(s.timeout)
	if s.conn != nil {
		return s.conn.SetWriteDeadline(s.deadline)
	}
	if err := s.rc.SetWriteDeadline(s.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// maxBatch bounds the events an AG-UI stream writes between two flushes.
const maxBatch = 64

// stream writes the events of p as SSE until the sequence ends (a run
// stream ends after its run_finished event), the client goes away or the
// server closes. Validation happened before: from here on errors go into
// the stream as an "error" event carrying a problem.
//
// The handler's goroutine ranges over the subscription itself and writes
// each event as it comes; the subscription calls back (Flush) when it has
// handed over every event it has, so one write sends what was queued
// together. Heartbeats come from a timer (see heartbeat). An HTTP/1.1
// stream writes its chunks to the connection itself (directConn).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p stepwise.SubscribeParams) error {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	sw := newSSEWriter(w, s.cfg.WriteTimeout)
	sw.direct = directConn(w, r)
	defer sw.end() // after the heartbeats stopped (deferred below)
	if err := sw.start(); err != nil {
		return nil
	}
	hb := startHeartbeat(sw, s.cfg.Heartbeat, cancel)
	defer hb.stop()
	p.Flush = hb.flush
	if sw.conn != nil {
		if sw.raw = rawConn(sw.conn); sw.raw != nil {
			p.Direct = hb.direct
		}
	}
	for ev, err := range s.eng.Subscribe(ctx, p) {
		if hb.failed() {
			return nil
		}
		var werr error
		if err == nil {
			err, werr = hb.event(ev)
		}
		if err != nil {
			hb.stop() // the writer is the handler's alone again
			s.streamError(sw, r, err)
			return nil
		}
		if werr != nil {
			return nil
		}
	}
	_ = hb.flush()
	return nil
}

// heartbeat shares a stream's writer between the handler, which writes
// events and flushes, and a timer that writes a comment once the stream
// has been quiet for the heartbeat interval. Events are written by the
// handler's goroutine alone; the lock only orders them with heartbeats,
// and nothing is written once stop returned.
type heartbeat struct {
	mu      sync.Mutex
	sw      *sseWriter
	every   time.Duration
	t       *time.Timer
	stopped bool
	err     error       // the first write error: the stream is over
	broken  atomic.Bool // err is set (read without the lock)
	last    time.Time   // of the last flush
	dirty   bool        // written since the last flush
	enc     eventEncoder
	cancel  context.CancelFunc
}

func startHeartbeat(sw *sseWriter, every time.Duration, cancel context.CancelFunc) *heartbeat {
	h := &heartbeat{sw: sw, every: every, last: time.Now(), cancel: cancel}
	h.t = time.AfterFunc(every, h.beat)
	return h
}

// beat runs on the timer: a comment if nothing was flushed for an
// interval, then the timer is set for the next interval from the last
// flush.
func (h *heartbeat) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || h.err != nil {
		return
	}
	quiet := time.Since(h.last)
	if quiet >= h.every {
		if err := h.sw.comment("heartbeat"); err != nil {
			h.fail(err)
			return
		}
		h.dirty = true
		if err := h.flushLocked(); err != nil {
			return
		}
		quiet = 0
	}
	h.t.Reset(h.every - quiet)
}

// event encodes ev (eventEncoder) into the writer's buffer and writes it:
// an error encoding it (nothing written) or writing it.
func (h *heartbeat) event(ev *stepwise.Event) (encodeErr, writeErr error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.eventLocked(ev)
}

// eventLocked is event for a caller that holds h.mu.
func (h *heartbeat) eventLocked(ev *stepwise.Event) (encodeErr, writeErr error) {
	if h.err != nil {
		return nil, h.err
	}
	b, err := h.enc.append(h.sw.eventHead(ev.Position, string(ev.Type)), ev)
	if err != nil {
		return err, nil
	}
	if err := h.sw.eventEnd(b); err != nil {
		h.fail(err)
		return nil, err
	}
	h.dirty = true
	return nil, nil
}

// direct writes a delta a publisher offers (SubscribeParams.Direct) and
// sends it without blocking. It does not take the event when it would have
// to wait (a heartbeat holds the writer, perhaps blocked on a slow client)
// or cannot write it (the stream failed, the event does not encode): the
// handler then gets it as usual. What a taken event's write did not send
// stays pending (flushNoWait) for the handler's next flush.
func (h *heartbeat) direct(ev *stepwise.Event) (taken, sent bool) {
	if !h.mu.TryLock() {
		return false, false
	}
	defer h.mu.Unlock()
	if h.err != nil {
		return false, false
	}
	if encodeErr, writeErr := h.eventLocked(ev); encodeErr != nil {
		return false, false // nothing written
	} else if writeErr != nil {
		return true, false
	}
	if !h.sw.flushNoWait() {
		return true, false
	}
	h.dirty = false
	h.last = h.sw.now
	return true, true
}

// flush sends what was written, if anything: SubscribeParams.Flush.
func (h *heartbeat) flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	return h.flushLocked()
}

func (h *heartbeat) flushLocked() error {
	if !h.dirty {
		return nil
	}
	h.dirty = false
	if err := h.sw.flush(); err != nil {
		h.fail(err)
		return err
	}
	h.last = h.sw.now
	return nil
}

// fail records the first write error and ends the subscription: the
// client is gone or stopped reading.
func (h *heartbeat) fail(err error) {
	if h.err == nil {
		h.err = err
		h.broken.Store(true)
		h.cancel()
	}
}

// failed reports a write error, from either side.
func (h *heartbeat) failed() bool { return h.broken.Load() }

// stop ends the heartbeats; once it returns nothing writes any more.
func (h *heartbeat) stop() {
	h.mu.Lock()
	h.stopped = true // a beat running now returns without setting the timer again
	h.mu.Unlock()
	h.t.Stop()
}

// streamError ends a stream with an "error" event whose data is a problem.
func (s *Server) streamError(sw *sseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && (r.Context().Err() != nil || s.base.Err() != nil) {
		return
	}
	p, internal := problemOf(err)
	if internal {
		s.log.Error("stepwise server: stream failed", "path", r.URL.Path, "err", err)
	}
	data, _ := json.Marshal(p)
	if sw.event("", "error", data) == nil {
		_ = sw.flush()
	}
}

// sessionEvents: GET /v1/sessions/{id}/events, the session's events from
// Last-Event-ID (or ?after=SEQ:IDX) on: committed steps replayed from the
// store, then live events, each once, in position order. It runs until the
// client leaves.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) error {
	pos, err := streamPosition(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	return s.stream(w, r, stepwise.SubscribeParams{SessionID: sess.ID, After: pos})
}

// runEvents: GET /v1/runs/{id}/events, one run's events; the stream ends
// after its run_finished event.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) error {
	pos, err := streamPosition(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if _, err := s.eng.Store().RunGet(r.Context(), &store.RunGetParams{ID: id}); err != nil {
		return err
	}
	return s.stream(w, r, stepwise.SubscribeParams{RunID: id, After: pos})
}
