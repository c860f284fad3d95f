package scripted_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

const memoScript = "turns:\n  - tool_calls: [{name: t}]\n    repeat: 3\n  - text: a\n  - text: b\n    repeat: 2\nloop: true\n"

// TestMemoMatchesFreshModel drives one model through growing, resliced,
// rewritten and copied contexts and checks every answer against a fresh
// model that has never seen a request (so it reads all messages).
func TestMemoMatchesFreshModel(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "memo.yaml", memoScript)
	rng := rand.New(rand.NewPCG(1, 2))
	roles := []steptype.Role{steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool, steptype.RoleAssistant}
	msgs := make([]llm.Message, 0, 4096)
	for i := range 3000 {
		switch op := rng.IntN(20); {
		case op == 0 && len(msgs) > 4: // trim in place, keeping the backing array
			k := 1 + rng.IntN(len(msgs)/2)
			msgs = msgs[:copy(msgs, msgs[k:])]
		case op == 1 && len(msgs) > 4: // trim by reslicing
			msgs = msgs[rng.IntN(len(msgs)/2):]
		case op == 2 && len(msgs) > 0: // rewrite the newest message in place
			msgs[len(msgs)-1].Role = roles[rng.IntN(len(roles))]
		case op == 3: // a copy at a new address
			msgs = append([]llm.Message(nil), msgs...)
		default:
			msgs = append(msgs, llm.Message{Role: roles[rng.IntN(len(roles))], Content: string(rune('a' + rng.IntN(26)))})
		}
		req := &llm.Request{Messages: msgs}
		got := final(t, m, req)
		want := final(t, mustParse(t, "memo.yaml", memoScript), req)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (%d messages): memoized %+v, fresh %+v", i, len(msgs), got, want)
		}
	}
}

func TestConcurrentConversations(t *testing.T) {
	t.Parallel()
	m := scripted.Loop("t", "", 50, "done")
	done := make(chan []string)
	for g := range 4 {
		go func() {
			msgs := []llm.Message{user("go " + itoa(g))}
			var ids []string
			for range 51 {
				f := final(t, m, &llm.Request{Messages: msgs})
				if len(f.ToolCalls) == 0 {
					ids = append(ids, f.Content)
					break
				}
				ids = append(ids, f.ToolCalls[0].ID)
				msgs = append(msgs, llm.Message{Role: steptype.RoleAssistant, ToolCalls: f.ToolCalls}, toolResult(f.ToolCalls[0].ID, "x"))
			}
			done <- ids
		}()
	}
	var want []string
	for i := range 50 {
		want = append(want, "call_"+itoa(i)+"_0")
	}
	want = append(want, "done")
	for range 4 {
		if got := <-done; !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v", got)
		}
	}
}
