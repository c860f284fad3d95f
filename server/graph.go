package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/graph"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// The endpoints of the dashboard's views beyond the core API: the workflow
// graph of a session or of an agent, and an agent's overview.

// Bounds of the graph and overview query parameters.
const (
	defaultGraphSessions = 50
	maxGraphSessions     = 500
	// maxAgentSteps bounds the steps an agent's graph and overview read
	// (about four times what 50 sessions of typical length hold).
	maxAgentSteps = 20000
)

// graphOptions reads ?repeat= and ?max_nodes=.
func graphOptions(r *http.Request) (graph.Options, error) {
	var o graph.Options
	repeat, err := queryInt(r, "repeat", 1000)
	if err != nil {
		return o, err
	}
	if r.URL.Query().Has("repeat") && repeat < 2 {
		return o, badParam("query parameter repeat=%d: want an integer between 2 and 1000", repeat)
	}
	maxNodes, err := queryInt(r, "max_nodes", 300)
	if err != nil {
		return o, err
	}
	if r.URL.Query().Has("max_nodes") && maxNodes < 2 {
		return o, badParam("query parameter max_nodes=%d: want an integer between 2 and 300", maxNodes)
	}
	o.RepeatThreshold, o.MaxNodes = int(repeat), int(maxNodes)
	return o, nil
}

// sessionGraph: GET /v1/sessions/{id}/graph?repeat=&max_nodes=, the
// workflow graph of one session (its fork lineage included).
func (s *Server) sessionGraph(w http.ResponseWriter, r *http.Request) error {
	opts, err := graphOptions(r)
	if err != nil {
		return err
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	steps, err := s.eng.Store().StepList(r.Context(), &store.StepListParams{SessionID: sess.ID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, graph.Build(steps, opts))
	return nil
}

// agentGraph: GET /v1/agents/{name}/graph?sessions=&repeat=&max_nodes=,
// the workflow graph merged across the agent's newest sessions (default 50,
// at most 500); steps a fork shares with its parent count once.
func (s *Server) agentGraph(w http.ResponseWriter, r *http.Request) error {
	opts, err := graphOptions(r)
	if err != nil {
		return err
	}
	rd, err := s.agentSteps(r)
	if err != nil {
		return err
	}
	key := "graph\x00" + r.PathValue("name") + "\x00" + r.URL.RawQuery
	if g, ok := s.views.recall(key, rd.inputs, rd.truncated); ok {
		writeJSON(w, http.StatusOK, g)
		return nil
	}
	b := graph.NewBuilder(opts)
	rd.feed(b, nil)
	g := b.Graph()
	s.views.remember(key, rd.inputs, rd.truncated, g)
	writeJSON(w, http.StatusOK, g)
	return nil
}

// agentRead is the steps of an agent's newest sessions, as agentSteps read
// them.
type agentRead struct {
	sessions []sessionRead // newest first
	// truncated says older sessions or older steps were left out.
	truncated bool
	// inputs identify the steps read, one per session, when every
	// session's steps are held by the view cache (else nil): equal inputs,
	// equal steps.
	inputs []viewInput
}

type sessionRead struct {
	sess    *stepwise.Session
	steps   []*stepwise.Step
	derived []graph.Derived // nil when not kept
}

// feed adds the steps to b and then calls fn (when not nil) with them, a
// session at a time, oldest session first, so that a fork comes after the
// parent it shares steps with.
func (rd *agentRead) feed(b *graph.Builder, fn func(*stepwise.Session, []*stepwise.Step)) {
	total := 0
	for _, sr := range rd.sessions {
		total += len(sr.steps)
	}
	b.Grow(total)
	for _, sr := range slices.Backward(rd.sessions) {
		if sr.derived != nil {
			b.AddDerived(sr.steps, sr.derived)
		} else {
			b.Add(sr.steps)
		}
		if fn != nil {
			fn(sr.sess, sr.steps)
		}
	}
}

// agentSteps reads the steps of each of the agent's newest sessions
// (?sessions=N), at most maxAgentSteps in all, newest first (a session of
// a million steps contributes its newest ones). An agent that is neither
// registered nor named by any session is unknown (404).
func (s *Server) agentSteps(r *http.Request) (*agentRead, error) {
	name := r.PathValue("name")
	if err := checkID("name", name); err != nil {
		return nil, err
	}
	n, err := queryInt(r, "sessions", maxGraphSessions)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		n = defaultGraphSessions
	}
	page, err := s.eng.Store().SessionList(r.Context(), &store.SessionListParams{Agent: name, Limit: int(n)})
	if err != nil {
		return nil, err
	}
	if len(page.Sessions) == 0 {
		if _, err := s.eng.Agent(name); err != nil {
			return nil, err
		}
	}
	// The graph and the statistics need no message content: outlines
	// skip decoding it (the bulk of every step).
	list := s.eng.Store().StepOutline
	rd := &agentRead{truncated: page.Next != "", inputs: []viewInput{}}
	budget := int64(maxAgentSteps)
	for _, sess := range page.Sessions {
		if err := r.Context().Err(); err != nil {
			return nil, err
		}
		if budget <= 0 {
			rd.truncated = true
			break
		}
		from := int64(1)
		if sess.LastSequence > budget {
			from, rd.truncated = sess.LastSequence-budget+1, true
		}
		// Only what is new since the last call is read (viewcache.go).
		steps, derived, serial, err := s.sessionSteps(r.Context(), list, sess, from)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted meanwhile
			}
			return nil, err
		}
		budget -= int64(len(steps))
		rd.sessions = append(rd.sessions, sessionRead{sess, steps, derived})
		if serial == 0 {
			rd.inputs = nil
		} else if rd.inputs != nil {
			rd.inputs = append(rd.inputs, viewInput{serial, from})
		}
	}
	return rd, nil
}

