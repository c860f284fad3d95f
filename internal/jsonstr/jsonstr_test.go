package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppend: Append writes what encoding/json writes for any string.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\nd\x00\x7f", "<&>", "\u2028\u2029", "\xff\xfe", "é😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}
