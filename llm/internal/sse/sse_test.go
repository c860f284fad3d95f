package sse_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stepwise-run/stepwise/llm/internal/sse"
)

func events(t *testing.T, r io.Reader) ([]sse.Event, error) {
	t.Helper()
	d := sse.NewDecoder(io.NopCloser(r))
	var out []sse.Event
	for d.Next() {
		e := d.Event()
		out = append(out, sse.Event{Type: e.Type, Data: append([]byte(nil), e.Data...)})
	}
	return out, d.Err()
}

func TestDecode(t *testing.T) {
	t.Parallel()
	const stream = ": comment\r\n\r\n" +
		"event: a\r\ndata: one\r\n\r\n" +
		"data:two\ndata:  three\nid: 7\nretry: 10\n\n" +
		"\n\n" +
		"event: empty\ndata\n\n" +
		"data: cut off"
	want := []sse.Event{{Type: "a", Data: []byte("one")}, {Data: []byte("two\n three")}, {Type: "empty", Data: []byte("")}}
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(stream),
		"one byte": iotest.OneByteReader(strings.NewReader(stream)),
	} {
		got, err := events(t, r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d events %q", name, len(got), got)
		}
		for i := range want {
			if got[i].Type != want[i].Type || string(got[i].Data) != string(want[i].Data) {
				t.Errorf("%s: event %d = %q %q, want %q %q", name, i, got[i].Type, got[i].Data, want[i].Type, want[i].Data)
			}
		}
	}
}

func TestLongLineAcrossBuffers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100<<10)
	got, err := events(t, strings.NewReader("data: "+long+"\n\n"))
	if err != nil || len(got) != 1 || string(got[0].Data) != long {
		t.Fatalf("%d events, err %v", len(got), err)
	}
}

func TestReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	got, err := events(t, io.MultiReader(strings.NewReader("data: 1\n\ndata: 2\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || len(got) != 1 {
		t.Fatalf("%d events, err %v", len(got), err)
	}
}
