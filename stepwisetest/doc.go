// Package stepwisetest is the kit for testing agents built on Stepwise: an
// engine on a fresh store that closes with the test, a scripted model that
// answers from Go and records what it was asked, and golden transcripts of
// a run's events with ids and times masked.
//
//	func TestAgent(t *testing.T) {
//		model := stepwisetest.Replies(
//			stepwisetest.ToolCalls(stepwisetest.Call("c1", "add", `{"a":2,"b":3}`)),
//			stepwisetest.Text("2 + 3 = 5."),
//		)
//		e := stepwisetest.NewEngine(t, stepwise.Config{Agents: []*stepwise.Agent{
//			{Name: "adder", Model: model, Tools: []tool.Tool{add}},
//		}})
//		events := stepwisetest.Collect(t, e.Run(t.Context(), stepwise.StartParams{Agent: "adder", Input: "2+3?"}))
//		stepwisetest.Golden(t, "testdata/adder.events.golden", events)
//	}
//
// Run `go test -update` to write the golden files, then review and commit
// them; without -update a transcript that differs fails the test with a
// diff. The -update flag is registered by this package, so a test package
// that imports it must not define its own.
//
// [NewEngine] uses an in-memory store unless the Config names one;
// [SQLite] gives a store on a file in t.TempDir() for tests that want the
// real driver, and [ForEachStore] runs a test on both. Every helper takes
// a testing.TB and fails it on error.
package stepwisetest
