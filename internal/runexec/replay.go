package runexec

import (
	"slices"
	"sync"

	"github.com/stepwise-run/stepwise/steptype"
)

// ReplayOptions make a run reuse recorded outputs of another session: a
// model response is reused when the new request's fingerprint equals a
// recorded one, a tool result when name and arguments are equal, unless the
// tool is listed in LiveTools (or AllToolsLive). Everything else runs live.
type ReplayOptions struct {
	SourceSessionID string   `json:"source_session_id"`
	LiveTools       []string `json:"live_tools,omitempty"`
	AllToolsLive    bool     `json:"all_tools_live,omitempty"`
	// NextTurns are the user messages of later turns still to replay.
	NextTurns []string `json:"next_turns,omitempty"`
}

// Replay indexes the recorded steps of a replay's source by fingerprint.
// Each recorded step is reused at most once, in order.
type Replay struct {
	Opts  ReplayOptions
	mu    sync.Mutex
	llm   map[string][]*steptype.Step
	tools map[string][]*steptype.Step
}

// NewReplay indexes the completed, fingerprinted model and tool steps of
// a replay's source.
func NewReplay(opts ReplayOptions, steps []*steptype.Step) *Replay {
	r := &Replay{Opts: opts, llm: map[string][]*steptype.Step{}, tools: map[string][]*steptype.Step{}}
	for _, s := range steps {
		if s.Fingerprint == "" || s.Status != steptype.StepCompleted {
			continue
		}
		switch s.Kind {
		case steptype.KindLLM:
			r.llm[s.Fingerprint] = append(r.llm[s.Fingerprint], s)
		case steptype.KindTool:
			r.tools[s.Fingerprint] = append(r.tools[s.Fingerprint], s)
		}
	}
	return r
}

func (r *Replay) take(m map[string][]*steptype.Step, fp string) *steptype.Step {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := m[fp]
	if len(q) == 0 {
		return nil
	}
	m[fp] = q[1:]
	return q[0]
}

// TakeLLM returns the next recorded model step with fingerprint fp, or nil
// (r may be nil: no replay).
func (r *Replay) TakeLLM(fp string) *steptype.Step {
	if r == nil {
		return nil
	}
	return r.take(r.llm, fp)
}

// TakeTool returns the next recorded result of tool name with fingerprint
// fp, or nil when there is none or the tool runs live.
func (r *Replay) TakeTool(name, fp string) *steptype.Step {
	if r == nil || r.Opts.AllToolsLive || slices.Contains(r.Opts.LiveTools, name) {
		return nil
	}
	return r.take(r.tools, fp)
}

// Reuse copies the recorded output of rec into the step being built.
func Reuse(step, rec *steptype.Step) {
	step.Content, step.Reasoning, step.ToolCalls = rec.Content, rec.Reasoning, rec.ToolCalls
	step.Outputs, step.Error, step.Status = rec.Outputs, rec.Error, rec.Status
	m := rec.Metrics
	step.Metrics.InputTokens, step.Metrics.OutputTokens, step.Metrics.CachedTokens = m.InputTokens, m.OutputTokens, m.CachedTokens
	step.Metrics.Model, step.Metrics.Provider = m.Model, m.Provider
	step.Metrics.FinishedAt = step.Metrics.StartedAt
	step.Replay = "reused"
	if step.Metadata == nil {
		step.Metadata = map[string]any{}
	}
	step.Metadata["replayed_from"] = rec.ID
}
