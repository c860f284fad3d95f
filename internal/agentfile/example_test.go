package agentfile_test

import (
	"fmt"

	"github.com/stepwise-run/stepwise/internal/agentfile"
)

func ExampleParse() {
	spec, err := agentfile.Parse("agents/calc.yaml", []byte(`
name: calc
instructions: Use the calculator for arithmetic.
model: scripted:scripts/calc.yaml
tools:
  - calculator
  - http_get: {allow_hosts: [api.example.com]}
limits: {max_steps: 20, run_timeout: 5m}
approvals: {http_get: always}
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(spec.Name, spec.Model.Provider, spec.Model.Name)
	fmt.Println(spec.Tools[0].Name, spec.Tools[1].Name, spec.Tools[1].AllowHosts)
	fmt.Println(spec.Limits.MaxSteps, spec.Limits.RunTimeout, spec.Approvals["http_get"])

	_, err = agentfile.Parse("agents/calc.yaml", []byte("name: calc\nmodel: openai:gpt-4o-mini\nlimits:\n  max_steps: -3\n"))
	fmt.Println(err)
	// Output:
	// calc scripted agents/scripts/calc.yaml
	// calculator http_get [api.example.com]
	// 20 5m0s always
	// agents/calc.yaml:4: limits.max_steps: must be a positive integer
}
