package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/tool"
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want float64
	}{
		{"1 + 2 * 3", 7},
		{"(1 + 2) * 3", 9},
		{"10 - 4 - 3", 3},
		{"100 / 10 / 5", 2},
		{"7 % 3", 1},
		{"-7 % 3", -1},
		{"2 ^ 3 ^ 2", 512}, // right-associative
		{"-2 ^ 2", -4},     // unary minus binds looser than ^
		{"(-2) ^ 2", 4},
		{"2 ^ -1", 0.5},
		{"--3", 3},
		{"+4", 4},
		{"-(2 + 3)", -5},
		{"1.5e3 + .5", 1500.5},
		{"sqrt(16) + abs(-3)", 7},
		{"min(4, 2, 8) + max(1, 9)", 11},
		{"round(2.5)", 3},
		{"round(3.14159, 2)", 3.14},
		{"ROUND(-2.5)", -3},
		{"pi", math.Pi},
		{" \t3\n", 3},
		{"max(min(1,2), sqrt(abs(-81)))", 9},
	} {
		got, err := evaluate(tc.expr, 64)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%q = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, want string }{
		{"", "empty expression"},
		{"   ", "empty expression"},
		{"1 / 0", "at position 3: division by zero"},
		{"1 / (2 - 2)", "division by zero"},
		{"5 % 0", "modulo by zero"},
		{"0 ^ -1", "division by zero"},
		{"1 +", "at position 4: expected a number, found end of expression"},
		{"(1 + 2", `expected ")"`},
		{"1 + 2)", `at position 6: unexpected ")"`},
		{"2 3", `unexpected "3"`},
		{"1 ** 2", `expected a number, found "* 2"`},
		{"foo(1)", `unknown function "foo"`},
		{"x + 1", `unknown name "x"`},
		{"sqrt 4", "needs arguments in parentheses"},
		{"sqrt(-1)", "square root of a negative number"},
		{"sqrt(1, 2)", "takes 1 argument(s), got 2"},
		{"min()", "takes at least 1 argument(s), got 0"},
		{"round(1.5, 0.5)", "places must be a whole number"},
		{"max(1,", "expected a number"},
		{"(-8) ^ 0.5", "undefined"},
		{"10 ^ 400", "out of range"},
		{"1e400", `invalid number "1e400"`},
		{"1..2", `unexpected ".2"`},
		{"1 & 2", `unexpected "& 2"`},
		{"2e", `at position 2: unexpected "e"`}, // no implicit multiplication
		{strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), "nested too deeply"},
		{strings.Repeat("-", 100) + "1", "nested too deeply"},
	} {
		_, err := evaluate(tc.expr, 64)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.expr, err, tc.want)
		}
	}
}

func TestCalculatorTool(t *testing.T) {
	t.Parallel()
	calc, err := NewCalculator(CalculatorConfig{MaxLength: 20})
	if err != nil {
		t.Fatal(err)
	}
	if calc.Definition().Name != "calculator" {
		t.Errorf("name = %q", calc.Definition().Name)
	}
	res, err := calc.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"expression":"(2+3)*4"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var out CalculatorResult
	if err := json.Unmarshal(res.Output, &out); err != nil || out.Value != 20 || out.Text != "20" {
		t.Errorf("result = %s (%v)", res.Output, err)
	}
	_, err = calc.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"expression":"1/0"}`)})
	if err == nil || !strings.Contains(err.Error(), `cannot evaluate "1/0": at position 2: division by zero`) {
		t.Errorf("1/0: %v", err)
	}
	_, err = calc.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"expression":"` + strings.Repeat("1+", 20) + `1"}`)})
	if err == nil || !strings.Contains(err.Error(), "limit is 20") {
		t.Errorf("long expression: %v", err)
	}
	res, err = calc.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"expr":"1"}`)})
	if err != nil || !res.IsError || !strings.Contains(res.Content, `"expression" is required`) {
		t.Errorf("bad arguments: %+v, %v", res, err)
	}
}

// TestCalculatorText: the text of a result is a plain decimal in the range
// where JSON writes one, the exponent form outside it.
func TestCalculatorText(t *testing.T) {
	t.Parallel()
	calc, err := NewCalculator(CalculatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for expr, want := range map[string]string{
		"2450*2441": "5980450", "5980750*1": "5980750", "1/8": "0.125", "-3*1000000": "-3000000", "0*5": "0", "10^21": "1e+21",
		"1/10000000": "1e-07", "123456789*1000": "123456789000", "0.1+0.2": "0.30000000000000004",
	} {
		res, err := calc.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"expression":"` + expr + `"}`)})
		var out CalculatorResult
		if err != nil || json.Unmarshal(res.Output, &out) != nil || out.Text != want {
			t.Errorf("%s: text %q, want %q (%s, %v)", expr, out.Text, want, res.Output, err)
		}
	}
}

func TestCalculatorConfig(t *testing.T) {
	t.Parallel()
	if _, err := NewCalculator(CalculatorConfig{MaxDepth: -1}); err == nil {
		t.Error("negative MaxDepth accepted")
	}
	c, err := NewCalculator(CalculatorConfig{Name: "calc"})
	if err != nil || c.Definition().Name != "calc" {
		t.Errorf("custom name: %v", err)
	}
	var ce *calcError
	if _, err := evaluate("1+", 64); !errors.As(err, &ce) || ce.pos != 3 {
		t.Errorf("position of error in \"1+\" = %+v", ce)
	}
}
