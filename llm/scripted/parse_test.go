package scripted_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm/scripted"
)

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src, want string }{
		{"empty", "", "bad.yaml: empty document"},
		{"comments only", "# nothing\n", "bad.yaml: empty document"},
		{"syntax", "turns:\n  - text: a\n   - text: b\n", "bad.yaml:1: did not find expected '-' indicator"},
		{"tab indent", "turns:\n\t- a\n", "bad.yaml:2: found character that cannot start any token"},
		{"scalar root", "hello", "bad.yaml:1: must be a mapping"},
		{"no turns", "loop: true\n", "bad.yaml:1: script needs turns or user_turns"},
		{"empty turns", "turns: []\n", "bad.yaml:1: turns: must list at least one turn"},
		{"both forms", "turns: [a]\nuser_turns:\n  - turns: [b]\n", "bad.yaml:3: user_turns: cannot be combined with turns"},
		{"unknown top field", "turns: [a]\nloops: true\n", "bad.yaml:2: loops: unknown field"},
		{"unknown turn field", "turns:\n  - text: a\n    txt: b\n", "bad.yaml:3: turns[0].txt: unknown field"},
		{"duplicate field", "turns: [a]\nturns: [b]\n", "bad.yaml:2: turns: duplicate field"},
		{"bad duration", "turns:\n  - text: a\n    delay: fast\n", `bad.yaml:3: turns[0].delay: must be a non-negative Go duration such as "250ms" or "2s"`},
		{"number duration", "turns:\n  - text: a\n    chunk_delay: 5\n", "bad.yaml:3: turns[0].chunk_delay: must be a non-negative Go duration"},
		{"negative duration", "turns:\n  - text: a\n    delay: -1s\n", "bad.yaml:3: turns[0].delay: must be a non-negative"},
		{"empty turn", "turns:\n  - {}\n", "bad.yaml:2: turns[0]: turn needs text, reasoning, tool_calls or error"},
		{"turn is a list", "turns:\n  - [a]\n", "bad.yaml:2: turns[0]: must be a mapping"},
		{"tool without name", "turns:\n  - tool_calls:\n      - arguments: {a: 1}\n", "bad.yaml:3: turns[0].tool_calls[0].name: required"},
		{"tool empty name", "turns:\n  - tool_calls: [{name: ''}]\n", "bad.yaml:2: turns[0].tool_calls[0].name: must not be empty"},
		{"tool_calls not a list", "turns:\n  - tool_calls: {name: a}\n", "bad.yaml:2: turns[0].tool_calls: must be a list"},
		{"arguments array", "turns:\n  - tool_calls:\n      - name: a\n        arguments: '[1, 2]'\n", "bad.yaml:4: turns[0].tool_calls[0].arguments: must be a JSON object"},
		{"arguments bad json", "turns:\n  - tool_calls:\n      - name: a\n        arguments: '{\"a\": }'\n", "bad.yaml:4: turns[0].tool_calls[0].arguments: must be a JSON object"},
		{"arguments number", "turns:\n  - tool_calls:\n      - name: a\n        arguments: 5\n", "bad.yaml:4: turns[0].tool_calls[0].arguments: must be a mapping or a string holding a JSON object"},
		{"arguments nan", "turns:\n  - tool_calls:\n      - name: a\n        arguments: {x: .nan}\n", `bad.yaml:4: turns[0].tool_calls[0].arguments.x: number ".nan" has no JSON form`},
		{"arguments custom tag", "turns:\n  - tool_calls:\n      - name: a\n        arguments: {x: !env HOME}\n", "bad.yaml:4: turns[0].tool_calls[0].arguments.x: unsupported YAML tag !env"},
		{"status 200", "turns:\n  - error: {status: 200}\n", "bad.yaml:2: turns[0].error.status: must be an HTTP error status (400–599)"},
		{"status missing", "turns:\n  - error:\n      message: boom\n", "bad.yaml:3: turns[0].error.status: required"},
		{"status string", "turns:\n  - error: {status: '429'}\n", "bad.yaml:2: turns[0].error.status: must be an HTTP error status"},
		{"times negative", "turns:\n  - error: {status: 500, times: -1}\n", "bad.yaml:2: turns[0].error.times: must be a non-negative integer"},
		{"repeat zero", "turns:\n  - text: a\n    repeat: 0\n", "bad.yaml:3: turns[0].repeat: must be a positive integer"},
		{"repeat float", "turns:\n  - text: a\n    repeat: 1.5\n", "bad.yaml:3: turns[0].repeat: must be a positive integer"},
		{"chunk negative", "turns:\n  - text: a\n    chunk: -2\n", "bad.yaml:3: turns[0].chunk: must be a non-negative integer"},
		{"usage negative", "turns:\n  - text: a\n    usage: {input_tokens: -1}\n", "bad.yaml:3: turns[0].usage.input_tokens: must be a non-negative integer"},
		{"usage unknown", "turns:\n  - text: a\n    usage: {input: 1}\n", "bad.yaml:3: turns[0].usage.input: unknown field"},
		{"empty match", "turns:\n  - text: a\n    match: ''\n", "bad.yaml:3: turns[0].match: must not be empty"},
		{"loop not bool", "turns: [a]\nloop: yes\n", "bad.yaml:2: loop: must be true or false"},
		{"text not string", "turns:\n  - text: [a]\n", "bad.yaml:2: turns[0].text: must be a string"},
		{"user turn without turns", "user_turns:\n  - match: hi\n", "bad.yaml:2: user_turns[0].turns: must list at least one turn"},
		{"user turns empty", "user_turns: []\n", "bad.yaml:1: user_turns: must list at least one entry"},
		{"merge key", "base: &b {text: a}\nturns:\n  - <<: *b\n", "bad.yaml:1: base: unknown field"},
		{"merge key in turn", "turns:\n  - <<: {text: a}\n", "bad.yaml:2: turns[0]: merge keys (<<) are not supported"},
		{"two documents", "turns: [a]\n---\nturns: [b]\n", "bad.yaml:2: more than one YAML document"},
		{"cyclic alias", "turns:\n  - tool_calls:\n      - name: a\n        arguments: &x {a: *x}\n", "bad.yaml:4: turns[0].tool_calls[0].arguments"},
		{"non-string key", "turns:\n  - {[a]: b}\n", "bad.yaml:2: turns[0]: keys must be strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := scripted.Parse("bad.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error; model %v", m.Name())
			}
			if m != nil {
				t.Fatal("model returned with an error")
			}
			if !strings.HasPrefix(err.Error(), tt.want) && !strings.Contains(err.Error(), "\n"+tt.want) {
				t.Fatalf("error\n%v\nwant prefix %q", err, tt.want)
			}
			var pe *scripted.ParseError
			if !errors.As(err, &pe) || pe.File != "bad.yaml" {
				t.Fatalf("error %T is not a *ParseError for bad.yaml", err)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	t.Parallel()
	_, err := scripted.Parse("x.yaml", []byte("turns:\n  - delay: x\n    text: a\n  - repeat: 0\n    text: b\n"))
	want := "x.yaml:2: turns[0].delay: must be a non-negative Go duration such as \"250ms\" or \"2s\"\n" +
		"x.yaml:4: turns[1].repeat: must be a positive integer"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func TestParseAliasBomb(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + itoa(i) + ": &a" + itoa(i) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + itoa(i-1))
		}
		b.WriteString("]\n")
	}
	src := "turns:\n  - tool_calls:\n      - name: a\n        arguments:\n          " +
		strings.ReplaceAll(strings.TrimSpace(b.String()), "\n", "\n          ") + "\n"
	_, err := scripted.Parse("bomb.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "document too large or too many aliases") {
		t.Fatalf("got %v", err)
	}
}

