package server

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strconv"
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
	buf      []byte
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
func (s *sseWriter) start() error {
	s.w.WriteHeader(http.StatusOK)
	s.buf = append(s.buf[:0], "retry: 1000\n\n"...)
	if err := s.write(); err != nil {
		return err
	}
	return s.flush()
}

// event writes one event; id and typ may be empty. data must be one line
// (compact JSON is). Call flush to send it.
func (s *sseWriter) event(id, typ string, data []byte) error {
	b := s.buf[:0]
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	return s.finish(b, typ, data)
}

// positioned writes one event whose id is pos.
func (s *sseWriter) positioned(pos stepwise.Position, typ string, data []byte) error {
	b := append(s.buf[:0], "id: "...)
	b = strconv.AppendInt(b, pos.Seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, pos.Idx, 10)
	b = append(b, '\n')
	return s.finish(b, typ, data)
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
	s.buf = append(append(append(s.buf[:0], ": "...), text...), '\n', '\n')
	return s.write()
}

func (s *sseWriter) write() error {
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
	return s.rc.Flush()
}

// extendDeadline moves the write deadline timeout ahead, at most every
// quarter of it (setting a deadline is not free).
func (s *sseWriter) extendDeadline() error {
	now := time.Now()
	if now.Add(s.timeout - s.timeout/4).Before(s.deadline) {
		return nil
	}
	s.deadline = now.Add(s.timeout)
	if err := s.rc.SetWriteDeadline(s.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// item is one pair of an event sequence.
type item struct {
	ev  *stepwise.Event
	err error
}

// pump ranges over seq in a goroutine and hands the pairs over a small
// channel, so the writer can interleave heartbeats. The channel is bounded:
// a slow writer slows only this subscription, which the engine then
// switches to catch-up. The channel is closed when seq ends or ctx is done;
// the caller must cancel ctx and drain it before returning.
func pump(ctx context.Context, seq iter.Seq2[*stepwise.Event, error]) <-chan item {
	ch := make(chan item, 16)
	go func() {
		defer close(ch)
		for ev, err := range seq {
			select {
			case ch <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// maxBatch bounds the events written between two flushes.
const maxBatch = 64

// stream writes the events of p as SSE until the sequence ends (a run
// stream ends after its run_finished event), the client goes away or the
// server closes. Validation happened before: from here on errors go into
// the stream as an "error" event carrying a problem.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p stepwise.SubscribeParams) error {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	sw := newSSEWriter(w, s.cfg.WriteTimeout)
	if err := sw.start(); err != nil {
		return nil
	}
	events := pump(ctx, s.eng.Subscribe(ctx, p))
	defer func() {
		cancel()
		for range events {
		}
	}()
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	var data []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-heartbeat.C:
			if sw.comment("heartbeat") != nil || sw.flush() != nil {
				return nil
			}
		case it, ok := <-events:
			for n := 0; ; n++ {
				if !ok {
					_ = sw.flush()
					return nil
				}
				if it.err != nil {
					s.streamError(sw, r, it.err)
					return nil
				}
				var err error
				data, err = appendEvent(data[:0], it.ev)
				if err != nil {
					s.streamError(sw, r, err)
					return nil
				}
				if sw.positioned(it.ev.Position, string(it.ev.Type), data) != nil {
					return nil
				}
				if n == maxBatch {
					break
				}
				select {
				case it, ok = <-events:
					continue
				default:
				}
				break
			}
			if sw.flush() != nil {
				return nil
			}
			heartbeat.Reset(s.cfg.Heartbeat)
		}
	}
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
