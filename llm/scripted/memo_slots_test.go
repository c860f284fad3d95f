package scripted

import (
	"hash/maphash"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Conversations that take turns on one model (concurrent runs) keep their
// tallies: a call of each finds the tally of its previous call and reads
// only the messages added since. With one remembered request, every call
// after another conversation's read its whole context again.
func TestMemoKeepsConcurrentConversations(t *testing.T) {
	m := Loop("t", "", 1000, "done")
	convs := make([][]llm.Message, 20)
	for i := range convs {
		convs[i] = make([]llm.Message, 1, 64)
		convs[i][0] = llm.Message{Role: steptype.RoleUser, Content: "go"}
	}
	hits := 0
	for round := range 10 {
		for i := range convs {
			msgs := append(convs[i], llm.Message{Role: steptype.RoleAssistant, Content: "x"})
			convs[i] = msgs
			if round > 0 && m.memo != nil {
				if c := m.memo[maphash.Comparable(m.seed, &msgs[0])%memoSlots]; c.base == &msgs[0] && c.n == len(msgs)-1 {
					hits++
				}
			}
			if got, want := m.tally(msgs), Loop("t", "", 1000, "done").tally(msgs); got != want {
				t.Fatalf("round %d, conversation %d: tally %+v, fresh %+v", round, i, got, want)
			}
		}
	}
	// 20 conversations in 256 slots share one now and then (a pair
	// misses every time); with a single memo no call finds its tally.
	if want := 9 * len(convs) / 2; hits < want {
		t.Errorf("%d of %d calls found their conversation's previous tally, want at least %d", hits, 9*len(convs), want)
	}
}
