package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// loadStreamCases are streams of a run r1 of one turn of two deltas, in
// order or broken, and the error a load client must report (none for the
// first).
var loadStreamCases = func() []struct{ name, stream, err string } {
	delta := func(id, stamp string) string {
		return "id: " + id + "\nevent: step_delta\ndata: {\"delta\":{\"content\":\"t" + stamp + "|\"}}\n\n"
	}
	step := func(id string) string { return "id: " + id + "\nevent: step_completed\ndata: {}\n\n" }
	finish := "id: 3:0\nevent: run_finished\ndata: {\"run_id\":\"r1\",\"run\":{\"status\":\"completed\"}}\n\n"
	return []struct{ name, stream, err string }{
		{"in order", delta("1:1", "100") + delta("1:2", "200") + step("1:3") + step("2:0") + finish, ""},
		{"id backwards", delta("1:2", "100") + delta("1:1", "200") + step("1:3") + step("2:0") + finish, "event id"},
		{"delta twice", delta("1:1", "100") + delta("1:2", "100") + step("1:3") + step("2:0") + finish, "out of order"},
		{"deltas swapped", delta("1:1", "200") + delta("1:2", "100") + step("1:3") + step("2:0") + finish, "out of order"},
		{"delta missing", delta("1:1", "100") + step("1:3") + step("2:0") + finish, "1 deltas and 2 steps"},
		{"step missing", delta("1:1", "100") + delta("1:2", "200") + step("2:0") + finish, "2 deltas and 1 steps"},
		{"not completed", delta("1:1", "100") + delta("1:2", "200") + step("1:3") + step("2:0") + strings.Replace(finish, "completed", "failed", 1), "did not complete"},
	}
}()

