// Package recall is Stepwise's step memory: embeddings of past
// steps, similarity search over them with filters and rerankers, and the
// past_steps_search tool through which an agent learns from its own
// history.
//
// Embeddings are computed in the background after steps commit, by a
// Worker, and stored beside the steps (store.VectorStore) under the name of
// the Embedder that produced them; a search only compares vectors of one
// embedder. Two embedders come built in: Lexical, local and deterministic
// (hashed word and character n-grams — lexical, not semantic), and OpenAI,
// for any OpenAI-compatible embeddings endpoint.
//
//	st, _ := sqlite.Open(ctx, sqlite.Config{Path: "stepwise.db"})
//	emb := recall.DefaultEmbedder() // lexical-v1:256
//
//	// Embed steps as they commit.
//	w, _ := recall.NewWorker(recall.WorkerConfig{Store: st, Embedder: emb})
//	engine, _ := stepwise.New(stepwise.Config{Store: st})
//	w.Attach(engine)
//	w.Start(ctx)
//	defer w.Stop(ctx)
//
//	// Let an agent search its past steps.
//	search, _ := recall.NewTool(recall.ToolConfig{Store: st, Embedder: emb})
//	engine.Register(&stepwise.Agent{Name: "coder", Model: m, Tools: []stepwise.Tool{search}})
//
//	// Or search from Go.
//	res, err := recall.Search(ctx, st, emb, recall.Query{Texts: []string{"migration failed"}, K: 5, Agent: "coder"})
//	fmt.Println(res.Render())
//
// See docs/memory.md for the design, the guarantees and the costs.
package recall
