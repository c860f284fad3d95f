package tool_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/tool"
)

func named(name string) tool.Tool {
	return tool.New(name, "tool "+name, func(ctx context.Context, _ struct{}) (string, error) { return name, nil })
}

func TestSet(t *testing.T) {
	t.Parallel()
	s, err := tool.NewSet(named("b"), named("a"), named("c-1_x"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range s.Defs() {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "b,a,c-1_x" || s.Len() != 3 || len(s.Tools()) != 3 {
		t.Errorf("order lost: %v", names)
	}
	if tl, ok := s.Get("a"); !ok || tl.Definition().Name != "a" {
		t.Error("Get(a) failed")
	}
	if _, ok := s.Get("zz"); ok {
		t.Error("Get found a missing tool")
	}
	res, err := s.Call(context.Background(), &tool.Call{Name: "a"})
	if err != nil || res.Content != "a" {
		t.Errorf("Call(a) = %+v, %v", res, err)
	}
	res, err = s.Call(context.Background(), &tool.Call{Name: "nope"})
	if err != nil || !res.IsError || !strings.Contains(res.Content, `unknown tool "nope"`) || !strings.Contains(res.Content, "b, a, c-1_x") {
		t.Errorf("Call(nope) = %+v, %v", res, err)
	}
}

func TestSetRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tools []tool.Tool
		want  error
		msg   string
	}{
		{"duplicate with existing", []tool.Tool{named("a")}, tool.ErrDuplicateTool, `duplicate tool name "a"`},
		{"duplicate within call", []tool.Tool{named("x"), named("x")}, tool.ErrDuplicateTool, `"x"`},
		{"space in name", []tool.Tool{named("has space")}, tool.ErrInvalidToolName, `"has space"`},
		{"dot in name", []tool.Tool{named("fs.read")}, tool.ErrInvalidToolName, `"fs.read"`},
		{"too long", []tool.Tool{named(strings.Repeat("n", 65))}, tool.ErrInvalidToolName, "1-64"},
		{"nil", []tool.Tool{named("y"), nil}, nil, "nil tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := tool.NewSet(named("a"))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Add(tc.tools...)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if s.Len() != 1 {
				t.Errorf("a refused Add changed the set: %d tools", s.Len())
			}
		})
	}
}

func TestSetZeroValue(t *testing.T) {
	t.Parallel()
	var s tool.Set
	if len(s.Defs()) != 0 {
		t.Error("zero Set not empty")
	}
	if err := s.Add(named("z")); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("z"); !ok {
		t.Error("zero Set lost an added tool")
	}
}