// TestLoadStreamChecksDelivery: the load client fails a stream whose event
// ids go backwards, whose deltas come twice or out of order, or that
// finishes with a delta or a step missing, and accepts the stream in order.
func TestLoadStreamChecksDelivery(t *testing.T) {
	t.Parallel()
	for _, c := range loadStreamCases {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"run":{"id":"r1","status":"running"}}`))
			}))
			defer ts.Close()
			l := &loadStream{sessionID: "s1", body: http.NoBody, r: bufio.NewReader(strings.NewReader(c.stream))}
			err := l.run(context.Background(), ts.Client(), loadClientConfig{Base: ts.URL, Turns: 1, Deltas: 2})
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("in-order stream: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one with %q", err, c.err)
			}
		})
	}
}

// chunked frames body as an HTTP/1.1 response with chunks of the given
// sizes (the last one takes the rest), the way the server sends a stream.
func chunked(body string, sizes ...int) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for body != "" {
		n := len(body)
		if len(sizes) > 0 {
			n, sizes = min(sizes[0], n), sizes[1:]
		}
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	return b.String()
}

// feedWire decodes stream through a wireStream in reads of the given
// sizes (cycled), the run's id known from the start or only at the end.
func feedWire(stream string, reads []int, runKnown bool) error {
	var w wireStream
	var c streamCheck
	c.init(loadClientConfig{Turns: 1, Deltas: 2}, "s1")
	if runKnown {
		c.setRun("r1")
	}
	for i := 0; stream != ""; i++ {
		n := min(reads[i%len(reads)], len(stream))
		done, err := w.feed([]byte(stream[:n]), &c)
		if err != nil {
			return err
		}
		stream = stream[n:]
		if done {
			if !runKnown {
				c.setRun("r1")
			}
			return c.confirm()
		}
	}
	return errStreamEnded
}

// TestWireStreamChecksDelivery: the client that reads the connections
// itself (readLoadStreams) decodes the response head, the chunked framing
// and the lines wherever its reads end, and checks each stream as the
// net/http client does (the cases of TestLoadStreamChecksDelivery).
func TestWireStreamChecksDelivery(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range loadStreamCases {
		for _, framing := range [][]int{nil, {1}, {7, 3}, {40, 1, 90}} {
			stream := chunked("retry: 1000\n\n"+c.stream, framing...)
			reads := [][]int{{len(stream)}, {1}, {2}, {3, 5}, {17}, {64, 1}}
			for range 20 {
				reads = append(reads, []int{1 + rng.IntN(60), 1 + rng.IntN(10)})
			}
			for _, r := range reads {
				for _, known := range []bool{true, false} {
					err := feedWire(stream, r, known)
					switch {
					case c.err == "" && err != nil:
						t.Fatalf("%s, chunks %v, reads %v: %v", c.name, framing, r, err)
					case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
						t.Fatalf("%s, chunks %v, reads %v: error %v, want one with %q", c.name, framing, r, err, c.err)
					}
				}
			}
		}
	}
}

// TestWireStreamRejects: a stream that is not a 200, not chunked, whose
// framing is broken, that ends before its run finished, or that finished
// with another run than the one started, fails.
func TestWireStreamRejects(t *testing.T) {
	t.Parallel()
	good := loadStreamCases[0].stream
	for _, c := range []struct{ name, stream, err string }{
		{"status", strings.Replace(chunked(good), "200 OK", "404 Not Found", 1), "404"},
		{"not chunked", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" + good, "not chunked"},
		{"bad size", strings.Replace(chunked(good), "\r\n\r\n", "\r\n\r\nzz\r\n", 1), "chunk size"},
		{"no CRLF after chunk", strings.Replace(chunked(good, 5), "\r\n5\r\nid: 1\r\n", "\r\n5\r\nid: 1xx", 1), "CRLF"},
		{"ended", chunked(good[:len(good)/2]) + "0\r\n\r\n", errStreamEnded.Error()},
		{"another run", chunked(strings.ReplaceAll(good, `"r1"`, `"r2"`)), "another run"},
	} {
		err := feedWire(c.stream, []int{5}, false)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
		}
	}
}

// TestRunLoadClientReaders: the client process's two readers (the epoll
// one, and net/http's selected by ClientReaderEnv) deliver and measure
// every delta of a real server's streams.
func TestRunLoadClientReaders(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("sets the client's environment with env(1)")
	}
	for _, reader := range []string{"", "net/http"} {
		cmd := append([]string{"env", ClientReaderEnv + "=" + reader}, loadClientCommand()...)
		res, err := runLoad(t, Config{Runs: 20, Turns: 3, Deltas: 4, Latency: time.Millisecond, ClientCommand: cmd})
		if err != nil {
			t.Fatalf("reader %q: %v", reader, err)
		}
		if res.Steps != 20*6 || res.Deltas != 20*3*4 || res.P50 <= 0 || res.P99 < res.P50 {
			t.Fatalf("reader %q: result %+v", reader, res)
		}
	}
}

// TestLoadGC: the collector's counters Run reports count the cycles
// between two readings and their mark work, and the memory sampler
// records what the collections after the first reading found live and
// scanned of the stacks, none before it.
func TestLoadGC(t *testing.T) {
	// synctest: the sampler reads on its ticker, so the readings are
	// counted, not timed.
	synctest.Test(t, func(t *testing.T) {
		var heap, gs atomic.Int64
		var peaks gcPeaks
		peaks.after.Store(1 << 62) // no cycle counts yet
		stop := sampleMemory(&heap, &gs, &peaks)
		defer stop() // a failure ends the sampler too (a bubble must end idle)
		runtime.GC()
		// In the bubble the sampler's 20ms ticker runs on the fake clock:
		// this sleep lets it take three readings, no fewer.
		time.Sleep(50 * time.Millisecond)
		if peaks.live.Load() != 0 || peaks.stacks.Load() != 0 {
			t.Fatalf("peaks %d, %d recorded of cycles before the start", peaks.live.Load(), peaks.stacks.Load())
		}
		c0 := readGC()
		peaks.after.Store(c0.cycles)
		keep := make([]*[64]byte, 0, 1<<14)
		for range cap(keep) {
			keep = append(keep, new([64]byte))
		}
		runtime.GC()
		runtime.GC()
		got := readGC().since(c0)
		// Wait for a reading after the collections (fake time: the loop ends
		// after the first tick that saw them).
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if peaks.live.Load() >= int64(len(keep))*64 && peaks.stacks.Load() > 0 {
				break
			}
		}
		stop()
		runtime.KeepAlive(keep)
		if got.Cycles < 2 || got.MarkCPU <= 0 || got.AssistCPU < 0 || got.AssistCPU > got.MarkCPU {
			t.Fatalf("after two collections: %+v", got)
		}
		if live := peaks.live.Load(); live < int64(len(keep))*64 { // at least what keep holds
			t.Fatalf("peak live heap %d bytes, want at least %d", live, len(keep)*64)
		}
		if peaks.stacks.Load() <= 0 {
			t.Fatal("no stack scanned")
		}
		r := Result{GC: got}
		if s := r.String(); !strings.Contains(s, fmt.Sprintf("; %d GC cycles, mark ", got.Cycles)) {
			t.Fatalf("String() = %q, want the GC figures", s)
		}
	})
}
