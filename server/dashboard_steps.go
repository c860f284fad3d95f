package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// Bounds of GET /v1/dashboard/steps.
const (
	defaultStepScanSessions = 200
	maxStepScanSessions     = 2000
	maxStepScanSteps        = 200_000
	maxStepPage             = 200
)

// stepFilter is what GET /v1/dashboard/steps matches.
type stepFilter struct {
	text             string
	kinds            map[steptype.Kind]bool
	status           map[steptype.StepStatus]bool
	errorClass, tool string
	model            string
	meta             map[string]string
	from, to         time.Time
	minCost, maxCost float64
	hasMax           bool
}

// dashboardSteps: GET /v1/dashboard/steps?q=&agent=&kind=&status=&error_class=&tool=&model=&meta=K=V&from=&to=&min_cost=&max_cost=&sort=&dir=&limit=&offset=&sessions=,
// search over the content of steps across sessions (the newest sessions
// first, their own steps: a fork's inherited steps count in its parent),
// filtered, sorted by the server (time, cost, duration or tokens) and
// paged by offset.
func (s *Server) dashboardSteps(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := parseStepFilter(q)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", maxStepPage)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = 50
	}
	offset, err := queryInt(r, "offset", 0)
	if err != nil {
		return err
	}
	nsess, err := queryInt(r, "sessions", maxStepScanSessions)
	if err != nil {
		return err
	}
	if nsess == 0 {
		nsess = defaultStepScanSessions
	}
	sortBy, dir := cmp.Or(q.Get("sort"), "time"), cmp.Or(q.Get("dir"), "desc")
	key, ok := stepSortKeys[sortBy]
	if !ok {
		return badParam("sort %q: want time, cost, duration or tokens", sortBy)
	}
	if dir != "asc" && dir != "desc" {
		return badParam("dir %q: want asc or desc", dir)
	}
	out := &wire.StepHitPage{Steps: []*wire.StepHit{}}
	var hits []*wire.StepHit
	cursor := ""
	for out.ScannedSessions < int(nsess) {
		page, err := s.eng.Store().SessionList(r.Context(), &store.SessionListParams{Agent: q.Get("agent"), Cursor: cursor, Limit: min(200, int(nsess)-out.ScannedSessions)})
		if err != nil {
			return err
		}
		for _, sess := range page.Sessions {
			steps, err := s.eng.Store().StepList(r.Context(), &store.StepListParams{SessionID: sess.ID})
			if err != nil {
				return err
			}
			out.ScannedSessions++
			for _, st := range steps {
				if st.SessionID != sess.ID {
					continue // inherited: found in the parent
				}
				out.ScannedSteps++
				if f.match(st) {
					hits = append(hits, &wire.StepHit{SessionID: sess.ID, SessionTitle: sess.Title, Agent: sess.Agent, Step: st})
				}
			}
			if out.ScannedSteps >= maxStepScanSteps {
				break
			}
		}
		cursor = page.Next
		if cursor == "" || out.ScannedSteps >= maxStepScanSteps {
			break
		}
	}
	out.Truncated = cursor != ""
	slices.SortStableFunc(hits, func(a, b *wire.StepHit) int {
		c := cmp.Compare(key(a.Step), key(b.Step))
		if c == 0 {
			c = a.Step.CreatedAt.Compare(b.Step.CreatedAt)
		}
		if dir == "desc" {
			return -c
		}
		return c
	})
	out.Total = len(hits)
	if int(offset) < len(hits) {
		out.Steps = hits[offset:min(len(hits), int(offset+limit))]
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// stepSortKeys are the sort orders of the step search.
var stepSortKeys = map[string]func(*stepwise.Step) float64{
	"time":     func(s *stepwise.Step) float64 { return float64(s.CreatedAt.UnixNano()) },
	"cost":     func(s *stepwise.Step) float64 { return s.Metrics.Cost },
	"duration": func(s *stepwise.Step) float64 { return float64(s.Metrics.Duration) },
	"tokens":   func(s *stepwise.Step) float64 { return float64(s.Metrics.InputTokens + s.Metrics.OutputTokens) },
}

func parseStepFilter(q map[string][]string) (*stepFilter, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	for k, vs := range q {
		for _, v := range vs {
			if len(v) > 1024 {
				return nil, badParam("query parameter %s is longer than 1024 bytes", k)
			}
		}
	}
	f := &stepFilter{text: strings.ToLower(strings.TrimSpace(get("q"))), errorClass: get("error_class"), tool: get("tool"), model: get("model")}
	for _, k := range strings.Split(get("kind"), ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		kind, err := steptype.ParseKind(k)
		if err != nil {
			return nil, badParam("kind: %v", err)
		}
		if f.kinds == nil {
			f.kinds = map[steptype.Kind]bool{}
		}
		f.kinds[kind] = true
	}
	for _, st := range strings.Split(get("status"), ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		switch steptype.StepStatus(st) {
		case steptype.StepCompleted, steptype.StepFailed, steptype.StepWaiting, steptype.StepExpired, steptype.StepCancelled:
		default:
			return nil, badParam("status %q: want completed, failed, waiting, expired or cancelled", st)
		}
		if f.status == nil {
			f.status = map[steptype.StepStatus]bool{}
		}
		f.status[steptype.StepStatus(st)] = true
	}
	if c := f.errorClass; c != "" && c != string(steptype.ErrorTransient) && c != string(steptype.ErrorPermanent) {
		return nil, badParam("error_class %q: want transient or permanent", c)
	}
	for _, kv := range q["meta"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, badParam("meta %q: want KEY=VALUE", kv)
		}
		if f.meta == nil {
			f.meta = map[string]string{}
		}
		f.meta[k] = v
	}
	for name, dst := range map[string]*time.Time{"from": &f.from, "to": &f.to} {
		if v := get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return nil, badParam("%s %q: want an RFC 3339 time", name, v)
			}
			*dst = t
		}
	}
	for name, dst := range map[string]*float64{"min_cost": &f.minCost, "max_cost": &f.maxCost} {
		if v := get(name); v != "" {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n < 0 {
				return nil, badParam("%s %q: want a non-negative number", name, v)
			}
			*dst = n
			f.hasMax = f.hasMax || name == "max_cost"
		}
	}
	return f, nil
}

