package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// floodModel waits until told, then streams n deltas of size bytes each
// ("d0001 xxx…") without pausing.
type floodModel struct {
	wait    chan struct{}
	n, size int
}

func (m *floodModel) Name() string { return "flood" }
func (m *floodModel) Generate(ctx context.Context, _ *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		select {
		case <-m.wait:
		case <-ctx.Done():
			yield(nil, ctx.Err())
			return
		}
		var all strings.Builder
		for i := range m.n {
			d := fmt.Sprintf("d%04d ", i)
			d += strings.Repeat("x", m.size-len(d))
			all.WriteString(d)
			if !yield(&llm.Response{Partial: true, Content: d}, nil) {
				return
			}
		}
		yield(&llm.Response{Content: all.String(), FinishReason: "stop"}, nil)
	}
}

// Deltas a publisher writes to a stream's connection itself (the handler
// waiting) meet a client that does not read: the socket takes part of a
// chunk or nothing, the rest stays pending for the handler, which sends it
// before anything else once the client reads. The client gets every delta
// once, in order, in valid chunked framing, then run_finished.
func TestSSEDirectDeltaSlowClient(t *testing.T) {
	t.Parallel()
	m := &floodModel{wait: make(chan struct{}), n: 600, size: 4000}
	env := newEnv(t, []*stepwise.Agent{{Name: "flood", Model: m}})
	// A server of its own whose connections have small send buffers: the
	// first writes of the flood fill them.
	hs := &http.Server{Handler: env.srv, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetWriteBuffer(8 << 10)
		}
		return ConnContext(ctx, c)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := env.eng.StartRun(ctx, stepwise.StartParams{Agent: "flood", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(128 << 10)
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /v1/runs/%s/events HTTP/1.1\r\nHost: stepwise\r\n\r\n", run.ID); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 1<<10)
	// The head and the retry hint: the stream is live.
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	if hint := readChunk(t, br); hint != "retry: 1000\n\n" {
		t.Fatalf("first chunk %q", hint)
	}
	close(m.wait)
	// The whole flood is published while the client reads nothing: it
	// fills the socket and leaves the rest pending for the handler.
	env.waitRun(run.ID, steptype.RunCompleted)
	var body string
	for {
		c := readChunk(t, br)
		if c == "" {
			break // the last chunk
		}
		body += c
	}
	var last stepwise.Position
	next := 0
	for line := range strings.Lines(body) {
		switch {
		case strings.HasPrefix(line, "id: "):
			pos, err := stepwise.ParsePosition(strings.TrimSpace(line[4:]))
			if err != nil || !last.Less(pos) {
				t.Fatalf("id %q after %v (%v)", line, last, err)
			}
			last = pos
		case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"delta":`):
			want := fmt.Sprintf(`"content":"d%04d `, next)
			if !strings.Contains(line, want) || len(line) < m.size {
				i := strings.Index(line, `"content":"`)
				t.Fatalf("delta %d: %.60q", next, line[max(i, 0):])
			}
			next++
		}
	}
	if next != m.n || !strings.Contains(body, "event: run_finished") {
		t.Fatalf("%d deltas of %d; run_finished: %v", next, m.n, strings.Contains(body, "event: run_finished"))
	}
}

// readChunk reads one chunk of a chunked body from br: "" for the last.
func readChunk(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasSuffix(line, "\r\n") {
		t.Fatalf("chunk size line %q: %v", line, err)
	}
	var n int
	if _, err := fmt.Sscanf(line, "%x\r\n", &n); err != nil {
		t.Fatalf("chunk size line %q: %v", line, err)
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(br, data); err != nil || string(data[n:]) != "\r\n" {
		t.Fatalf("chunk of %d bytes: %v", n, err)
	}
	return string(data[:n])
}

// directStream is a stream's writer on one end of a loopback TCP
// connection, set for direct delivery (as stream sets it once net/http sent
// the head), and a delta to deliver; the other end is read to its end, and
// what it read is sent on the channel once the writer's end is closed
// (discarded, and nothing sent, unless keep).
func directStream(tb testing.TB, keep bool) (*heartbeat, *stepwise.Event, net.Conn, <-chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close() })
	conn, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	got := make(chan string, 1)
	go func() {
		if !keep {
			_, _ = io.Copy(io.Discard, client)
			return
		}
		data, _ := io.ReadAll(client)
		got <- string(data)
	}()
	sw := &sseWriter{timeout: time.Minute, conn: conn, raw: rawConn(conn), buf: make([]byte, chunkRoom)}
	if sw.raw == nil {
		tb.Fatal("a TCP connection offers no syscall.RawConn")
	}
	h := &heartbeat{sw: sw, every: time.Hour, cancel: func() {}}
	at := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	ev := &stepwise.Event{Type: stepwise.EventStepDelta, SessionID: "s1", RunID: "r1", StepName: "llm", Time: at, Delta: &stepwise.Delta{Content: "t1764277200000000000|"}}
	return h, ev, conn, got
}

// A delta a publisher delivers to a stream directly (heartbeat.direct:
// encoded behind the chunk room, one non-blocking write) allocates nothing
// once the stream's buffer has grown: it is the run's goroutine that pays
// for it, once per delta. The client gets each delta once, framed as a
// chunk of its own.
func TestSSEDirectDeltaAllocs(t *testing.T) {
	h, ev, conn, got := directStream(t, true)
	n := 0
	deliver := func() {
		n++
		ev.Position = stepwise.Position{Seq: 1, Idx: int64(n)}
		if taken, sent := h.direct(ev); !taken || !sent {
			t.Fatalf("delta %d: taken %v, sent %v", n, taken, sent)
		}
	}
	deliver() // the buffer grows, the encoder notes the ids
	if allocs := testing.AllocsPerRun(200, deliver); allocs != 0 {
		t.Errorf("%.1f allocations per direct delta, want 0", allocs)
	}
	conn.Close()
	body := <-got
	if chunks := strings.Count(body, "\r\nid: "); chunks != n {
		t.Fatalf("%d chunks for %d deltas", chunks, n)
	}
	for i := 1; i <= n; i++ {
		if c := strings.Count(body, fmt.Sprintf("id: 1:%d\n", i)); c != 1 {
			t.Fatalf("delta %d sent %d times:\n%.400s", i, c, body)
		}
	}
}

// BenchmarkSSEDirectDelta is a publisher's direct delivery of one delta to
// a stream on loopback: the encoding and the write(2), whose receive half
// (the reader's socket, its wake-up) the loopback charges to the writer.
func BenchmarkSSEDirectDelta(b *testing.B) {
	h, ev, _, _ := directStream(b, false)
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		n++
		ev.Position = stepwise.Position{Seq: 1, Idx: n}
		if taken, sent := h.direct(ev); !taken {
			b.Fatalf("delta %d not taken", n)
		} else if !sent {
			// The reader fell behind: the handler's blocking flush sends
			// what is pending, as in a stream.
			if err := h.flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
