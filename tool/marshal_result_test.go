package tool

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// celsius marshals itself: marshalResult must leave it to encoding/json.
type celsius int

func (c celsius) MarshalJSON() ([]byte, error) {
	return []byte(`{"celsius":` + string(rune('0'+int(c)%10)) + `}`), nil
}

// TestMarshalResultMatchesEncodingJSON: the ints and bools marshalResult
// writes itself are the bytes encoding/json writes, and every other value
// (named types included) is encoding/json's.
func TestMarshalResultMatchesEncodingJSON(t *testing.T) {
	for _, v := range []any{0, 1, -1, 42, math.MaxInt, math.MinInt, int64(0), int64(math.MaxInt64), int64(math.MinInt64),
		true, false, celsius(3), int32(-7), uint(7), 1.5, "a<b>&\u2028", nil, []int{1}, map[string]int{"b": 1, "a": 2}} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		res, err := marshalResult(v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		if !bytes.Equal(res.Output, want) {
			t.Errorf("%#v: output %s, encoding/json %s", v, res.Output, want)
		}
		wantContent := string(want)
		if s, ok := v.(string); ok {
			wantContent = s
		}
		if res.Content != wantContent {
			t.Errorf("%#v: content %q, want %q", v, res.Content, wantContent)
		}
	}
}
