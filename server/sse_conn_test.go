package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// rawChunks sends a GET for path on conn (read through br) and reads the
// response: its head, the chunks of its body as they were framed, and the
// connection, positioned after the body, for a next request.
func rawChunks(t *testing.T, conn net.Conn, br *bufio.Reader, path string) (*http.Response, [][]byte) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: stepwise\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	// The head, with net/http's parser; the body by hand, chunk by chunk.
	var head bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("head: %v after %q", err, head.String())
		}
		head.WriteString(line)
		if line == "\r\n" {
			break
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(&head), nil)
	if err != nil {
		t.Fatal(err)
	}
	var chunks [][]byte
	for {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasSuffix(line, "\r\n") {
			t.Fatalf("chunk size line %q: %v", line, err)
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(line, "\r\n"), 16, 64)
		if err != nil {
			t.Fatalf("chunk size line %q: %v", line, err)
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(br, data); err != nil || string(data[n:]) != "\r\n" {
			t.Fatalf("chunk of %d bytes: %q %v", n, data, err)
		}
		if n == 0 {
			return resp, chunks // the last chunk, no trailers
		}
		chunks = append(chunks, data[:n])
	}
}

// A stream served with ConnContext (as Serve does) writes its chunks to the
// connection itself: the same response as through net/http (status,
// headers, body bytes, valid chunked framing ended by the last chunk), and
// the connection stays usable for a next request; a replay goes out as one
// chunk, where net/http's buffers split it.
func TestSSEDirectConnSameBytes(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{toolAgent("looper", 3, 0)})
	plain := httptest.NewServer(env.srv) // no ConnContext: through net/http
	t.Cleanup(plain.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, _, err := env.c.StartRun(ctx, "looper", "go")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(run.ID, steptype.RunCompleted)

	read := func(url string) (*http.Response, [][]byte, net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		br := bufio.NewReader(conn)
		resp, chunks := rawChunks(t, conn, br, "/v1/runs/"+run.ID+"/events")
		return resp, chunks, conn, br
	}
	wantResp, wantChunks, _, _ := read(plain.URL)
	resp, chunks, conn, br := read(env.ts.URL)

	if resp.StatusCode != 200 || !equalHeaders(resp.Header, wantResp.Header) || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("head %d %v, want %d %v", resp.StatusCode, resp.Header, wantResp.StatusCode, wantResp.Header)
	}
	if got, want := bytes.Join(chunks, nil), bytes.Join(wantChunks, nil); !bytes.Equal(got, want) {
		t.Fatalf("body:\n%s\nwant (through net/http):\n%s", got, want)
	}
	body := string(bytes.Join(chunks, nil))
	if !strings.HasPrefix(body, "retry: 1000\n\n") || strings.Count(body, "event: step_completed") != 8 || !strings.HasSuffix(body, "\n\n") || !strings.Contains(body, "event: run_finished") {
		t.Fatalf("body:\n%s", body)
	}
	// The retry hint (net/http's first chunk), then the replay in one.
	if len(chunks) != 2 || string(chunks[0]) != "retry: 1000\n\n" || len(chunks[1]) < 4096 {
		sizes := make([]int, len(chunks))
		for i, c := range chunks {
			sizes[i] = len(c)
		}
		t.Fatalf("chunks of %v bytes, want the hint then the %d-byte replay in one (through net/http: %d chunks)", sizes, len(body)-13, len(wantChunks))
	}
	// Keep-alive: the next request on the same connection is answered.
	if _, err := fmt.Fprintf(conn, "GET /v1/runs/%s HTTP/1.1\r\nHost: stepwise\r\n\r\n", run.ID); err != nil {
		t.Fatal(err)
	}
	next, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(next.Body)
	if next.StatusCode != 200 || !strings.Contains(string(data), run.ID) {
		t.Fatalf("next request on the connection: %d %s", next.StatusCode, data)
	}
}

// equalHeaders compares response headers but for Date.
func equalHeaders(a, b http.Header) bool {
	a, b = a.Clone(), b.Clone()
	a.Del("Date")
	b.Del("Date")
	return fmt.Sprint(a) == fmt.Sprint(b)
}
