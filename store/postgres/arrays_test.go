package postgres

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/stepwise-run/stepwise/internal/raceflag"
	"github.com/stepwise-run/stepwise/steptype"
)

// fastArrays writes the bytes pgx's own array codec writes for every value
// it encodes (NULL elements, empty and nil arrays, strings with multibyte
// characters, extreme numbers), and values of other types still go to
// pgx's codec.
func TestFastArraysMatchPgx(t *testing.T) {
	std := pgtype.NewMap()
	fast := pgtype.NewMap()
	useFastArrays(fast)
	long := bytes.Repeat([]byte("{\"k\":\"v\"}"), 500)
	cases := []struct {
		oid   uint32
		value any
	}{
		{pgtype.TextArrayOID, []string{"a", "", "héllo ✓", string(long)}},
		{pgtype.TextArrayOID, []string{}},
		{pgtype.TextArrayOID, []string(nil)},
		{pgtype.Int8ArrayOID, []int64{0, -1, 1, math.MaxInt64, math.MinInt64, 1780000000123456789}},
		{pgtype.Int8ArrayOID, []int64{}},
		{pgtype.Int8ArrayOID, []int64(nil)},
		{pgtype.Int4ArrayOID, []int32{0, -7, math.MaxInt32, math.MinInt32}},
		{pgtype.Float8ArrayOID, []float64{0, math.Copysign(0, -1), 0.1, -1e300, math.Inf(1), math.NaN(), 5e-324}},
		{pgtype.Float8ArrayOID, []float64{}},
		{pgtype.ByteaArrayOID, [][]byte{long, nil, {}, []byte("x")}},
		{pgtype.ByteaArrayOID, [][]byte{[]byte("a"), []byte("b")}},
		{pgtype.ByteaArrayOID, [][]byte{}},
		{pgtype.ByteaArrayOID, [][]byte(nil)},
		// A column passed by pointer (a nil one is NULL).
		{pgtype.TextArrayOID, &[]string{"a", "é"}},
		{pgtype.TextArrayOID, (*[]string)(nil)},
		{pgtype.TextArrayOID, new([]string)},
		{pgtype.Int8ArrayOID, &[]int64{1, -2}},
		{pgtype.Int4ArrayOID, &[]int32{3}},
		{pgtype.Float8ArrayOID, &[]float64{0.5}},
		{pgtype.ByteaArrayOID, &[][]byte{nil, []byte("b")}},
		{pgtype.ByteaArrayOID, (*[][]byte)(nil)},
		// Not ours: pgx's codec either way.
		{pgtype.TextArrayOID, []any{"a", nil}},
		{pgtype.Int8ArrayOID, []int{1, 2}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%d %T %v", c.oid, c.value, c.value)
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			prefix := []byte("prefix")
			want, errW := std.Encode(c.oid, pgtype.BinaryFormatCode, c.value, bytes.Clone(prefix))
			got, errG := fast.Encode(c.oid, pgtype.BinaryFormatCode, c.value, bytes.Clone(prefix))
			if (errW == nil) != (errG == nil) || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("encoded\n got %x (%v)\nwant %x (%v)", got, errG, want, errW)
			}
		})
	}
}

// The arrays of a group's statements are encoded without an allocation
// per element (pgx's codec boxes every string and int64 element).
func TestFastArraysAllocations(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("allocation counts are checked without -race (scripts/test)")
	}
	fast := pgtype.NewMap()
	useFastArrays(fast)
	ids := make([]string, 30)
	nums := make([]int64, 30)
	bodies := make([][]byte, 30)
	for i := range ids {
		ids[i], nums[i], bodies[i] = fmt.Sprintf("step-%d", i), int64(1e18)+int64(i), bytes.Repeat([]byte("x"), 700)
	}
	buf := make([]byte, 0, 64<<10)
	for _, c := range []struct {
		oid   uint32
		value any
	}{{pgtype.TextArrayOID, ids}, {pgtype.Int8ArrayOID, nums}, {pgtype.ByteaArrayOID, bodies}} {
		if n := encodeAllocs(t, fast, c.oid, c.value, buf[:0]); n > 2 {
			t.Errorf("encoding %T of 30 elements: %.0f allocations, want at most 2", c.value, n)
		}
	}
}

