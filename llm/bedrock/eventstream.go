package bedrock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The AWS event stream framing (application/vnd.amazon.eventstream) of
// converse-stream: each message is
//
//	total length  uint32  (the whole message, these 4 bytes included)
//	headers length uint32
//	prelude CRC   uint32  (CRC-32 of the 8 bytes above)
//	headers       name length uint8, name, value type uint8, value
//	payload       total - headers - 16 bytes
//	message CRC   uint32  (CRC-32 of everything before it)
//
// with big-endian integers and the IEEE CRC-32.

const (
	preludeLen    = 12
	minMessageLen = preludeLen + 4
	// maxMessageLen and maxHeadersLen are the limits of the format.
	maxMessageLen = 16 << 20
	maxHeadersLen = 128 << 10
)

// errFrame is the cause of a message that breaks the framing.
var errFrame = errors.New("invalid event stream message")

// message is one decoded event stream message.
type message struct {
	headers map[string]string // string-valued headers; others are skipped
	payload []byte
}

// frameReader reads messages from r.
type frameReader struct {
	r   io.Reader
	buf []byte
}

// next reads one message. It returns io.EOF at a clean end between
// messages, io.ErrUnexpectedEOF for a message cut off, and an error
// wrapping errFrame for a message that is not well formed. The payload is
// valid until the next call.
func (f *frameReader) next() (*message, error) {
	var prelude [preludeLen]byte
	if _, err := io.ReadFull(f.r, prelude[:]); err != nil {
		return nil, err
	}
	total := binary.BigEndian.Uint32(prelude[0:4])
	hlen := binary.BigEndian.Uint32(prelude[4:8])
	if crc32.ChecksumIEEE(prelude[:8]) != binary.BigEndian.Uint32(prelude[8:12]) {
		return nil, fmt.Errorf("%w: prelude checksum mismatch", errFrame)
	}
	if total < minMessageLen || total > maxMessageLen || hlen > maxHeadersLen || hlen > total-minMessageLen {
		return nil, fmt.Errorf("%w: lengths %d and %d", errFrame, total, hlen)
	}
	if cap(f.buf) < int(total) {
		f.buf = make([]byte, total)
	}
	b := f.buf[:total]
	copy(b, prelude[:])
	if _, err := io.ReadFull(f.r, b[preludeLen:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if crc32.ChecksumIEEE(b[:total-4]) != binary.BigEndian.Uint32(b[total-4:]) {
		return nil, fmt.Errorf("%w: message checksum mismatch", errFrame)
	}
	headers, err := parseHeaders(b[preludeLen : preludeLen+hlen])
	if err != nil {
		return nil, err
	}
	return &message{headers: headers, payload: b[preludeLen+hlen : total-4]}, nil
}

// headerSize is the size of the fixed-size header value types, by type.
var headerSize = map[byte]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}

// parseHeaders reads the header block, keeping the string values (type 7).
func parseHeaders(b []byte) (map[string]string, error) {
	h := map[string]string{}
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || len(b) < 1+n+1 {
			return nil, fmt.Errorf("%w: header name", errFrame)
		}
		name := string(b[1 : 1+n])
		typ := b[1+n]
		b = b[2+n:]
		switch typ {
		case 6, 7: // bytes, string: uint16 length, then the value
			if len(b) < 2 {
				return nil, fmt.Errorf("%w: header %s", errFrame, name)
			}
			l := int(binary.BigEndian.Uint16(b))
			if len(b) < 2+l {
				return nil, fmt.Errorf("%w: header %s", errFrame, name)
			}
			if typ == 7 {
				h[name] = string(b[2 : 2+l])
			}
			b = b[2+l:]
		default:
			size, ok := headerSize[typ]
			if !ok || len(b) < size {
				return nil, fmt.Errorf("%w: header %s of type %d", errFrame, name, typ)
			}
			b = b[size:]
		}
	}
	return h, nil
}
