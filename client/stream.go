package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/stepwise-run/stepwise/wire"
)

// maxEventBytes bounds one SSE event (a step with a large tool output).
const maxEventBytes = 64 << 20

// Subscribe streams the events of a session (p.SessionID), or of one run
// (p.RunID; the stream ends after its run_finished event), after p.After,
// like wire.Engine.Subscribe. When the connection drops it reconnects
// with the last event id it delivered, so every event after p.After arrives
// exactly once and in order (deltas of steps committed while disconnected
// may be skipped; the committed step carries their content). p.Flush, if
// set, is called whenever every event received has been delivered and the
// next read may wait for the network.
//
// Contract: each pair is an event or an error; an error ends the sequence
// (a refused request, ctx's error, or the last error after WithReconnect's
// consecutive failures); ctx cancels it; break releases the connection. The
// connection is opened when iteration begins.
func (c *Client) Subscribe(ctx context.Context, p wire.SubscribeParams) iter.Seq2[*wire.Event, error] {
	return func(yield func(*wire.Event, error) bool) {
		var path string
		switch {
		case p.RunID != "":
			path = "/v1/runs/" + seg(p.RunID) + "/events"
		case p.SessionID != "":
			path = "/v1/sessions/" + seg(p.SessionID) + "/events"
		default:
			yield(nil, errors.New("stepwise client: subscribe: SessionID or RunID is required"))
			return
		}
		last := p.After
		failures := 0
		delay := c.retryMin
		for {
			progressed, done, err := c.streamOnce(ctx, path, p, &last, yield)
			if done {
				return
			}
			if ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			if err != nil && isPermanent(err) {
				yield(nil, err)
				return
			}
			if progressed {
				failures, delay = 0, c.retryMin
			}
			if failures++; failures > c.maxFailures {
				if err == nil {
					err = errors.New("stream closed by the server")
				}
				yield(nil, fmt.Errorf("stepwise client: stream %s: giving up after %d attempts: %w", path, c.maxFailures, err))
				return
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				yield(nil, ctx.Err())
				return
			case <-t.C:
			}
			delay = min(delay*2, c.retryMax)
		}
	}
}

// streamOnce reads one connection. It reports whether it delivered events,
// whether the stream is over (run finished, consumer stopped, or an
// in-stream error was yielded), and why the connection ended.
func (c *Client) streamOnce(ctx context.Context, path string, p wire.SubscribeParams, last *wire.Position, yield func(*wire.Event, error) bool) (progressed, done bool, err error) {
	req, err := c.newRequest(ctx, http.MethodGet, path, url.Values{"after": {last.String()}}, nil)
	if err != nil {
		yield(nil, err)
		return false, true, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", last.String())
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return false, false, decodeError(resp.StatusCode, body)
	}
	r := bufio.NewReaderSize(resp.Body, 32<<10)
	var id, typ string
	var data bytes.Buffer
	for {
		if p.Flush != nil && r.Buffered() == 0 {
			// Every event received is delivered: the next read may wait.
			if err := p.Flush(); err != nil {
				yield(nil, err)
				return progressed, true, err
			}
		}
		line, err := readLine(r)
		if err != nil {
			return progressed, false, err
		}
		if len(line) > 0 {
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "id":
				id = string(value)
			case "event":
				typ = string(value)
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				if data.Len()+len(value) > maxEventBytes {
					return progressed, false, fmt.Errorf("stepwise client: event larger than %d bytes", maxEventBytes)
				}
				data.Write(value)
			}
			continue
		}
		// A blank line dispatches the event.
		if data.Len() == 0 {
			id, typ = "", ""
			continue
		}
		if typ == "error" {
			// The server ended the stream with a problem; its status says
			// whether reconnecting can help.
			var pb struct {
				Status int `json:"status"`
			}
			_ = json.Unmarshal(data.Bytes(), &pb)
			if pb.Status == 0 {
				pb.Status = http.StatusInternalServerError
			}
			e := decodeError(pb.Status, data.Bytes())
			if e.Status >= 500 {
				return progressed, false, e
			}
			yield(nil, e)
			return progressed, true, e
		}
		ev, err := decodeEvent(id, data.Bytes())
		data.Reset()
		id, typ = "", ""
		if err != nil {
			yield(nil, err)
			return progressed, true, err
		}
		if !last.Less(ev.Position) {
			continue // already delivered
		}
		*last = ev.Position
		progressed = true
		if !yield(ev, nil) {
			return true, true, nil
		}
		if p.RunID != "" && ev.Type == wire.EventRunFinished && ev.RunID == p.RunID {
			return true, true, nil
		}
	}
}

// readLine reads one line without its terminator (LF or CRLF).
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(out)+len(chunk) > maxEventBytes {
			return nil, fmt.Errorf("stepwise client: SSE line longer than %d bytes", maxEventBytes)
		}
		if err == bufio.ErrBufferFull {
			out = append(out, chunk...)
			continue
		}
		if err != nil {
			if err == io.EOF && len(out)+len(chunk) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if out != nil {
			out = append(out, chunk...)
		} else {
			out = chunk
		}
		out = bytes.TrimSuffix(out, []byte("\n"))
		return bytes.TrimSuffix(out, []byte("\r")), nil
	}
}

func decodeEvent(id string, data []byte) (*wire.Event, error) {
	var w wire.EventData
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("stepwise client: decode event %q: %w", id, err)
	}
	if id == "" {
		id = w.ID
	}
	pos, err := wire.ParsePosition(id)
	if err != nil {
		return nil, fmt.Errorf("stepwise client: event without a valid id: %w", err)
	}
	return w.Event(pos), nil
}
