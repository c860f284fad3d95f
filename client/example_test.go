package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/store/memory"
)

// The step-by-step protocol over HTTP: initiate a run, then pull its steps
// until the result.
func ExampleClient_NextStep() {
	eng, _ := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{{
		Name:  "greeter",
		Model: scripted.New("greeter", scripted.Script{Turns: []scripted.Turn{{Text: "Hello, Ada!"}}}),
	}}})
	defer eng.Close()
	srv, _ := server.New(server.Config{Engine: eng})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	c, _ := client.New(ts.URL)
	ctx := context.Background()
	inv, err := c.Initiate(ctx, "greeter", "I am Ada")
	if err != nil {
		panic(err)
	}
	for {
		step, err := c.NextStep(ctx, inv)
		if err != nil {
			panic(err)
		}
		switch s := step.(type) {
		case *stepwise.Continuation:
			fmt.Println("step:", s.Step.Kind)
			continue
		case *stepwise.Result:
			fmt.Println("result:", s.Value)
		}
		return
	}
	// Output:
	// step: user
	// step: llm
	// result: Hello, Ada!
}
