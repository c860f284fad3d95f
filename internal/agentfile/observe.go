package agentfile

import (
	"strings"

	"github.com/stepwise-run/stepwise/internal/yamlnode"
	"github.com/stepwise-run/stepwise/steptype"

	"gopkg.in/yaml.v3"
)

// Observe is the observability section of an agent file: events
// inside steps, model-written summaries, and LLM judges with rubrics.
type Observe struct {
	// Events says whether the events inside the agent's steps (provider
	// requests and responses, HTTP exchanges, tool invocations) are
	// recorded; nil means the host's default (on under serve).
	Events *bool
	// Summaries, when set, has a model summarize the state, goal and
	// action of the agent's steps in the background.
	Summaries *Summaries
	// Judge, when set, has a model grade the agent's runs against rubrics.
	Judge *Judge
}

// Summaries configures the summaries of steps.
type Summaries struct {
	// Model writes the summaries ("scripted:FILE" resolved against the
	// file's directory, or a provider model using the agent's
	// model_options). Required.
	Model Model
	// Kinds are the step kinds summarized; default llm, tool and custom.
	Kinds []steptype.Kind
}

// Judge configures LLM judges of the agent's runs.
type Judge struct {
	// Model grades the runs. Required.
	Model Model
	// Instructions are added to the judge's system prompt.
	Instructions string
	// OnRunEnd says whether every finished run is judged automatically;
	// default true. Judging on demand (stepwise eval judge, POST
	// /v1/runs/{id}/judge) works either way.
	OnRunEnd bool
	// Rubrics are what the runs are graded against; at least one.
	Rubrics []Rubric
}

// Rubric is a set of weighted pass/fail criteria.
type Rubric struct {
	// Name names the evals; unique in the file. Required.
	Name string
	// PassScore is the weighted score a run needs to pass; default 0.75.
	PassScore float64
	// Criteria are the questions; at least one.
	Criteria []Criterion
}

// Criterion is one pass/fail question of a rubric.
type Criterion struct {
	Name        string  // required, unique in its rubric
	Description string  // what passes; required
	Weight      float64 // share of the score; default 1
	Required    bool    // the rubric fails when this criterion fails
}

// DefaultSummaryKinds are the kinds summarized when Summaries.Kinds is empty.
var DefaultSummaryKinds = []steptype.Kind{steptype.KindLLM, steptype.KindTool, steptype.KindCustom}

func (d *decoder) observe(n *yaml.Node, field, dir string) Observe {
	var o Observe
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "events":
			b := d.Boolean(v, f)
			o.Events = &b
		case "summaries":
			o.Summaries = d.summaries(v, f, dir)
		case "judge":
			o.Judge = d.judge(v, f, dir)
		default:
			return false
		}
		return true
	})
	return o
}

func (d *decoder) summaries(n *yaml.Node, field, dir string) *Summaries {
	s := &Summaries{}
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "model":
			s.Model = d.model(v, f, dir)
		case "kinds":
			s.Kinds = d.kinds(v, f)
		default:
			return false
		}
		return true
	})
	if r := d.Resolve(n); r != nil && r.Kind == yaml.MappingNode && !hasKey(r, "model") {
		d.Errorf(r, yamlnode.Join(field, "model"), "required: the model that writes the summaries")
	}
	if len(s.Kinds) == 0 {
		s.Kinds = DefaultSummaryKinds
	}
	return s
}

// kinds parses a list of distinct step kinds.
func (d *decoder) kinds(n *yaml.Node, field string) []steptype.Kind {
	var out []steptype.Kind
	seen := map[steptype.Kind]bool{}
	d.List(n, field, func(_ int, v *yaml.Node, f string) {
		s := d.Str(v, f)
		k, err := steptype.ParseKind(s)
		switch {
		case err != nil:
			d.Errorf(v, f, "unknown step kind %q (want one of %v)", s, steptype.Kinds)
		case seen[k]:
			d.Errorf(v, f, "duplicate kind %q", s)
		default:
			seen[k] = true
			out = append(out, k)
		}
	})
	return out
}

func (d *decoder) judge(n *yaml.Node, field, dir string) *Judge {
	j := &Judge{OnRunEnd: true}
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "model":
			j.Model = d.model(v, f, dir)
		case "instructions":
			j.Instructions = d.Str(v, f)
		case "on_run_end":
			j.OnRunEnd = d.Boolean(v, f)
		case "rubrics":
			seen := map[string]bool{}
			d.List(v, f, func(_ int, v *yaml.Node, f string) {
				r := d.rubric(v, f)
				if seen[r.Name] && r.Name != "" {
					d.Errorf(v, yamlnode.Join(f, "name"), "duplicate rubric %q", r.Name)
				}
				seen[r.Name] = true
				j.Rubrics = append(j.Rubrics, r)
			})
		default:
			return false
		}
		return true
	})
	if r := d.Resolve(n); r != nil && r.Kind == yaml.MappingNode {
		if !hasKey(r, "model") {
			d.Errorf(r, yamlnode.Join(field, "model"), "required: the model that grades the runs")
		}
		if len(j.Rubrics) == 0 {
			d.Errorf(r, yamlnode.Join(field, "rubrics"), "required: at least one rubric")
		}
	}
	return j
}

func (d *decoder) rubric(n *yaml.Node, field string) Rubric {
	var r Rubric
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "name":
			if r.Name = d.Str(v, f); !validName(r.Name) {
				d.Errorf(v, f, "must be 1–64 characters of a-z, 0-9, _ and -")
			}
		case "pass_score":
			r.PassScore = d.float(v, f, 0, 1, "a number from 0 to 1")
		case "criteria":
			seen := map[string]bool{}
			d.List(v, f, func(_ int, v *yaml.Node, f string) {
				c := d.criterion(v, f)
				if k := strings.ToLower(c.Name); seen[k] && k != "" {
					d.Errorf(v, yamlnode.Join(f, "name"), "duplicate criterion %q", c.Name)
				} else {
					seen[k] = true
				}
				r.Criteria = append(r.Criteria, c)
			})
		default:
			return false
		}
		return true
	})
	if m := d.Resolve(n); m != nil && m.Kind == yaml.MappingNode {
		if !hasKey(m, "name") {
			d.Errorf(m, yamlnode.Join(field, "name"), "required")
		}
		if len(r.Criteria) == 0 {
			d.Errorf(m, yamlnode.Join(field, "criteria"), "required: at least one criterion")
		}
	}
	return r
}

func (d *decoder) criterion(n *yaml.Node, field string) Criterion {
	var c Criterion
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "name":
			if c.Name = strings.TrimSpace(d.Str(v, f)); c.Name == "" {
				d.Errorf(v, f, "must not be empty")
			}
		case "description":
			if c.Description = strings.TrimSpace(d.Str(v, f)); c.Description == "" {
				d.Errorf(v, f, "must not be empty")
			}
		case "weight":
			c.Weight = d.float(v, f, 0, 1e6, "a positive number")
			if c.Weight == 0 {
				d.Errorf(v, f, "must be a positive number")
			}
		case "required":
			c.Required = d.Boolean(v, f)
		default:
			return false
		}
		return true
	})
	if m := d.Resolve(n); m != nil && m.Kind == yaml.MappingNode {
		for _, k := range []string{"name", "description"} {
			if !hasKey(m, k) {
				d.Errorf(m, yamlnode.Join(field, k), "required")
			}
		}
	}
	return c
}
