package bedrock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"sort"
	"testing"
	"testing/iotest"
)

// EncodeMessage frames one event stream message with string headers, for
// the tests of package bedrock_test.
var EncodeMessage = encodeMessage

func encodeMessage(headers map[string]string, payload []byte) []byte {
	var h bytes.Buffer
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		h.WriteByte(byte(len(k)))
		h.WriteString(k)
		h.WriteByte(7)
		_ = binary.Write(&h, binary.BigEndian, uint16(len(headers[k])))
		h.WriteString(headers[k])
	}
	total := preludeLen + h.Len() + len(payload) + 4
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Len()))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, h.Bytes()...)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func TestFrameReaderRoundTrip(t *testing.T) {
	t.Parallel()
	var stream []byte
	stream = append(stream, encodeMessage(map[string]string{":event-type": "messageStart", ":message-type": "event", ":content-type": "application/json"}, []byte(`{"role":"assistant"}`))...)
	stream = append(stream, encodeMessage(map[string]string{":message-type": "event"}, nil)...)
	for name, r := range map[string]io.Reader{
		"whole":    bytes.NewReader(stream),
		"one byte": iotest.OneByteReader(bytes.NewReader(stream)),
	} {
		f := &frameReader{r: r}
		m, err := f.next()
		if err != nil || m.headers[":event-type"] != "messageStart" || m.headers[":content-type"] != "application/json" || string(m.payload) != `{"role":"assistant"}` {
			t.Fatalf("%s: first %+v %v", name, m, err)
		}
		m, err = f.next()
		if err != nil || len(m.payload) != 0 || m.headers[":message-type"] != "event" {
			t.Fatalf("%s: second %+v %v", name, m, err)
		}
		if _, err := f.next(); err != io.EOF {
			t.Fatalf("%s: end %v", name, err)
		}
	}
}

// A message as the public description of the format lays it out, built by
// hand: prelude, a string header and a bytes header, a payload, checksums.
func TestFrameReaderHandBuilt(t *testing.T) {
	t.Parallel()
	body := []byte{}
	body = append(body, 13)
	body = append(body, ":message-type"...)
	body = append(body, 7, 0, 5)
	body = append(body, "event"...)
	body = append(body, 3)
	body = append(body, "raw"...)
	body = append(body, 6, 0, 2, 0xff, 0x00) // bytes: skipped
	body = append(body, 4)
	body = append(body, "flag"...)
	body = append(body, 0) // bool true: no value
	body = append(body, 2)
	body = append(body, "id"...)
	body = append(body, 9)
	body = append(body, make([]byte, 16)...) // uuid
	hlen := len(body)
	body = append(body, "{}"...)
	total := 12 + len(body) + 4
	msg := binary.BigEndian.AppendUint32(nil, uint32(total))
	msg = binary.BigEndian.AppendUint32(msg, uint32(hlen))
	msg = binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(msg))
	msg = append(msg, body...)
	msg = binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(msg))
	m, err := (&frameReader{r: bytes.NewReader(msg)}).next()
	if err != nil || len(m.headers) != 1 || m.headers[":message-type"] != "event" || string(m.payload) != "{}" {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestFrameReaderBroken(t *testing.T) {
	t.Parallel()
	good := encodeMessage(map[string]string{":message-type": "event"}, []byte(`{"a":1}`))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	huge := binary.BigEndian.AppendUint32(nil, 1<<30)
	huge = binary.BigEndian.AppendUint32(huge, 0)
	huge = binary.BigEndian.AppendUint32(huge, crc32.ChecksumIEEE(huge))
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"prelude checksum": {flip(9), errFrame},
		"length":           {flip(3), errFrame},
		"payload":          {flip(len(good) - 6), errFrame},
		"message checksum": {flip(len(good) - 1), errFrame},
		"too long":         {huge, errFrame},
		"cut in prelude":   {good[:7], io.ErrUnexpectedEOF},
		"cut in body":      {good[:len(good)-3], io.ErrUnexpectedEOF},
		"header name":      {withHeaders([]byte{0}), errFrame},
		"header type":      {withHeaders([]byte{1, 'x', 42}), errFrame},
		"header length":    {withHeaders([]byte{1, 'x', 7, 0, 9, 'a'}), errFrame},
	} {
		_, err := (&frameReader{r: bytes.NewReader(tc.data)}).next()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", name, err, tc.want)
		}
	}
}

// withHeaders returns a well-checksummed message whose header block is h.
func withHeaders(h []byte) []byte {
	total := preludeLen + len(h) + 4
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, h...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func FuzzFrameReader(f *testing.F) {
	f.Add(encodeMessage(map[string]string{":message-type": "event", ":event-type": "contentBlockDelta"}, []byte(`{"delta":{"text":"hi"}}`)))
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := &frameReader{r: bytes.NewReader(data)}
		for range 64 {
			if _, err := fr.next(); err != nil {
				return
			}
		}
	})
}

// The encoded messages of the event stream test vectors the AWS SDKs
// share, decoded independently of encodeMessage.
func TestFrameReaderAWSVectors(t *testing.T) {
	t.Parallel()
	body := []byte(`{'foo':'bar'}`)
	for name, tc := range map[string]struct {
		encoded []byte
		headers map[string]string
	}{
		"empty_message": {[]byte{0, 0, 0, 16, 0, 0, 0, 0, 5, 194, 72, 235, 125, 152, 200, 255}, map[string]string{}},
		"int32_header": {append(append([]byte{0, 0, 0, 45, 0, 0, 0, 16, 65, 196, 36, 184, 10, 101, 118, 101, 110, 116, 45, 116, 121, 112, 101, 4, 0, 0, 160, 12},
			body...), 54, 244, 128, 160), map[string]string{}}, // an integer header, not kept
		"payload_no_headers": {append(append([]byte{0, 0, 0, 29, 0, 0, 0, 0, 253, 82, 140, 90}, body...), 195, 101, 57, 54), map[string]string{}},
		"payload_one_str_header": {append(append(append([]byte{0, 0, 0, 61, 0, 0, 0, 32, 7, 253, 131, 150, 12}, "content-type"...),
			append(append([]byte{7, 0, 16}, "application/json"...), body...)...), 141, 156, 8, 177), map[string]string{"content-type": "application/json"}},
	} {
		m, err := (&frameReader{r: bytes.NewReader(tc.encoded)}).next()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		wantBody := body
		if name == "empty_message" {
			wantBody = nil
		}
		if !bytes.Equal(m.payload, wantBody) || len(m.headers) != len(tc.headers) || m.headers["content-type"] != tc.headers["content-type"] {
			t.Errorf("%s: headers %v payload %q", name, m.headers, m.payload)
		}
		if got := encodeMessage(tc.headers, wantBody); name != "int32_header" && !bytes.Equal(got, tc.encoded) {
			t.Errorf("%s: the test encoder writes %v", name, got)
		}
	}
}
