package gemini

import (
	"strconv"
	"testing"
)

func TestSignaturesBounded(t *testing.T) {
	t.Parallel()
	var s signatures
	for i := range maxSignatures + 10 {
		s.put("call_"+strconv.Itoa(i), "sig"+strconv.Itoa(i))
	}
	s.put("call_20", "again") // an update keeps its place
	if len(s.m) != maxSignatures || len(s.order) != maxSignatures {
		t.Fatalf("%d entries, %d in order", len(s.m), len(s.order))
	}
	if s.get("call_9") != "" || s.get("call_10") != "sig10" || s.get("call_20") != "again" || s.get("call_1033") != "sig1033" {
		t.Errorf("call_9 %q call_10 %q call_20 %q", s.get("call_9"), s.get("call_10"), s.get("call_20"))
	}
}
