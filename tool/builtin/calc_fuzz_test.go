package builtin

import (
	"errors"
	"math"
	"testing"
)

// FuzzCalculator checks that the parser never panics and that its results
// obey algebraic identities: every result is finite, evaluation is
// deterministic, and wrapping a valid expression in parentheses, negating it
// or adding zero to it gives the expected value.
func FuzzCalculator(f *testing.F) {
	for _, s := range []string{
		"1 + 2 * 3", "(1 + 2) * 3", "2 ^ 3 ^ 2", "-2 ^ 2", "2^-1", "--3", "1.5e3 + .5", "2e", "1e-3",
		"sqrt(16) + abs(-3)", "min(4, 2, 8) + max(1, 9)", "round(3.14159, 2)", "pi * e", "7 % -3",
		"1 / 0", "5 % 0", "0 ^ -1", "(1 + 2", "1 + 2)", "foo(1)", "sqrt(-1)", "10 ^ 400", "1e400",
		"((((((1))))))", "-(-(-(1)))", "max(", "round(1e308, 15)", "", " ", ".", "e", "1e+", "9" + "9999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		const depth = 64
		v, err := evaluate(s, depth)
		if err != nil {
			var ce *calcError
			if !errors.As(err, &ce) || ce.msg == "" || ce.pos < 0 || ce.pos > len(s)+1 {
				t.Fatalf("%q: malformed error %#v", s, err)
			}
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("%q = %v, want a finite value", s, v)
		}
		if v2, err := evaluate(s, depth); err != nil || v2 != v {
			t.Fatalf("%q: second evaluation gave %v, %v; first %v", s, v2, err, v)
		}
		if w, err := evaluate("("+s+")", depth+1); err != nil || w != v {
			t.Fatalf("(%s) = %v, %v; want %v", s, w, err, v)
		}
		if w, err := evaluate("-("+s+")", depth+2); err != nil || w != -v {
			t.Fatalf("-(%s) = %v, %v; want %v", s, w, err, -v)
		}
		if w, err := evaluate("0+("+s+")", depth+1); err != nil || w != v {
			t.Fatalf("0+(%s) = %v, %v; want %v", s, w, err, v)
		}
	})
}
