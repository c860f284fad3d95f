package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
)

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.*")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(filepath.Base(file), data)
	}
	f.Add("x.yaml", []byte("user_turns:\n  - match: a\n    turns: [{text: b, match: c}]\n  - turns: [d]\nloop: true\n"))
	f.Add("x.yaml", []byte("turns: [{tool_calls: [{name: a, arguments: {b: [1, 2.5, null, true, 0x1f]}}], repeat: 3}]"))
	f.Add("x.json", []byte(`{"turns": [{"text": "a", "error": {"status": 500, "times": 1}}]}`))
	f.Add("x.yaml", []byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		m, err := scripted.Parse(name, data)
		if err != nil {
			var pe *scripted.ParseError
			if m != nil || !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), name) {
				t.Fatalf("bad failure: model %v, error %T %v", m, err, err)
			}
			return
		}
		if !strings.HasPrefix(m.Name(), "scripted:") {
			t.Fatalf("Name %q", m.Name())
		}
		reqs := []*llm.Request{
			request(),
			request(user("a")),
			request(user("a"), assistant("b"), user("c"), assistant("d")),
		}
		for _, req := range reqs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			var content, reasoning string
			finals := 0
			for r, err := range m.Generate(ctx, req) {
				if err != nil {
					break
				}
				if r.Partial {
					content += r.Content
					reasoning += r.Reasoning
					continue
				}
				finals++
				if r.Content != content || r.Reasoning != reasoning {
					t.Fatalf("deltas %q/%q do not add up to %q/%q", content, reasoning, r.Content, r.Reasoning)
				}
			}
			cancel()
			if finals > 1 {
				t.Fatalf("%d final responses", finals)
			}
		}
	})
}
