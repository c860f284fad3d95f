package tool

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

type flatArgs struct {
	S   string  `json:"s"`
	B   bool    `json:"b,omitempty"`
	I   int     `json:"i"`
	I8  int8    `json:"i8"`
	I16 int16   `json:"i16"`
	I32 int32   `json:"i32"`
	I64 int64   `json:"i64"`
	U   uint    `json:"u"`
	U8  uint8   `json:"u8"`
	U16 uint16  `json:"u16"`
	U32 uint32  `json:"u32"`
	U64 uint64  `json:"u64"`
	F32 float32 `json:"f32"`
	F64 float64 `json:"f64"`
	Raw string  // no tag: its Go name
	Not int     `json:"-"`
	_   int     // unexported: encoding/json ignores it
}

// callArgs are flat arguments none of which is required.
type callArgs struct {
	S   string  `json:"s,omitempty"`
	B   bool    `json:"b,omitempty"`
	I   int     `json:"i,omitempty"`
	I8  int8    `json:"i8,omitempty"`
	U8  uint8   `json:"u8,omitempty"`
	F64 float64 `json:"f64,omitempty"`
}

// randomArgs returns an object of flatArgs' fields, mostly plain, with
// every kind of value encoding/json treats in its own way mixed in.
func randomArgs(r *rand.Rand) string {
	keys := []string{"s", "b", "i", "i8", "i16", "i32", "i64", "u", "u8", "u16", "u32", "u64", "f32", "f64", "Raw"}
	odd := []string{"S", "RAW", "raw", "x", "Not", "-", "low", `\u0073`, "s\u017f", "I64"}
	nums := []string{"0", "-0", "1", "-1", "127", "128", "-128", "-129", "255", "256", "32767", "32768", "-32769",
		"65535", "65536", "2147483647", "2147483648", "-2147483649", "4294967295", "4294967296",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "18446744073709551616", "99999999999999999999999", "01", "-01", "1.5", "1.0",
		"1e2", "1E+2", "-2.5e-3", "3.4028235e38", "3.5e38", "1e400", "1.", ".5", "+1", "--1", "0x10", "1_0", "NaN"}
	strs := []string{`""`, `"x"`, `"hello world"`, `"é"`, `"日本"`, "\"\xff\"", `"a\"b"`, `"\u00e9"`, "\"\x01\"", `"\n"`, `"tab	"`}
	other := []string{"true", "false", "null", "{}", "[]", `{"a":1}`, "[1,2]", "tru", "falsey", "nul"}
	val := func() string {
		switch r.IntN(4) {
		case 0:
			return nums[r.IntN(len(nums))]
		case 1:
			return strs[r.IntN(len(strs))]
		case 2:
			return other[r.IntN(len(other))]
		}
		return strconv.Itoa(r.IntN(1000) - 500)
	}
	ws := func() string { return []string{"", "", " ", "\n\t", "\r "}[r.IntN(5)] }
	var b strings.Builder
	b.WriteString(ws() + "{")
	n := r.IntN(6)
	for k := range n {
		if k > 0 {
			b.WriteString(ws() + "," + ws())
		}
		key := keys[r.IntN(len(keys))]
		if r.IntN(8) == 0 {
			key = odd[r.IntN(len(odd))]
		}
		b.WriteString(ws() + `"` + key + `"` + ws() + ":" + ws() + val())
	}
	switch r.IntN(12) {
	case 0:
		b.WriteString(",")
	case 1:
		b.WriteString("}x")
		return b.String()
	case 2:
		return b.String() // unterminated
	}
	b.WriteString(ws() + "}" + ws())
	return b.String()
}

// TestFlatDecodeMatchesEncodingJSON compares the fast decoder with
// encoding/json on random arguments: whenever the fast path decodes, the
// value is the one encoding/json gives, without error (seed logged).
func TestFlatDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	d := newFlatDecoder(reflect.TypeFor[flatArgs]())
	if d == nil {
		t.Fatal("flatArgs has no flat decoder")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	fast := 0
	for range 100000 {
		in := randomArgs(r)
		var got flatArgs
		if !d.decode([]byte(in), reflect.ValueOf(&got).Elem()) {
			continue
		}
		fast++
		var want flatArgs
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: decoded fast to %+v, encoding/json fails: %v", in, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded fast to %+v, encoding/json to %+v", in, got, want)
		}
	}
	if fast < 10000 {
		t.Fatalf("only %d of 100000 arguments decoded fast", fast)
	}
	t.Logf("%d of 100000 decoded fast", fast)
}

// TestFlatDecoderOnlyForFlatStructs: the types whose decoding encoding/json
// does its own way have no fast decoder.
func TestFlatDecoderOnlyForFlatStructs(t *testing.T) {
	t.Parallel()
	type embedded struct{ flatArgs }
	type stringOpt struct {
		N int `json:"n,string"`
	}
	type dup struct {
		A int `json:"X"`
		X int // its Go name is A's json name
	}
	type nested struct {
		M map[string]int `json:"m"`
	}
	type custom struct {
		T json.Number `json:"t"`
		R rawText     `json:"r"`
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[embedded](), reflect.TypeFor[stringOpt](), reflect.TypeFor[dup](),
		reflect.TypeFor[nested](), reflect.TypeFor[custom](), reflect.TypeFor[map[string]any](), reflect.TypeFor[rawText]()} {
		if newFlatDecoder(typ) != nil {
			t.Errorf("%v has a fast decoder", typ)
		}
	}
}

// rawText decodes itself.
type rawText string

func (r *rawText) UnmarshalText(b []byte) error { *r = rawText("text:" + string(b)); return nil }

// TestCallDecodesFlatArgs runs a typed tool on plain and on other
// arguments: the same values and errors either way.
func TestCallDecodesFlatArgs(t *testing.T) {
	t.Parallel()
	var got []callArgs
	tl := New("f", "", func(ctx context.Context, a callArgs) (int, error) {
		got = append(got, a)
		return 0, nil
	})
	for _, tc := range []struct {
		args    string
		want    callArgs
		problem string
	}{
		{args: `{"s":"x","i":-3,"u8":255,"f64":1.5}`, want: callArgs{S: "x", I: -3, U8: 255, F64: 1.5}},
		{args: `{"s":"a\"b","i8":1,"b":true}`, want: callArgs{S: `a"b`, I8: 1, B: true}},
		{args: ` null `, want: callArgs{}},
		{args: `{"u8":256}`, problem: "u8"},
		{args: `{"i":1.5}`, problem: "i"},
	} {
		got = got[:0]
		res, err := tl.Call(t.Context(), &Call{Name: "f", Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatal(err)
		}
		if tc.problem != "" {
			if !res.IsError || !strings.Contains(res.Content, tc.problem) {
				t.Errorf("%s: %+v, want an error about %s", tc.args, res, tc.problem)
			}
			continue
		}
		if res.IsError || len(got) != 1 || !reflect.DeepEqual(got[0], tc.want) {
			t.Errorf("%s: %+v %+v, want %+v", tc.args, res, got, tc.want)
		}
	}
}
