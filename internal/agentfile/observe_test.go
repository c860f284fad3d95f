package agentfile_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/agentfile"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestObserveSection(t *testing.T) {
	spec, err := agentfile.Parse("dir/agent.yaml", []byte(`name: a
model: scripted:s.yaml
observe:
  events: false
  summaries: {model: scripted:sum.yaml, kinds: [llm, tool]}
  judge:
    model: openai:gpt-4o
    on_run_end: false
    instructions: strict
    rubrics:
      - name: quality
        pass_score: 0.6
        criteria:
          - {name: correct, description: right, weight: 2, required: true}
          - {name: short, description: brief}
`))
	if err != nil {
		t.Fatal(err)
	}
	o := spec.Observe
	if o.Events == nil || *o.Events || o.Summaries == nil || o.Summaries.Model.Name != filepath.Join("dir", "sum.yaml") ||
		len(o.Summaries.Kinds) != 2 || o.Summaries.Kinds[1] != steptype.KindTool {
		t.Errorf("events/summaries: %+v %+v", o.Events, o.Summaries)
	}
	j := o.Judge
	if j == nil || j.OnRunEnd || j.Instructions != "strict" || j.Model.String() != "openai:gpt-4o" || len(j.Rubrics) != 1 {
		t.Fatalf("judge: %+v", j)
	}
	r := j.Rubrics[0]
	if r.Name != "quality" || r.PassScore != 0.6 || len(r.Criteria) != 2 || r.Criteria[0].Weight != 2 || !r.Criteria[0].Required || r.Criteria[1].Weight != 0 {
		t.Errorf("rubric: %+v", r)
	}
	// Defaults.
	spec, err = agentfile.Parse("agent.yaml", []byte("name: a\nmodel: scripted:s.yaml\nobserve: {summaries: {model: scripted:x.yaml}, judge: {model: scripted:j.yaml, rubrics: [{name: q, criteria: [{name: c, description: d}]}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Observe.Events != nil || len(spec.Observe.Summaries.Kinds) != 3 || !spec.Observe.Judge.OnRunEnd {
		t.Errorf("defaults: %+v %+v", spec.Observe, spec.Observe.Judge)
	}
}

func TestObserveSectionErrors(t *testing.T) {
	_, err := agentfile.Parse("agent.yaml", []byte(`name: a
model: scripted:s.yaml
observe:
  events: maybe
  summaries: {kinds: [llm, nope]}
  judge:
    rubrics:
      - name: Bad Name
        pass_score: 2
        criteria:
          - {name: c, weight: 0}
          - {name: c, description: d}
  extra: 1
`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"agent.yaml:4: observe.events:",
		"observe.summaries.model: required",
		`observe.summaries.kinds[1]: unknown step kind "nope"`,
		"observe.judge.model: required",
		"observe.judge.rubrics[0].name: must be 1–64 characters",
		"observe.judge.rubrics[0].pass_score:",
		"observe.judge.rubrics[0].criteria[0].weight: must be a positive number",
		"observe.judge.rubrics[0].criteria[0].description: required",
		`observe.judge.rubrics[0].criteria[1].name: duplicate criterion "c"`,
		"observe.extra:",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}

// TestMCPCommandNextToRelativeFile: "./server.py" beside an agent file
// given as a bare relative name keeps its slash (it is not looked up in
// PATH).
func TestMCPCommandNextToRelativeFile(t *testing.T) {
	spec, err := agentfile.Parse("agent.yaml", []byte("name: a\nmodel: scripted:s.yaml\nmcp_servers: [{name: s, command: ./server.py}, {name: t, command: uvx}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.MCPServers[0].Command; got != "."+string(filepath.Separator)+"server.py" {
		t.Errorf("command = %q, want ./server.py", got)
	}
	if got := spec.MCPServers[1].Command; got != "uvx" {
		t.Errorf("bare command = %q, want uvx (looked up in PATH)", got)
	}
}
