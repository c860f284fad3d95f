package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// streamResult is what one run stream delivered across its reconnections.
type streamResult struct {
	Finished     bool
	Reconnects   int
	Steps        map[string]int // "step id/status" → deliveries
	Dups         []string
	Disorder     []string
	Approvals    int // approvals answered through a server other than the executing one
	SameServer   int // approvals that had to go through the executing server (none expected)
	FirstServers []int
	mu           sync.Mutex
	log          []string // connections, events and answers, for a stuck stream's report
}

func (r *streamResult) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

// trace is the stream's log so far.
func (r *streamResult) trace() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, "\n")
}

// picker chooses servers at random from a seeded source.
type picker struct {
	mu  sync.Mutex
	rng *rand.Rand
	f   *fleet
}

// pick returns a live server other than the excluded index (0: none), or nil.
func (p *picker) pick(exclude int) *chaosServer {
	live := p.f.live()
	var c []*chaosServer
	for _, s := range live {
		if s.idx != exclude {
			c = append(c, s)
		}
	}
	if len(c) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return c[p.rng.IntN(len(c))]
}

// await picks a live server, waiting (without a fixed sleep) for one to be up.
func (p *picker) await(ctx context.Context, exclude int) (*chaosServer, error) {
	for {
		if s := p.pick(exclude); s != nil {
			return s, nil
		}
		// Every server (but the excluded one) is down: wait for a restart.
		var readies []chan struct{}
		for _, s := range p.f.servers {
			if s.idx == exclude {
				continue
			}
			s.mu.Lock()
			readies = append(readies, s.ready)
			s.mu.Unlock()
		}
		select {
		case <-readies[0]:
		case <-readies[len(readies)-1]:
		case <-time.After(100 * time.Millisecond): // a server restarting the slot may replace its ready channel
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

var apiClient = &http.Client{Timeout: 15 * time.Second}

// call does one API request on s; a transport error (the server was
// killed) is returned as is, for the caller to retry elsewhere.
func call(ctx context.Context, s *chaosServer, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+s.addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

type sseEvent struct {
	Type string         `json:"type"`
	Step *steptype.Step `json:"step"`
}

// follow reads the run's event stream until its run_finished, opening it on
// a random server and reconnecting to another one with Last-Event-ID when
// its server dies. On a waiting approval it answers through a server other
// than the one that executed the run.
func follow(ctx context.Context, p *picker, runID string, res *streamResult) {
	last, lastPos := "", ""
	executor := 0 // the server that executed the run's latest tool call
	for ctx.Err() == nil && !res.Finished {
		s, err := p.await(ctx, 0)
		if err != nil {
			break
		}
		res.FirstServers = append(res.FirstServers, s.idx)
		res.note("connect to server %d (inc %s) after %q", s.idx, s.tag(), last)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+"/v1/runs/"+runID+"/events", nil)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res.Reconnects++
			continue
		}
		if resp.StatusCode == 503 {
			// The database is restarting or paused: reconnect.
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			res.note("stream on server %d: 503 %.200s", s.idx, b)
			res.Reconnects++
			backoff(ctx, 503)
			continue
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			res.Disorder = append(res.Disorder, fmt.Sprintf("stream on server %d: %d %s", s.idx, resp.StatusCode, b))
			res.Reconnects++
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var id, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				data += line[6:]
			case line == "" && data != "":
				var ev sseEvent
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					res.Disorder = append(res.Disorder, "bad event: "+data)
				}
				if id != "" {
					if lastPos != "" && !posLess(lastPos, id) {
						res.Disorder = append(res.Disorder, fmt.Sprintf("position %s after %s", id, lastPos))
					}
					last, lastPos = id, id
				}
				res.note("event %s %s", id, ev.Type)
				id, data = "", ""
				switch ev.Type {
				case "step_completed":
					st := ev.Step
					res.note("  step %d %s %s run=%v", st.Sequence, st.Kind, st.Status, st.RunID == runID)
					k := st.ID + "/" + string(st.Status)
					res.Steps[k]++
					if res.Steps[k] > 1 {
						res.Dups = append(res.Dups, k)
					}
					if st.RunID == runID && st.Kind == steptype.KindTool {
						if srv := serverOf(st.Content); srv > 0 {
							executor = srv
						}
					}
					if st.RunID == runID && st.Kind == steptype.KindInput && st.Status == steptype.StepWaiting {
						answerApprovals(ctx, p, runID, executor, res)
					}
				case "run_waiting":
					// Also on the lifecycle event: a stream that did not
					// deliver the request step must still let the run go on
					// (the missing step is then reported by the checks).
					answerApprovals(ctx, p, runID, executor, res)
				case "run_finished":
					res.Finished = true
				}
			}
		}
		resp.Body.Close()
		res.note("stream ended: %v", sc.Err())
		if !res.Finished {
			res.Reconnects++
		}
	}
}

// serverOf reads the server index out of a recorder result
// ("recorded key=K server=S.I note=N"); 0 if none.
func serverOf(content string) int {
	i := strings.Index(content, "server=")
	if i < 0 {
		return 0
	}
	var srv int
	if _, err := fmt.Sscanf(content[i+len("server="):], "%d", &srv); err != nil {
		return 0
	}
	return srv
}

// posLess compares stream positions "SEQ:IDX".
func posLess(a, b string) bool {
	var as, ai, bs, bi int64
	fmt.Sscanf(a, "%d:%d", &as, &ai)
	fmt.Sscanf(b, "%d:%d", &bs, &bi)
	return as < bs || as == bs && ai < bi
}

// answerApprovals approves the run's pending requests through a server
// other than the executing one, retrying elsewhere when that server dies.
func answerApprovals(ctx context.Context, p *picker, runID string, executor int, res *streamResult) {
	for ctx.Err() == nil {
		s, err := p.await(ctx, executor)
		if err != nil {
			return
		}
		code, body, err := call(ctx, s, "GET", "/v1/runs/"+runID+"/inputs", nil)
		res.note("inputs on server %d: %d %v %.200s", s.idx, code, err, body)
		if err != nil || code != 200 {
			backoff(ctx, code)
			continue
		}
		var in struct {
			Inputs []struct {
				RequestID string `json:"request_id"`
			} `json:"inputs"`
		}
		if json.Unmarshal(body, &in) != nil {
			continue
		}
		if len(in.Inputs) == 0 {
			return // answered (a response lost to a kill) or not pending any more
		}
		for _, r := range in.Inputs {
			code, b, err := call(ctx, s, "POST", "/v1/runs/"+runID+"/inputs/"+r.RequestID, map[string]any{"answer": map[string]any{"approved": true}})
			res.note("answer on server %d: %d %v %.200s", s.idx, code, err, b)
			if err == nil && (code == 200 || code == 409) {
				if s.idx == executor {
					res.SameServer++
				} else {
					res.Approvals++
				}
			}
		}
	}
}
