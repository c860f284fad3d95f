package loadgen

import (
	"bytes"
	"errors"
	"fmt"
)

// wireStream decodes a load stream as it comes off its connection, for the
// client that reads the connections itself (readLoadStreams): the HTTP/1.1
// response head, the chunked framing, then the SSE lines, each handed to
// the stream's check as soon as it is complete. Reads may end anywhere: a
// part of a line, of a chunk's size or of the head waits for the next.
type wireStream struct {
	head bool // the response head was read
	// chunk is what the framing expects next: the data of a chunk
	// (chunk > 0 bytes of it), its size line (chunkSize) or the CRLF after
	// its data (chunkEnd).
	chunk int
	raw   []byte // the transport's bytes not decoded yet (a part of the head or of a size line)
	line  []byte // a line's beginning, when a read ended inside it
}

const (
	chunkSize = 0
	chunkEnd  = -1
)

var (
	errStreamEnded = errors.New("the stream ended before its run finished")
	crlf           = []byte("\r\n")
	headEnd        = []byte("\r\n\r\n")
)

// feed decodes p (read from the connection; not kept) and reports whether
// the run finished (the check's line did): what follows is not read.
func (w *wireStream) feed(p []byte, c *streamCheck) (bool, error) {
	in, kept := p, len(w.raw) > 0
	if kept {
		w.raw = append(w.raw, p...)
		in = w.raw
	}
	done, rest, err := w.decode(in, c)
	if err != nil || done {
		return done, err
	}
	// Keep what could not be decoded yet: the end of p, or of w.raw
	// (copy moves it to the front).
	if kept {
		w.raw = w.raw[:copy(w.raw, rest)]
	} else {
		w.raw = append(w.raw[:0], rest...)
	}
	return false, nil
}

// decode decodes what it can of in and returns what is left: an incomplete
// head or size line.
func (w *wireStream) decode(in []byte, c *streamCheck) (bool, []byte, error) {
	if !w.head {
		i := bytes.Index(in, headEnd)
		if i < 0 {
			if len(in) > 16<<10 {
				return false, nil, errors.New("response head too long")
			}
			return false, in, nil
		}
		if err := checkHead(in[:i+2]); err != nil {
			return false, nil, err
		}
		w.head, w.chunk, in = true, chunkSize, in[i+len(headEnd):]
	}
	for len(in) > 0 {
		switch {
		case w.chunk > 0:
			n := min(w.chunk, len(in))
			if done, err := w.lines(in[:n], c); err != nil || done {
				return done, nil, err
			}
			w.chunk -= n
			in = in[n:]
			if w.chunk == 0 {
				w.chunk = chunkEnd
			}
		case w.chunk == chunkEnd:
			if len(in) < 2 {
				return false, in, nil
			}
			if !bytes.HasPrefix(in, crlf) {
				return false, nil, fmt.Errorf("chunk not followed by CRLF: %q", in[:2])
			}
			w.chunk, in = chunkSize, in[2:]
		default:
			i := bytes.Index(in, crlf)
			if i < 0 {
				if len(in) > 256 {
					return false, nil, errors.New("chunk size line too long")
				}
				return false, in, nil
			}
			size, ok := parseChunkSize(in[:i])
			if !ok {
				return false, nil, fmt.Errorf("bad chunk size line %q", in[:i])
			}
			if size == 0 {
				return false, nil, errStreamEnded
			}
			w.chunk, in = size, in[i+2:]
		}
	}
	return false, nil, nil
}

// lines hands the complete lines of data (a chunk's, or a part of it) to c;
// an incomplete last line waits in w.line.
func (w *wireStream) lines(data []byte, c *streamCheck) (bool, error) {
	if len(w.line) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			w.line = append(w.line, data...)
			return false, nil
		}
		w.line = append(w.line, data[:i+1]...)
		data = data[i+1:]
		done, err := c.line(w.line)
		w.line = w.line[:0]
		if err != nil || done {
			return done, err
		}
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			w.line = append(w.line, data...)
			return false, nil
		}
		if done, err := c.line(data[:i+1]); err != nil || done {
			return done, err
		}
		data = data[i+1:]
	}
	return false, nil
}

// checkHead checks the status line and framing of a stream's response head
// (its lines up to the empty one, CRLF-terminated).
func checkHead(head []byte) error {
	status, rest, _ := bytes.Cut(head, crlf)
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("subscribe: %q", status)
	}
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, crlf)
		name, value, _ := bytes.Cut(h, []byte(":"))
		if bytes.EqualFold(name, []byte("Transfer-Encoding")) && bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked")) {
			return nil
		}
	}
	return errors.New("subscribe: the response is not chunked")
}

// parseChunkSize parses a chunk size line (hexadecimal, extensions after
// ';' ignored).
func parseChunkSize(b []byte) (int, bool) {
	if i := bytes.IndexByte(b, ';'); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 8 {
		return 0, false
	}
	n := 0
	for _, ch := range b {
		switch {
		case '0' <= ch && ch <= '9':
			n = n<<4 | int(ch-'0')
		case 'a' <= ch && ch <= 'f':
			n = n<<4 | int(ch-'a'+10)
		case 'A' <= ch && ch <= 'F':
			n = n<<4 | int(ch-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}
