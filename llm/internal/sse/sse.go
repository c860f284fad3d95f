// Package sse decodes a text/event-stream body (the server-sent events of
// the WHATWG HTML standard) for the model providers: the provider APIs
// stream their responses this way, and this small reader decodes them
// without the vendors' SDKs.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// MaxLine bounds one line of the stream, so that a server that never sends
// a newline cannot exhaust memory.
const MaxLine = 16 << 20

// ErrLineTooLong is the error of a line longer than MaxLine.
var ErrLineTooLong = errors.New("stepwise: sse: line too long")

// Event is one dispatched event.
type Event struct {
	// Type is the "event:" field, empty when the event has none.
	Type string
	// Data is the "data:" lines joined with "\n". It is valid until the
	// next call to Next.
	Data []byte
}

// Decoder reads events from a body. It is not safe for concurrent use.
type Decoder struct {
	body io.ReadCloser
	r    *bufio.Reader
	ev   Event
	data []byte
	line []byte
	err  error
}

// NewDecoder returns a Decoder reading body, which Close closes.
func NewDecoder(body io.ReadCloser) *Decoder {
	return &Decoder{body: body, r: bufio.NewReaderSize(body, 32<<10)}
}

// Next reads up to the end of the next event and reports whether there is
// one. An event cut off by the end of the stream is dropped, as the
// standard requires. After false, Err tells a clean end from a failure.
func (d *Decoder) Next() bool {
	if d.err != nil {
		return false
	}
	d.ev.Type, d.data = "", d.data[:0]
	seen, gotData := false, false // any field, any data line since the last dispatch
	for {
		line, err := d.readLine()
		if err != nil {
			if err != io.EOF {
				d.err = err
			}
			return false
		}
		if len(line) == 0 {
			if !seen {
				continue
			}
			d.ev.Data = d.data
			return true
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			d.ev.Type, seen = string(value), true
		case "data":
			if gotData {
				d.data = append(d.data, '\n')
			}
			d.data = append(d.data, value...)
			seen, gotData = true, true
		}
		// "id" and "retry" are of no use to a one-shot response stream.
	}
}

// readLine returns the next line without its terminator ("\n", "\r\n").
func (d *Decoder) readLine() ([]byte, error) {
	d.line = d.line[:0]
	for {
		chunk, err := d.r.ReadSlice('\n')
		d.line = append(d.line, chunk...)
		if len(d.line) > MaxLine {
			return nil, ErrLineTooLong
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(d.line[:len(d.line)-1], []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(d.line) > 0:
			// The last line lacks its newline: an unfinished event,
			// dropped by the caller at EOF.
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// Event returns the event Next read.
func (d *Decoder) Event() Event { return d.ev }

// Err returns the error that ended the stream, nil at a clean end.
func (d *Decoder) Err() error { return d.err }

// Close closes the body.
func (d *Decoder) Close() error { return d.body.Close() }
