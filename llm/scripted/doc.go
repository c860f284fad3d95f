// Package scripted is a deterministic llm.Model driven by a script file, for
// tests, demos and benchmarks: it streams scripted text, reasoning and tool
// calls with optional latency, and simulates provider errors.
//
// The turn served to a request is a pure function of the request's
// messages, so a process that crashes and restarts, a replay and a fork all
// get the same answer for the same context. In the flat form the call that
// carries p assistant messages gets the turn at position p:
//
//	turns:
//	  - tool_calls:
//	      - name: calculator
//	        arguments: {expression: "2+2"}
//	    repeat: 5000
//	  - text: Done.
//
// The grouped form (user_turns) answers each user message with its own list
// of turns, chosen by a substring of the message or by order. The format,
// the selection rules, streaming, usage estimation and simulated errors are
// documented in docs/scripted_model.md.
//
//	m, err := scripted.Load("testdata/demo.yaml") // m.Name() == "scripted:demo"
package scripted