// match reports whether a step passes every filter.
func (f *stepFilter) match(s *stepwise.Step) bool {
	if f.kinds != nil && !f.kinds[s.Kind] || f.status != nil && !f.status[s.Status] {
		return false
	}
	if f.errorClass != "" && (s.Error == nil || string(s.Error.Class) != f.errorClass) {
		return false
	}
	if f.tool != "" && s.ToolName != f.tool && !slices.ContainsFunc(s.ToolCalls, func(c steptype.ToolCall) bool { return c.Name == f.tool }) {
		return false
	}
	if f.model != "" && !strings.Contains(strings.ToLower(s.Metrics.Model), strings.ToLower(f.model)) {
		return false
	}
	for k, v := range f.meta {
		got, ok := s.Metadata[k]
		if !ok || fmt.Sprint(got) != v {
			return false
		}
	}
	if !f.from.IsZero() && s.CreatedAt.Before(f.from) || !f.to.IsZero() && s.CreatedAt.After(f.to) {
		return false
	}
	if s.Metrics.Cost < f.minCost || f.hasMax && s.Metrics.Cost > f.maxCost {
		return false
	}
	return f.text == "" || strings.Contains(strings.ToLower(searchText(s)), f.text)
}

// searchText is the text of a step the search looks in: content,
// reasoning, tool names and arguments, inputs, outputs, error and state.
func searchText(s *stepwise.Step) string {
	var b strings.Builder
	for _, t := range []string{s.Content, s.Reasoning, s.ToolName, s.Name, s.Annotations.State, s.Annotations.Action, string(s.Inputs), string(s.Outputs)} {
		b.WriteString(t)
		b.WriteByte('\n')
	}
	for _, c := range s.ToolCalls {
		b.WriteString(c.Name + " " + string(c.Arguments) + "\n")
	}
	if s.Error != nil {
		b.WriteString(s.Error.Message + " " + s.Error.Code + "\n")
	}
	if len(s.Metadata) > 0 {
		m, _ := json.Marshal(s.Metadata)
		b.Write(m)
	}
	return b.String()
}
