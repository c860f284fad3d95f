package builtin

import (
	"errors"
	"fmt"
	"math"
)

// functions are the calculator's functions by lower-case name.
var functions = map[string]func(args []float64) (float64, error){
	"sqrt": func(a []float64) (float64, error) {
		if err := arity(a, 1, 1); err != nil {
			return 0, err
		}
		if a[0] < 0 {
			return 0, errors.New("square root of a negative number")
		}
		return math.Sqrt(a[0]), nil
	},
	"abs": func(a []float64) (float64, error) {
		if err := arity(a, 1, 1); err != nil {
			return 0, err
		}
		return math.Abs(a[0]), nil
	},
	"min": func(a []float64) (float64, error) {
		if err := arity(a, 1, -1); err != nil {
			return 0, err
		}
		m := a[0]
		for _, v := range a[1:] {
			m = math.Min(m, v)
		}
		return m, nil
	},
	"max": func(a []float64) (float64, error) {
		if err := arity(a, 1, -1); err != nil {
			return 0, err
		}
		m := a[0]
		for _, v := range a[1:] {
			m = math.Max(m, v)
		}
		return m, nil
	},
	"round": func(a []float64) (float64, error) {
		if err := arity(a, 1, 2); err != nil {
			return 0, err
		}
		if len(a) == 1 {
			return math.Round(a[0]), nil
		}
		places := a[1]
		if places != math.Trunc(places) || places < 0 || places > 15 {
			return 0, fmt.Errorf("places must be a whole number from 0 to 15, got %g", places)
		}
		scale := math.Pow(10, places)
		r := math.Round(a[0]*scale) / scale
		if math.IsInf(r, 0) || math.IsNaN(r) {
			return a[0], nil // too large to have decimals
		}
		return r, nil
	},
}

// arity checks the argument count; max < 0 means no upper bound.
func arity(a []float64, min, max int) error {
	switch {
	case len(a) < min || (max >= 0 && len(a) > max):
		if min == max {
			return fmt.Errorf("takes %d argument(s), got %d", min, len(a))
		}
		if max < 0 {
			return fmt.Errorf("takes at least %d argument(s), got %d", min, len(a))
		}
		return fmt.Errorf("takes %d to %d arguments, got %d", min, max, len(a))
	}
	return nil
}
