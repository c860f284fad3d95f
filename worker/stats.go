package worker

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/wire"
)

// statsWindow is how many recent task durations a worker's percentiles
// are taken over.
const statsWindow = 512

// maxStatsWorkers bounds the workers a Service keeps statistics of: past
// it, the one seen longest ago is dropped.
const maxStatsWorkers = 4096

// stats are the per-worker counters of a Service since it started: what
// each worker id registered, claimed and finished through this process.
type stats struct {
	since time.Time

	mu      sync.Mutex
	workers map[string]*workerStats
}

// claim is a task handed to a worker: when, under which token.
type claim struct {
	at    time.Time
	token int64
}

type workerStats struct {
	agents    []string
	firstSeen time.Time
	lastSeen  time.Time
	polling   int
	claimed   map[string]claim // by task id: handed to the worker by this process, until it finishes or is lost

	claims, completed, failed, parked, released, lost int64
	durations                                         []time.Duration // ring of the last statsWindow claim → finish times
	next                                              int
}

func newStats() *stats { return &stats{since: time.Now(), workers: map[string]*workerStats{}} }

// of returns the statistics of worker id, seen now; s.mu is held.
func (s *stats) of(id string, now time.Time) *workerStats {
	w := s.workers[id]
	if w == nil {
		if len(s.workers) >= maxStatsWorkers {
			oldest := ""
			for k, v := range s.workers {
				if oldest == "" || v.lastSeen.Before(s.workers[oldest].lastSeen) {
					oldest = k
				}
			}
			delete(s.workers, oldest)
		}
		w = &workerStats{firstSeen: now, claimed: map[string]claim{}}
		s.workers[id] = w
	}
	w.lastSeen = now
	return w
}

func (s *stats) seen(id string) {
	s.mu.Lock()
	s.of(id, time.Now())
	s.mu.Unlock()
}

func (s *stats) registered(id string, agents []string) {
	s.mu.Lock()
	w := s.of(id, time.Now())
	for _, a := range agents {
		if !slices.Contains(w.agents, a) {
			w.agents = append(w.agents, a)
		}
	}
	slices.Sort(w.agents)
	s.mu.Unlock()
}

// polling counts a poll of worker id held (d = 1) or ended (d = -1).
func (s *stats) polling(id string, d int) {
	s.mu.Lock()
	s.of(id, time.Now()).polling += d
	s.mu.Unlock()
}

func (s *stats) claimedTasks(id string, tasks []*wire.Task) {
	if len(tasks) == 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.of(id, now)
	w.claims += int64(len(tasks))
	for _, t := range tasks {
		if t.Claims > 1 {
			// Claimed again: a holder through this process lost its lease.
			s.drop(t.ID, -1, false)
		}
		if len(w.claimed) < maxClaimed {
			w.claimed[t.ID] = claim{at: now, token: t.Token}
		}
	}
}

// finished records task id finished by worker id in state (a task state:
// completed, failed or parked).
func (s *stats) finished(id, task, state string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.of(id, now)
	switch state {
	case "completed":
		w.completed++
	case "failed":
		w.failed++
	case "parked":
		w.parked++
	}
	c, ok := w.claimed[task]
	if !ok {
		return
	}
	delete(w.claimed, task)
	if len(w.durations) < statsWindow {
		w.durations = append(w.durations, now.Sub(c.at))
	} else {
		w.durations[w.next] = now.Sub(c.at)
		w.next = (w.next + 1) % statsWindow
	}
}

// dropped records that the worker holding task id under token through
// this process no longer does: it handed the task back (released), or a
// call under its token was refused because its lease had passed. Counted
// once, and only for a task handed over by this process.
func (s *stats) dropped(task string, token int64, released bool) {
	s.mu.Lock()
	s.drop(task, token, released)
	s.mu.Unlock()
}

// drop is dropped with s.mu held; token -1 matches any holder.
func (s *stats) drop(task string, token int64, released bool) {
	for _, w := range s.workers {
		if c, ok := w.claimed[task]; ok && (token < 0 || c.token == token) {
			delete(w.claimed, task)
			if released {
				w.released++
			} else {
				w.lost++
			}
			return
		}
	}
}

// list returns every worker's statistics, by id.
func (s *stats) list() *wire.WorkerList {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &wire.WorkerList{Since: s.since, Workers: make([]*wire.WorkerStats, 0, len(s.workers))}
	for id, w := range s.workers {
		ds := slices.Clone(w.durations)
		slices.Sort(ds)
		out.Workers = append(out.Workers, &wire.WorkerStats{ID: id, Agents: slices.Clone(w.agents), FirstSeen: w.firstSeen, LastSeen: w.lastSeen,
			Polling: w.polling, Holding: len(w.claimed), Claimed: w.claims, Completed: w.completed, Failed: w.failed, Parked: w.parked,
			Released: w.released, LeaseLost: w.lost, TaskP50MS: quantileMS(ds, 0.50), TaskP95MS: quantileMS(ds, 0.95), TaskSamples: len(ds)})
	}
	slices.SortFunc(out.Workers, func(a, b *wire.WorkerStats) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// quantileMS is the q-quantile of sorted ds in milliseconds (nearest rank;
// 0 for none).
func quantileMS(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.5) - 1
	i = min(max(i, 0), len(ds)-1)
	return float64(ds[i].Microseconds()) / 1000
}

// Workers returns what every worker seen by this process since it started
// did through it (GET /v1/workers).
func (s *Service) Workers() *wire.WorkerList { return s.stats.list() }
