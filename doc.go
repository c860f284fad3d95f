// Package stepwise is a runtime for LLM agents in which every step — a model
// call, a tool call, a human question, a sub-agent call, a decision — is a
// durable, streamable, forkable, inspectable record.
//
// # Agents and the engine
//
// An Agent is a graph of named steps. The built-in steps are "llm" (one
// model call), "tools" (every tool call the model asked for, in parallel,
// each its own step) and "end"; custom steps are Handlers (StepFunc adapts a
// function) that return where to go next and a JSON merge patch for the
// run's state:
//
//	agent := &stepwise.Agent{
//		Name:         "assistant",
//		Instructions: "Be brief.",
//		Model:        model, // llm/openai, llm/anthropic, llm/scripted…
//		Tools:        []stepwise.Tool{tool.New("add", "add two numbers", add), stepwise.AskHuman()},
//		StartStep:    "triage",
//		Steps: map[string]stepwise.Handler{
//			"triage": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
//				return &stepwise.Next{Step: stepwise.StepLLM, State: map[string]any{"route": "llm"},
//					Decision: &stepwise.Decision{Purpose: "route", Options: []string{"llm", "end"}, Choice: "llm"}}, nil
//			}),
//		},
//	}
//	engine, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
//
// The store is any store.Store: store/sqlite (embedded default), store/postgres
// (many instances), store/memory (tests).
//
// # Running and streaming
//
// Run starts a run and executes it while you iterate over its events; every
// event carries a Position, and a step's deltas always come before its
// completion:
//
//	for ev, err := range engine.Run(ctx, stepwise.StartParams{Agent: "assistant", Input: "hi"}) {
//		if err != nil {
//			return err
//		}
//		switch ev.Type {
//		case stepwise.EventStepDelta:
//			fmt.Print(ev.Delta.Content)
//		case stepwise.EventStepCompleted:
//			fmt.Println(ev.Step.Sequence, ev.Step.Kind)
//		}
//	}
//
// Each step commits in one transaction with the run's cursor and state, so a
// process killed at any instant loses at most the step in flight; Resume (or
// any engine, once the lease expires) continues at the cursor. Start runs a
// background executor that picks up queued runs, as the server does.
// Subscribe streams a session or run from any position: first the committed
// steps from the store, then live events, each exactly once.
//
// # Human input
//
// The ask_human tool, approvals (Agent.Approvals) and custom steps returning
// Next.Input record an "input" step and park the run: no goroutine waits.
// Answer (from any process) validates the answer against the request's JSON
// Schema and queues the run, which continues at the next step. The
// step-by-step client protocol — Initiate, NextStep, ProvideHumanInput — is
// the Client interface, implemented in-process by Engine.Client and over
// HTTP by package client. NextStep returns the run's events after the caller's
// position (the invocation's cursor), each once and in step order: a
// continuation per committed step, a request per input step still waiting,
// then the result or error, then ErrRunFinished.
//
// # Sessions
//
// A session is the log of its steps and the model's context (multi-turn:
// pass SessionID). Fork shares a prefix in O(1), optionally editing the step
// at the fork point; Retry regenerates from a step (non-destructively, into a
// fork), starting at the graph step that produced it (a retry at a tool
// result re-runs the calls without a result); Truncate deletes a suffix when no fork depends on it; Replay reruns
// a session reusing recorded model and tool outputs until the first
// divergence; ContextPreview shows the next model request; Summarize and
// package render describe a session. Whatever fork, retry or edit produced it,
// the model context never holds a tool call without its result: a call the
// conversation left behind gets a NotExecutedResult tool message.
package stepwise