// overview: GET /v1/agents/{name}/overview?sessions=, an agent at a glance:
// runs by status, tokens, cost, latency percentiles per step kind, error
// rate and repeated-step ratio over its newest sessions (default 50).
func (s *Server) overview(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	rd, err := s.agentSteps(r)
	if err != nil {
		return err
	}
	// The step statistics, computed afresh unless these very steps were
	// summarized by an earlier call.
	key := "overview\x00" + name + "\x00" + r.URL.RawQuery
	stats, ok := s.views.recall(key, rd.inputs, rd.truncated)
	if !ok {
		stats = stepStats(rd)
		s.views.remember(key, rd.inputs, rd.truncated, stats)
	}
	out := *stats.(*wire.AgentOverview) // the step statistics only
	out.Agent, out.Runs, out.Truncated = name, map[steptype.RunStatus]int{}, rd.truncated
	_, aerr := s.eng.Agent(name)
	out.Registered = aerr == nil
	if err := s.countRuns(r.Context(), name, &out); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &out)
	return nil
}

// stepStats computes the step statistics of an overview (every field but
// the agent's registration and runs) from the steps read.
func stepStats(rd *agentRead) *wire.AgentOverview {
	out := &wire.AgentOverview{Latency: []wire.KindLatency{}, Resources: []wire.KindResources{}}
	res := map[steptype.Kind]*wire.KindResources{}
	b := graph.NewBuilder(graph.Options{SkipLayout: true})
	durations := map[steptype.Kind][]float64{}
	seen := map[string]bool{}
	rd.feed(b, func(_ *stepwise.Session, steps []*stepwise.Step) {
		out.Sessions++
		for _, st := range steps {
			if seen[st.ID] {
				continue
			}
			seen[st.ID] = true
			out.Steps++
			m := st.Metrics
			out.InputTokens += m.InputTokens
			out.OutputTokens += m.OutputTokens
			out.CachedTokens += m.CachedTokens
			out.Cost += m.Cost
			if st.Kind == steptype.KindError || st.Status == steptype.StepFailed {
				out.ErrorSteps++
			}
			if m.CPUTime > 0 || m.AllocBytes > 0 {
				r := res[st.Kind]
				if r == nil {
					r = &wire.KindResources{Kind: st.Kind}
					res[st.Kind] = r
				}
				r.Steps++
				r.CPUMS += float64(m.CPUTime.Microseconds()) / 1000
				r.AllocBytes += m.AllocBytes
				r.AllocObjects += m.AllocObjects
				if m.OverlappingSteps > 0 {
					r.Overlapped++
				}
			}
			if st.Status != steptype.StepWaiting {
				durations[st.Kind] = append(durations[st.Kind], float64(m.Duration.Microseconds())/1000)
			}
		}
	})
	if out.Steps > 0 {
		out.ErrorRate = float64(out.ErrorSteps) / float64(out.Steps)
	}
	g := b.Graph()
	out.RepeatedStepRatio, out.GraphNodes, out.Loops, out.StuckNodes = g.RepeatedStepRatio, len(g.Nodes), g.Loops, g.StuckNodes
	for _, k := range steptype.Kinds {
		if d := durations[k]; len(d) > 0 {
			out.Latency = append(out.Latency, latencyOf(k, d))
		}
		if r := res[k]; r != nil {
			r.MeanCPUMS, r.CPUMS = round3(r.CPUMS/float64(r.Steps)), round3(r.CPUMS)
			out.Resources = append(out.Resources, *r)
		}
	}
	return out
}

// countRuns counts the agent's runs by status, in one aggregate.
func (s *Server) countRuns(ctx context.Context, agent string, out *wire.AgentOverview) error {
	counts, err := s.eng.Store().RunCount(ctx, &store.RunCountParams{Agent: agent})
	if err != nil {
		return fmt.Errorf("count runs: %w", err)
	}
	maps.Copy(out.Runs, counts)
	finished := 0
	for st, n := range out.Runs {
		out.RunsTotal += n
		if st.Terminal() {
			finished += n
		}
	}
	if finished > 0 {
		out.FailedRunRate = float64(out.Runs[steptype.RunFailed]) / float64(finished)
	}
	return nil
}

// latencyOf computes nearest-rank percentiles of d (sorted in place).
func latencyOf(k steptype.Kind, d []float64) wire.KindLatency {
	slices.Sort(d)
	sum := 0.0
	for _, v := range d {
		sum += v
	}
	pct := func(p float64) float64 {
		i := int(p*float64(len(d))+0.999999) - 1
		return round3(d[min(max(i, 0), len(d)-1)])
	}
	return wire.KindLatency{Kind: k, Count: len(d), MeanMS: round3(sum / float64(len(d))), P50MS: pct(0.5), P90MS: pct(0.9), P99MS: pct(0.99), MaxMS: round3(d[len(d)-1])}
}

func round3(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return v
}
