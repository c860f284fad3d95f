package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/stepwise-run/stepwise/tool"
)

// CalculatorConfig configures [NewCalculator].
type CalculatorConfig struct {
	// Name is the tool name. Default "calculator".
	Name string
	// MaxLength is the longest expression accepted, in bytes. Default 1000.
	MaxLength int
	// MaxDepth bounds the nesting of parentheses, function calls, powers and
	// signs. Default 64.
	MaxDepth int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c CalculatorConfig) WithDefaults() CalculatorConfig {
	if c.Name == "" {
		c.Name = "calculator"
	}
	if c.MaxLength == 0 {
		c.MaxLength = 1000
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = 64
	}
	return c
}

func (c CalculatorConfig) validate() error {
	if c.MaxLength < 0 || c.MaxDepth < 0 {
		return errors.New("calculator: MaxLength and MaxDepth must not be negative")
	}
	return nil
}

// CalculatorArgs are the calculator's arguments.
type CalculatorArgs struct {
	Expression string `json:"expression" jsonschema:"arithmetic expression, e.g. (2 + 3) * sqrt(16) / 2^3; operators + - * / % ^, parentheses, functions sqrt abs min max round, constants pi e"`
}

// CalculatorResult is the calculator's result.
type CalculatorResult struct {
	Expression string  `json:"expression"`
	Value      float64 `json:"value"`
	// Text is Value in the shortest form that reads back exactly: plain
	// decimals from 1e-6 to 1e21 (5980750, 0.125), exponent form outside.
	Text string `json:"text"`
}

// NewCalculator returns a tool that evaluates arithmetic expressions with
// float64 arithmetic: + - * / % (remainder) ^ (power, right-associative),
// parentheses, unary minus, the functions sqrt, abs, min, max and round
// (round(x) or round(x, places)), and the constants pi and e. Malformed
// expressions, division by zero and undefined or overflowing results give
// an error naming the position of the problem.
func NewCalculator(cfg CalculatorConfig) (tool.Tool, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return tool.New(cfg.Name, "Evaluate an arithmetic expression exactly as written and return its numeric value.",
		func(ctx context.Context, a CalculatorArgs) (CalculatorResult, error) {
			if len(a.Expression) > cfg.MaxLength {
				return CalculatorResult{}, fmt.Errorf("expression is %d bytes long, the limit is %d", len(a.Expression), cfg.MaxLength)
			}
			v, err := evaluate(a.Expression, cfg.MaxDepth)
			if err != nil {
				return CalculatorResult{}, fmt.Errorf("cannot evaluate %q: %w", a.Expression, err)
			}
			return CalculatorResult{Expression: a.Expression, Value: v, Text: formatNumber(v)}, nil
		}), nil
}

// formatNumber writes v as JSON and JavaScript do: without an exponent when
// 1e-6 <= |v| < 1e21, so that 5980750 reads 5980750, not 5.98075e+06.
func formatNumber(v float64) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
