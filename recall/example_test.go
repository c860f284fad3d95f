package recall_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// Embed the steps of an existing database, then find the past steps most
// similar to a query.
func Example() {
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1", Agent: "ops"})
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{
		{ID: "a", SessionID: "s1", Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "deploy billing to production", CreatedAt: at},
		{ID: "b", SessionID: "s1", Kind: steptype.KindTool, Status: steptype.StepCompleted, ToolName: "deploy",
			Inputs: []byte(`{"service":"billing"}`), Content: "deploy failed: disk full on eu-west-1", CreatedAt: at},
		{ID: "c", SessionID: "s1", Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "write release notes", CreatedAt: at},
	}})

	emb := recall.DefaultEmbedder()
	stats, _ := recall.Backfill(ctx, recall.WorkerConfig{Store: st, Embedder: emb})
	fmt.Println("embedded:", stats.Embedded)

	res, err := recall.Search(ctx, st, emb, recall.Query{Texts: []string{"why did the billing deploy fail?", "deploy failed"}, K: 2})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Render())
	// Output:
	// embedded: 3
	// [1] score 0.493 · session s1 · user 2025-03-01 12:00:00
	// --- Step 1 ---
	// User: deploy billing to production
	//
	// [2] score 0.486 · session s1 · tool 2025-03-01 12:00:00
	// --- Step 2 ---
	// Action Purpose: call deploy
	// Action: {
	//   "arguments": {
	//     "service": "billing"
	//   },
	//   "result": "deploy failed: disk full on eu-west-1",
	//   "tool": "deploy"
	// }
}
