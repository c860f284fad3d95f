package stepwisetest

import (
	"bytes"
	"flag"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts of stepwisetest.Golden")

// Collect drains an event sequence (Engine.Run, Resume, Subscribe…) and
// returns its events; it fails the test on the sequence's error.
func Collect(t testing.TB, seq iter.Seq2[*stepwise.Event, error]) []*stepwise.Event {
	t.Helper()
	var out []*stepwise.Event
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

// Golden compares the transcript of events ([Transcript]) with the file at
// path, and rewrites the file instead when the test runs with -update.
func Golden(t testing.TB, path string, events []*stepwise.Event) {
	t.Helper()
	got, err := Transcript(events)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("events differ from %s (run go test -update to accept them):\n%s", path, diff(string(want), string(got)))
	}
}

type masker struct {
	ids map[string]string
}

func (m *masker) mask(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // ids are numbered in a stable order
		for _, k := range keys {
			if strings.HasSuffix(k, "_us") || resourceKeys[k] {
				// A duration under a microsecond is omitted from the
				// JSON, and a step's CPU time and allocations differ
				// from run to run: drop them all so that neither the
				// values nor their presence vary.
				delete(x, k)
				continue
			}
			x[k] = m.mask(k, x[k])
		}
		return x
	case []any:
		for i := range x {
			x[i] = m.mask(key, x[i])
		}
		return x
	case string:
		switch {
		case x == "":
			return x
		case key == "id" || strings.HasSuffix(key, "_id"):
			if id, ok := m.ids[x]; ok {
				return id
			}
			id := fmt.Sprintf("<id%d>", len(m.ids)+1)
			m.ids[x] = id
			return id
		case key == "time" || strings.HasSuffix(key, "_at") || key == "lease_expires":
			return "<time>"
		case key == "lease_owner":
			return "<owner>"
		}
		return x
	}
	return v
}

// resourceKeys are the metrics of a step's resource use, measured, not
// recorded: they differ from run to run.
var resourceKeys = map[string]bool{"cpu_time_ns": true, "alloc_bytes": true, "alloc_objects": true, "overlapping_steps": true}

// diff shows where want and got differ: the lines between their common
// head and tail, at most 20 of each, with 3 lines of context before.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	head := 0
	for head < len(w) && head < len(g) && w[head] == g[head] {
		head++
	}
	tail := 0
	for tail < len(w)-head && tail < len(g)-head && w[len(w)-1-tail] == g[len(g)-1-tail] {
		tail++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d\n", head+1)
	for _, l := range w[max(0, head-3):head] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	side := func(mark string, lines []string) {
		for i, l := range lines {
			if i == 20 {
				fmt.Fprintf(&b, "%s … %d more lines\n", mark, len(lines)-i)
				break
			}
			fmt.Fprintf(&b, "%s %s\n", mark, l)
		}
	}
	side("-", w[head:len(w)-tail])
	side("+", g[head:len(g)-tail])
	return b.String()
}
