package scripted

import (
	"testing"
	"weak"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Conversations that take turns on one model (concurrent runs) keep their
// tallies: a call of each finds the tally of its previous call and reads
// only the messages added since. With one remembered request, every call
// after another conversation's read its whole context again.
func TestMemoKeepsConcurrentConversations(t *testing.T) {
	m := Loop("t", "", 1000, "done")
	convs := make([][]llm.Message, 100)
	for i := range convs {
		convs[i] = make([]llm.Message, 1, 64)
		convs[i][0] = llm.Message{Role: steptype.RoleUser, Content: "go"}
	}
	for round := range 10 {
		for i := range convs {
			msgs := append(convs[i], llm.Message{Role: steptype.RoleAssistant, Content: "x"})
			convs[i] = msgs
			if round > 0 {
				if c, ok := m.memo[weak.Make(&msgs[0])]; !ok || c.n != len(msgs)-1 {
					t.Fatalf("round %d, conversation %d: the tally of its previous %d messages is not remembered", round, i, len(msgs)-1)
				}
			}
			if got, want := m.tally(msgs), Loop("t", "", 1000, "done").tally(msgs); got != want {
				t.Fatalf("round %d, conversation %d: tally %+v, fresh %+v", round, i, got, want)
			}
		}
	}
}

// The table is bounded: conversations beyond maxMemos evict others.
func TestMemoBounded(t *testing.T) {
	m := Loop("t", "", 1000, "done")
	keep := make([][]llm.Message, maxMemos+50) // alive, so no entry is a dead one
	for i := range keep {
		keep[i] = []llm.Message{{Role: steptype.RoleUser, Content: "go"}}
		m.tally(keep[i])
	}
	if len(m.memo) != maxMemos {
		t.Errorf("%d conversations remembered, want %d", len(m.memo), maxMemos)
	}
}
