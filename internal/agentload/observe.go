package agentload

import (
	"fmt"
	"net/http"

	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/internal/agentfile"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
)

// Observed is what an agent file asks of the host's observers for one
// agent (the file's or one of its sub-agents).
type Observed struct {
	// Events says whether the events inside the agent's steps are
	// recorded (the file's observe.events, else Options.Events).
	Events bool
	// SummaryModel, when set, summarizes the agent's steps of
	// SummaryKinds.
	SummaryModel llm.Model
	SummaryKinds []steptype.Kind
	// Judges grade the agent's runs; JudgeOnRunEnd says whether every
	// finished run is judged automatically.
	Judges        []*eval.Judge
	JudgeOnRunEnd bool
	// EmbedKinds are the step kinds of the agent's sessions that are
	// embedded (embeddings.kinds); nil means the embedder's defaults.
	EmbedKinds []steptype.Kind
}

// eventsClient returns the HTTP client of an agent's provider: one whose
// transport records each exchange as an event of the step making it, when
// events are on.
func eventsClient(on bool) *http.Client {
	if !on {
		return nil
	}
	return &http.Client{Transport: observe.Transport(observe.TransportConfig{})}
}

// observed builds what spec.Observe asks for.
func observed(spec *agentfile.Spec, o Options) (*Observed, error) {
	ob := &Observed{Events: o.Events, EmbedKinds: spec.Embeddings.Kinds}
	if spec.Observe.Events != nil {
		ob.Events = *spec.Observe.Events
	}
	side := func(m agentfile.Model) (llm.Model, error) { return sideModel(spec, m) }
	if sum := spec.Observe.Summaries; sum != nil {
		m, err := side(sum.Model)
		if err != nil {
			return nil, fmt.Errorf("observe.summaries.model: %w", err)
		}
		ob.SummaryModel, ob.SummaryKinds = m, sum.Kinds
	}
	if j := spec.Observe.Judge; j != nil {
		m, err := side(j.Model)
		if err != nil {
			return nil, fmt.Errorf("observe.judge.model: %w", err)
		}
		ob.JudgeOnRunEnd = j.OnRunEnd
		for _, r := range j.Rubrics {
			rub := eval.Rubric{Name: r.Name, PassScore: r.PassScore}
			for _, c := range r.Criteria {
				rub.Criteria = append(rub.Criteria, eval.Criterion{Name: c.Name, Description: c.Description, Weight: c.Weight, Required: c.Required})
			}
			judge, err := eval.NewJudge(eval.JudgeConfig{Model: m, Rubric: rub, Instructions: j.Instructions})
			if err != nil {
				return nil, fmt.Errorf("observe.judge rubric %s: %w", r.Name, err)
			}
			ob.Judges = append(ob.Judges, judge)
		}
	}
	return ob, nil
}
