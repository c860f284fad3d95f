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
			if strings.HasSuffix(k, "_us") {
				// A duration under a microsecond is omitted from the
				// JSON: drop them all so that presence does not vary.
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

// diff shows the first lines where want and got differ, with context.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	from := max(0, i-3)
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d\n", i+1)
	for k := from; k < i; k++ {
		fmt.Fprintf(&b, "  %s\n", w[k])
	}
	for k := i; k < min(len(w), i+8); k++ {
		fmt.Fprintf(&b, "- %s\n", w[k])
	}
	for k := i; k < min(len(g), i+8); k++ {
		fmt.Fprintf(&b, "+ %s\n", g[k])
	}
	return b.String()
}