func TestParseAliasesAndShorthand(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "a.yaml", "turns:\n  - &t {text: again, chunk: 0}\n  - *t\n  - plain string turn\n")
	if f := final(t, m, request(assistant("1"))); f.Content != "again" {
		t.Fatalf("alias turn: %+v", f)
	}
	if f := final(t, m, request(assistant("1"), assistant("2"))); f.Content != "plain string turn" {
		t.Fatalf("string turn: %+v", f)
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	m, err := scripted.Load("testdata/hello.json")
	if err != nil {
		t.Fatal(err)
	}
	parts, f, err := call(t, m, request(user("hi")))
	if err != nil || f.Content != "hello from JSON" || len(parts) != 1 {
		t.Fatalf("%+v %v (%d deltas)", f, err, len(parts))
	}
	f = final(t, m, request(user("hi"), assistant("hello")))
	if len(f.ToolCalls) != 1 || f.ToolCalls[0].ID != "c1" || string(f.ToolCalls[0].Arguments) != `{"tz":"UTC"}` {
		t.Fatalf("%+v", f.ToolCalls)
	}
	// loop: true
	if f := final(t, m, request(assistant("1"), assistant("2"))); f.Content != "hello from JSON" {
		t.Fatalf("loop: %+v", f)
	}
	_, err = scripted.Parse("bad.json", []byte("{\n  \"turns\": [\n    {\"text\": }\n  ]\n}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "bad.json:3: invalid JSON: ") {
		t.Fatalf("got %v", err)
	}
	_, err = scripted.Parse("bad.json", []byte("{\"turns\": [{\"text\": \"a\", \"delay\": 5}]}"))
	if err == nil || !strings.HasPrefix(err.Error(), "bad.json:1: turns[0].delay: ") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadTestdata(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.*")
	if len(files) < 5 {
		t.Fatalf("only %d testdata files", len(files))
	}
	for _, f := range files {
		m, err := scripted.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		want := "scripted:" + strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		if m.Name() != want {
			t.Errorf("%s: Name %q, want %q", f, m.Name(), want)
		}
	}
	if _, err := scripted.Load("testdata/missing.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
