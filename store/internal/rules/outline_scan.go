package rules

import (
	"bytes"
	"errors"
	"fmt"
)

// member is one member of a JSON object: its key (decoded when it has no
// escapes, as every stored key) with its raw spelling, and its raw value.
type member struct {
	rawKey, value []byte
}

// key is the member's key without its quotes (stored keys have no escapes).
func (m member) key() string { return string(m.rawKey[1 : len(m.rawKey)-1]) }

// memberList is the members of an object in order, found by key.
type memberList struct {
	order []member
}

// topMembers splits a JSON object into its members without decoding the
// values: a value is skipped by matching brackets and quotes, so a large
// string costs a few IndexByte calls.
func topMembers(b []byte) (memberList, error) {
	ml := memberList{order: make([]member, 0, 24)}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ml, errors.New("not an object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return ml, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return ml, fmt.Errorf("offset %d: want a key", i)
		}
		end, err := skipString(b, i)
		if err != nil {
			return ml, err
		}
		rawKey := b[i:end]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return ml, fmt.Errorf("offset %d: want a colon", i)
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return ml, err
		}
		ml.order = append(ml.order, member{rawKey: rawKey, value: b[i:vend]})
		i = skipSpace(b, vend)
		if i >= len(b) {
			return ml, errors.New("unterminated object")
		}
		if b[i] == '}' {
			if skipSpace(b, i+1) != len(b) {
				return ml, errors.New("data after the object")
			}
			return ml, nil
		}
		if b[i] != ',' {
			return ml, fmt.Errorf("offset %d: want a comma", i)
		}
		i = skipSpace(b, i+1)
	}
}

// get returns the raw value of key.
func (ml memberList) get(key string) ([]byte, bool) {
	for _, m := range ml.order {
		if string(m.rawKey[1:len(m.rawKey)-1]) == key {
			return m.value, true
		}
	}
	return nil, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at b[i] ('"').
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errors.New("unterminated string")
		}
		q := j + k
		bs := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// skipValue returns the offset after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("missing value")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated value")
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	if lit := string(b[i:j]); lit != "true" && lit != "false" && lit != "null" && !numberLiteral(b[i:j]) {
		return 0, fmt.Errorf("offset %d: want a value", i)
	}
	return j, nil
}

// numberLiteral reports whether v is made of a JSON number's characters,
// starting as one does.
func numberLiteral(v []byte) bool {
	if !jsonNumber(v) {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			return false
		}
	}
	return true
}
