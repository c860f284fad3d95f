package store

import (
	"encoding/json"
	"fmt"
	"math"
)

// Validation shared by every driver. Each returns an error wrapping
// ErrInvalid, naming the field.

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// CheckScore fails unless score is a finite number in [0, 1].
func CheckScore(score float64) error {
	if math.IsNaN(score) || score < 0 || score > 1 {
		return invalid("score %v is out of range: want a number in [0, 1]", score)
	}
	return nil
}

// Validate checks the parameters that need no stored data.
func (p *EvalPutParams) Validate() error {
	if p == nil || p.Eval == nil {
		return invalid("nil eval")
	}
	e := p.Eval
	switch {
	case e.ID == "" || e.TargetID == "" || e.Name == "":
		return invalid("eval needs an id, a target id and a name")
	case e.TargetKind != TargetStep && e.TargetKind != TargetRun && e.TargetKind != TargetSession:
		return invalid("eval target kind %q: want step, run or session", e.TargetKind)
	case e.Source != SourceUser && e.Source != SourceLLMJudge && e.Source != SourceHeuristic:
		return invalid("eval source %q: want user, llm-judge or heuristic", e.Source)
	case len(e.Name) > 200 || len(e.Label) > 200:
		return invalid("eval name and label are limited to 200 bytes")
	case len(e.Details) > 0 && !json.Valid(e.Details):
		return invalid("eval details are not valid JSON")
	}
	return CheckScore(e.Score)
}

// Validate checks the parameters that need no stored data.
func (p *EvalListParams) Validate() error {
	if p == nil || (p.TargetID == "" && p.SessionID == "" && p.RunID == "") {
		return invalid("eval list needs a target id, a session id or a run id")
	}
	return nil
}

// Validate checks the parameters that need no stored data.
func (p *BlobPutParams) Validate() error {
	if p == nil || len(p.Data) == 0 {
		return invalid("blob data is empty")
	}
	if p.ContentType == "" {
		return invalid("blob content type is required")
	}
	return nil
}

// Validate checks the parameters that need no stored data.
func (p *AttachmentAddParams) Validate() error {
	if p == nil || p.Attachment == nil {
		return invalid("nil attachment")
	}
	a := p.Attachment
	if a.ID == "" || a.StepID == "" || a.Name == "" || a.Kind == "" || a.BlobHash == "" {
		return invalid("attachment needs an id, a step id, a name, a kind and a blob hash")
	}
	return nil
}

// Validate checks the parameters that need no stored data.
func (p *StepEventAppendParams) Validate() error {
	if p == nil {
		return invalid("nil step event params")
	}
	for i, e := range p.Events {
		switch {
		case e == nil:
			return invalid("step event %d is nil", i)
		case e.ID == "" || e.StepID == "" || e.Type == "":
			return invalid("step event %d needs an id, a step id and a type", i)
		case len(e.Payload) > 0 && !json.Valid(e.Payload):
			return invalid("step event %q payload is not valid JSON", e.ID)
		}
	}
	return nil
}

// Validate checks the parameters that need no stored data.
func (p *DatasetCreateParams) Validate() error {
	if p == nil || p.Dataset == nil || p.Dataset.ID == "" || p.Dataset.Name == "" {
		return invalid("dataset needs an id and a name")
	}
	for i, it := range p.Items {
		if it == nil || it.Input == "" {
			return invalid("dataset item %d has no input", i)
		}
		if len(it.Metadata) > 0 && !json.Valid(it.Metadata) {
			return invalid("dataset item %d metadata is not valid JSON", i)
		}
	}
	return nil
}

// Validate checks the parameters that need no stored data.
func (p *ExperimentCreateParams) Validate() error {
	if p == nil || p.Experiment == nil {
		return invalid("nil experiment")
	}
	x := p.Experiment
	if x.ID == "" || x.Name == "" || x.DatasetID == "" || x.Agent == "" {
		return invalid("experiment needs an id, a name, a dataset id and an agent")
	}
	if x.Status != "" && !x.Status.valid() {
		return invalid("experiment status %q", x.Status)
	}
	return validJSON("experiment config", x.Config)
}

// Validate checks the parameters that need no stored data.
func (p *ExperimentUpdateParams) Validate() error {
	if p == nil || p.ID == "" {
		return invalid("experiment id is required")
	}
	if p.Status != nil && !p.Status.valid() {
		return invalid("experiment status %q", *p.Status)
	}
	return validJSON("experiment summary", p.Summary)
}

// Validate checks the parameters that need no stored data.
func (p *ExperimentItemPutParams) Validate() error {
	if p == nil || p.Item == nil || p.Item.ExperimentID == "" {
		return invalid("experiment item needs an experiment id")
	}
	if p.Item.Index < 0 {
		return invalid("experiment item index %d < 0", p.Item.Index)
	}
	for name, s := range p.Item.Scores {
		if err := CheckScore(s); err != nil {
			return fmt.Errorf("score %q: %w", name, err)
		}
	}
	return nil
}

func (s ExperimentStatus) valid() bool {
	switch s {
	case ExperimentRunning, ExperimentCompleted, ExperimentFailed, ExperimentCancelled:
		return true
	}
	return false
}

// Terminal reports whether an experiment in status s is over.
func (s ExperimentStatus) Terminal() bool { return s != ExperimentRunning }

func validJSON(what string, b json.RawMessage) error {
	if len(b) > 0 && !json.Valid(b) {
		return invalid("%s is not valid JSON", what)
	}
	return nil
}