// An array of long elements is written with one growth of the parameter
// buffer, whatever its size (the text ids and the bodies of a group):
// appending element by element doubled the buffer about ten times for 30
// elements of 700 bytes.
func TestFastArraysGrowOnce(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("allocation counts are checked without -race (scripts/test)")
	}
	fast := pgtype.NewMap()
	useFastArrays(fast)
	texts := make([]string, 30)
	bodies := make([][]byte, 30)
	for i := range texts {
		texts[i] = strings.Repeat("x", 700)
		bodies[i] = []byte(texts[i])
	}
	for _, c := range []struct {
		oid   uint32
		value any
	}{{pgtype.TextArrayOID, texts}, {pgtype.ByteaArrayOID, bodies}} {
		if n := encodeAllocs(t, fast, c.oid, c.value, nil); n > 2 {
			t.Errorf("encoding %T of 30 elements of 700 bytes into an empty buffer: %.0f allocations, want at most 2", c.value, n)
		}
	}
}

// A group's step columns are allocated once for all its steps (grow),
// not doubled step by step.
func TestStepColumnsGrowOnce(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("allocation counts are checked without -race (scripts/test)")
	}
	st := &steptype.Step{ID: "s", SessionID: "x", RunID: "r", Kind: steptype.KindLLM, Status: steptype.StepCompleted}
	body := []byte(`{}`)
	n := testing.AllocsPerRun(20, func() {
		var c stepColumns
		c.grow(30)
		for range 30 {
			c.add(st, 1, body)
		}
	})
	if n > 15 {
		t.Errorf("30 steps into 15 columns: %.0f allocations, want one per column", n)
	}
}

// encodeAllocs is the allocations of encoding value (binary, as type oid)
// with m, appended to buf.
func encodeAllocs(t *testing.T, m *pgtype.Map, oid uint32, value any, buf []byte) float64 {
	t.Helper()
	return testing.AllocsPerRun(20, func() {
		if _, err := m.Encode(oid, pgtype.BinaryFormatCode, value, buf); err != nil {
			t.Fatal(err)
		}
	})
}

// The parameters of one statement are encoded into one buffer (pgx's,
// which it replaces by a new 256-byte one before each statement): a
// group's arrays that outgrow it move into the connection's scratch
// buffer, which every later statement reuses, so that a group's insert
// allocates no parameter buffer once the connection has made one. The
// bytes are pgx's, and moving into the scratch buffer keeps what was
// encoded before.
func TestFastArraysReuseScratch(t *testing.T) {
	std := pgtype.NewMap()
	fast := pgtype.NewMap()
	useFastArrays(fast)
	ids := make([]string, 30)
	nums := make([]int64, 30)
	hops := make([]int32, 30)
	costs := make([]float64, 30)
	bodies := make([][]byte, 30)
	for i := range ids {
		ids[i], nums[i], hops[i], costs[i] = fmt.Sprintf("step-%d", i), int64(1e18)+int64(i), int32(i), float64(i)/3
		bodies[i] = bytes.Repeat([]byte{'a' + byte(i%26)}, 700)
	}
	args := []struct {
		oid   uint32
		value any
	}{
		{pgtype.TextArrayOID, ids}, {pgtype.Int8ArrayOID, nums}, {pgtype.Int4ArrayOID, hops},
		{pgtype.ByteaArrayOID, bodies}, {pgtype.Float8ArrayOID, costs}, {pgtype.TextArrayOID, ids},
	}
	// statement encodes args as pgx does: into one buffer, each parameter
	// a slice of it.
	statement := func(m *pgtype.Map, buf []byte) (params [][]byte) {
		for _, a := range args {
			pos := len(buf)
			var err error
			if buf, err = m.Encode(a.oid, pgtype.BinaryFormatCode, a.value, buf); err != nil {
				t.Fatal(err)
			}
			params = append(params, buf[pos:])
		}
		return params
	}
	want := statement(std, nil)
	for round := range 3 {
		got := statement(fast, make([]byte, 0, 256))
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d, parameter %d: encoded\n got %x\nwant %x", round, i, got[i], want[i])
			}
		}
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	start := make([]byte, 0, 256)
	params := make([][]byte, 0, len(args))
	n := testing.AllocsPerRun(20, func() {
		buf := start[:0]
		params = params[:0]
		for _, a := range args {
			pos := len(buf)
			buf, _ = fast.Encode(a.oid, pgtype.BinaryFormatCode, a.value, buf)
			params = append(params, buf[pos:])
		}
	})
	if n != 0 {
		t.Errorf("a statement of %d arrays (%d bytes of bodies): %.0f allocations, want none once the scratch buffer is made",
			len(args), 30*700, n)
	}
}
