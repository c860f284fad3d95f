package convo

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// planByScan is PlanTrim's cut as a scan of every message after the trim
// point: the first user message that brings the rest under budget, else
// the last one.
func planByScan(c *Conversation, budget int) int {
	n, total, cut := c.Count(), c.Tokens(c.Count()), c.trimmed
	if cut >= c.base && total-c.Tokens(cut)+c.summaryTokens() <= budget {
		return cut
	}
	for i := max(cut+1, c.base); i < n; i++ {
		if c.msgs[i-c.base].Role != steptype.RoleUser {
			continue
		}
		cut = i
		if total-c.Tokens(i)+c.summaryTokens() <= budget {
			break
		}
	}
	return cut
}

// TestPlanTrimCutsWhereAScanWould compares PlanTrim's search with a scan
// on random conversations, budgets and trim points.
func TestPlanTrimCutsWhereAScanWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	roles := []steptype.Role{steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool, steptype.RoleAssistant}
	for round := range 300 {
		c := New()
		for i := range 1 + rng.IntN(60) {
			c.Push(llm.Message{Role: roles[rng.IntN(len(roles))], Content: strings.Repeat("w ", rng.IntN(200))}, int64(i+1))
		}
		for range 5 {
			budget := rng.IntN(c.Tokens(c.Count()) + 50)
			want := planByScan(c, budget)
			tr := c.PlanTrim(budget, "")
			got := c.trimmed
			if tr != nil {
				got = tr.cut
			}
			if want <= c.trimmed {
				want = c.trimmed
			}
			if got != want {
				t.Fatalf("round %d: budget %d, trimmed %d: PlanTrim cuts at %d, a scan at %d", round, budget, c.trimmed, got, want)
			}
			if tr != nil && rng.IntN(2) == 0 {
				c.ApplyTrim(tr, "")
			}
		}
	}
}

// BenchmarkPlanTrimLongTurn plans the window of a turn of 100,000
// messages (one user message, then the agent's steps), which no trim can
// cut: a plan must not scan the turn.
func BenchmarkPlanTrimLongTurn(b *testing.B) {
	c := New()
	c.Push(llm.Message{Role: steptype.RoleUser, Content: "go"}, 1)
	for i := range 100_000 {
		c.Push(llm.Message{Role: steptype.RoleAssistant, Content: "a step of the long turn"}, int64(i+2))
	}
	budget := c.Tokens(c.Count()) / 2
	b.ResetTimer()
	for b.Loop() {
		c.PlanTrim(budget, "")
	}
}
