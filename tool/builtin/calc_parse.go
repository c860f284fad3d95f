package builtin

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// errDepth is returned for expressions nested deeper than the limit.
var errDepth = errors.New("expression nested too deeply")

// calcError is a malformed or undefined expression, with its position
// (1-based, in bytes) when it is known.
type calcError struct {
	pos int
	msg string
}

// Error renders the problem with its position.
func (e *calcError) Error() string {
	if e.pos > 0 {
		return fmt.Sprintf("at position %d: %s", e.pos, e.msg)
	}
	return e.msg
}

// evaluate computes an arithmetic expression:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]          (right-associative; -2^2 = -4)
//	primary = number | name | name "(" expr { "," expr } ")" | "(" expr ")"
//
// Names are the constants pi and e and the functions sqrt, abs, min, max and
// round (round(x) or round(x, places)). Every intermediate result must be
// finite: division by zero, sqrt of a negative number and overflow are
// errors. maxDepth bounds the nesting of parentheses, calls and unary signs.
func evaluate(src string, maxDepth int) (float64, error) {
	p := &parser{src: src, maxDepth: maxDepth}
	p.skipSpace()
	if p.pos == len(p.src) {
		return 0, &calcError{msg: "empty expression"}
	}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	p.skipSpace()
	if p.pos < len(p.src) {
		return 0, p.errorf("unexpected %s", p.describe())
	}
	return v, nil
}

type parser struct {
	src      string
	pos      int
	depth    int
	maxDepth int
}

func (p *parser) errorf(format string, args ...any) error {
	return &calcError{pos: p.pos + 1, msg: fmt.Sprintf(format, args...)}
}

// describe names the token at the current position for error messages.
func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of expression"
	}
	r := p.src[p.pos:]
	if len(r) > 10 {
		r = r[:10] + "…"
	}
	return strconv.Quote(r)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.pos]) >= 0 {
		p.pos++
	}
}

// peek skips space and returns the next byte, 0 at the end.
func (p *parser) peek() byte {
	p.skipSpace()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.errorf("%v (limit %d)", errDepth, p.maxDepth)
	}
	return nil
}

func (p *parser) expr() (float64, error) {
	v, err := p.term()
	for err == nil {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.pos++
		var r float64
		if r, err = p.term(); err == nil {
			if op == '+' {
				v, err = p.finite(v+r, "+")
			} else {
				v, err = p.finite(v-r, "-")
			}
		}
	}
	return 0, err
}

func (p *parser) term() (float64, error) {
	v, err := p.unary()
	for err == nil {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return v, nil
		}
		at := p.pos
		p.pos++
		var r float64
		if r, err = p.unary(); err != nil {
			break
		}
		switch op {
		case '*':
			v, err = p.finite(v*r, "*")
		case '/':
			if r == 0 {
				return 0, &calcError{pos: at + 1, msg: "division by zero"}
			}
			v, err = p.finite(v/r, "/")
		case '%':
			if r == 0 {
				return 0, &calcError{pos: at + 1, msg: "modulo by zero"}
			}
			v, err = p.finite(math.Mod(v, r), "%")
		}
	}
	return 0, err
}

func (p *parser) unary() (float64, error) {
	switch p.peek() {
	case '-', '+':
		neg := p.src[p.pos] == '-'
		p.pos++
		if err := p.enter(); err != nil {
			return 0, err
		}
		v, err := p.unary()
		p.depth--
		if neg {
			v = -v
		}
		return v, err
	}
	return p.power()
}

func (p *parser) power() (float64, error) {
	base, err := p.primary()
	if err != nil || p.peek() != '^' {
		return base, err
	}
	p.pos++
	if err := p.enter(); err != nil {
		return 0, err
	}
	exp, err := p.unary()
	p.depth--
	if err != nil {
		return 0, err
	}
	if base == 0 && exp < 0 {
		return 0, p.errorf("division by zero (0 raised to a negative power)")
	}
	return p.finite(math.Pow(base, exp), "^")
}

func (p *parser) primary() (float64, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.pos++
		if err := p.enter(); err != nil {
			return 0, err
		}
		v, err := p.expr()
		p.depth--
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, p.errorf("expected \")\", found %s", p.describe())
		}
		p.pos++
		return v, nil
	case c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	case isLetter(c):
		return p.name()
	case c == 0:
		return 0, p.errorf("expected a number, found end of expression")
	}
	return 0, p.errorf("expected a number, found %s", p.describe())
}

func (p *parser) number() (float64, error) {
	start := p.pos
	digits := func() {
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
	}
	digits()
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		digits()
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		save := p.pos
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if p.pos == len(p.src) || p.src[p.pos] < '0' || p.src[p.pos] > '9' {
			p.pos = save // "2e" is 2 followed by the name e
		} else {
			digits()
		}
	}
	text := p.src[start:p.pos]
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, &calcError{pos: start + 1, msg: fmt.Sprintf("invalid number %q", text)}
	}
	return v, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func (p *parser) name() (float64, error) {
	start := p.pos
	for p.pos < len(p.src) && (isLetter(p.src[p.pos]) || p.src[p.pos] >= '0' && p.src[p.pos] <= '9') {
		p.pos++
	}
	name := strings.ToLower(p.src[start:p.pos])
	if p.peek() != '(' {
		switch name {
		case "pi":
			return math.Pi, nil
		case "e":
			return math.E, nil
		}
		if _, ok := functions[name]; ok {
			return 0, &calcError{pos: start + 1, msg: fmt.Sprintf("function %s needs arguments in parentheses", name)}
		}
		return 0, &calcError{pos: start + 1, msg: fmt.Sprintf("unknown name %q (constants: pi, e)", name)}
	}
	fn, ok := functions[name]
	if !ok {
		return 0, &calcError{pos: start + 1, msg: fmt.Sprintf("unknown function %q (functions: sqrt, abs, min, max, round)", name)}
	}
	p.pos++ // (
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer func() { p.depth-- }()
	var args []float64
	if p.peek() != ')' {
		for {
			v, err := p.expr()
			if err != nil {
				return 0, err
			}
			args = append(args, v)
			if p.peek() != ',' {
				break
			}
			p.pos++
		}
	}
	if p.peek() != ')' {
		return 0, p.errorf("expected \",\" or \")\" in call to %s, found %s", name, p.describe())
	}
	p.pos++
	v, err := fn(args)
	if err != nil {
		return 0, &calcError{pos: start + 1, msg: name + ": " + err.Error()}
	}
	return p.finite(v, name)
}

// finite refuses infinities and NaN, which JSON cannot carry.
func (p *parser) finite(v float64, op string) (float64, error) {
	if math.IsNaN(v) {
		return 0, p.errorf("result of %s is undefined", op)
	}
	if math.IsInf(v, 0) {
		return 0, p.errorf("result of %s is out of range", op)
	}
	return v, nil
}
