package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// The vector benchmarks every driver reports (docs/PERFORMANCE.md), of one
// shape: n step vectors of dim float32s for one embedder, searched for the
// top 10.

// BenchVectorEmbedder is the embedder name the vector benchmarks use.
const BenchVectorEmbedder = "bench:256"

// BenchVectorFill stores n steps (in sessions of 1,000) with a random
// vector of dim dimensions each, from a fixed seed, in batches of 1,000.
func BenchVectorFill(b *testing.B, st store.Store, n, dim int) {
	b.Helper()
	ctx := b.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		sid := fmt.Sprintf("vs%06d", lo/batch)
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: "a"}); err != nil {
			b.Fatal(err)
		}
		var steps []*steptype.Step
		var vecs []store.StepVector
		for i := lo; i < min(lo+batch, n); i++ {
			s := benchStep(sid, fmt.Sprintf("v%07d", i))
			s.RunID = ""
			steps = append(steps, s)
			vecs = append(vecs, store.StepVector{StepID: s.ID, Vector: randVector(rng, dim)})
		}
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
			b.Fatal(err)
		}
		if _, err := st.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: BenchVectorEmbedder, Vectors: vecs}); err != nil {
			b.Fatal(err)
		}
	}
}

func randVector(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func benchSearch(b *testing.B, vs store.VectorStore, q []float32) {
	hits, err := vs.VectorSearch(b.Context(), &store.VectorSearchParams{Embedder: BenchVectorEmbedder, Vector: q, K: 10})
	if err != nil || len(hits) != 10 {
		b.Fatalf("search: %d hits, %v", len(hits), err)
	}
}

// BenchVectors runs, over st filled by BenchVectorFill(n, dim):
//
//   - "search": top-10 searches on a loaded index (the steady state);
//   - "first-search": opening another instance (reopen) and its first
//     search, which loads every vector from the database;
//   - "refresh": another instance (writer) stores one new step and vector
//     (not timed), then st searches: the search includes the incremental
//     refresh that reads the new row.
func BenchVectors(b *testing.B, st store.Store, reopen, writer func(b *testing.B) store.Store, dim int) {
	q := randVector(rand.New(rand.NewPCG(3, 4)), dim)
	benchSearch(b, st, q) // load
	b.Run("search", func(b *testing.B) {
		for b.Loop() {
			benchSearch(b, st, q)
		}
	})
	b.Run("first-search", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			other := reopen(b)
			b.StartTimer()
			benchSearch(b, other, q)
			b.StopTimer()
			other.Close()
			b.StartTimer()
		}
	})
	b.Run("refresh", func(b *testing.B) {
		w := writer(b)
		rng := rand.New(rand.NewPCG(5, 6))
		sid := fmt.Sprintf("refresh-%d", time.Now().UnixNano())
		if _, err := w.SessionCreate(b.Context(), &store.SessionCreateParams{ID: sid}); err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			id := fmt.Sprintf("%s-%d", sid, i)
			if _, err := w.StepAppend(b.Context(), &store.StepAppendParams{Steps: []*steptype.Step{benchStep(sid, id)}}); err != nil {
				b.Fatal(err)
			}
			if _, err := w.VectorUpsert(b.Context(), &store.VectorUpsertParams{Embedder: BenchVectorEmbedder,
				Vectors: []store.StepVector{{StepID: id, Vector: randVector(rng, dim)}}}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			benchSearch(b, st, q)
		}
	})
}

// BenchTurn appends one realistic agent turn to a claimed run per op, the
// way the engine records it: an llm step that calls a tool (with usage
// metrics), then the tool's step with a JSON result of about 600 bytes,
// each with the run's cursor update; with dim > 0, each step also gets a
// vector of dim dimensions, as the memory worker of `stepwise serve`
// stores one per committed step (lexical-v1:256). Drivers divide the
// growth of their files or relations by the steps appended to report bytes
// per step.
func BenchTurn(b *testing.B, st store.Store, dim int) (steps int) {
	a := newAppender(b, st, "turns")
	rng := rand.New(rand.NewPCG(7, 8))
	out := json.RawMessage(`{"city":"Paris","country":"France","population":2102650,"year":2023,` +
		`"source":"INSEE, recensement de la population","notes":"` + fmt.Sprintf("%0400d", 0) + `"}`)
	for b.Loop() {
		a.n++
		call := benchStep(a.session, fmt.Sprintf("turn-%d-llm", a.n))
		call.Content = ""
		call.ToolCalls = []steptype.ToolCall{{ID: "call_" + fmt.Sprint(a.n), Name: "lookup_population",
			Arguments: json.RawMessage(`{"city":"Paris"}`)}}
		tool := &steptype.Step{ID: fmt.Sprintf("turn-%d-tool", a.n), SessionID: a.session, RunID: a.session,
			Kind: steptype.KindTool, Name: "tools", Status: steptype.StepCompleted, Role: steptype.RoleTool,
			ToolCallID: "call_" + fmt.Sprint(a.n), ToolName: "lookup_population", Inputs: json.RawMessage(`{"city":"Paris"}`),
			Outputs: out, Metrics: steptype.Metrics{Duration: 120 * time.Millisecond}}
		for _, s := range []*steptype.Step{call, tool} {
			if _, err := st.StepAppend(b.Context(), &store.StepAppendParams{Steps: []*steptype.Step{s},
				Runs: []*store.RunUpdateParams{{ID: a.session, Owner: "w", Cursor: &benchCursor, StepDelta: 1}}}); err != nil {
				b.Fatal(err)
			}
			if dim > 0 {
				if _, err := st.VectorUpsert(b.Context(), &store.VectorUpsertParams{Embedder: BenchVectorEmbedder,
					Vectors: []store.StepVector{{StepID: s.ID, Vector: randVector(rng, dim)}}}); err != nil {
					b.Fatal(err)
				}
			}
			steps++
		}
	}
	return steps
}
