// Command coldbuild reads the action graph of a cold build and tells what
// set its wall time: the CPU of every compile, the longest chain of
// dependent actions (the critical path), and the go command's own schedule
// replayed on idle cores with each action's measured CPU, which on a shared
// machine is a steadier figure than the wall time.
//
//	GOCACHE=$(mktemp -d) go build -debug-actiongraph=/tmp/ag.json -o /dev/null ./cmd/stepwise
//	go run ./scripts/coldbuild /tmp/ag.json            # -p 2: cores of the replay
//
// The go command runs ready actions by priority, the depth-first order of
// the import graph (each package's imports sorted by path): the replay uses
// the priorities of the file. It gives each action one core for its CPU
// time, whereas the compiler runs its backend on up to 4 threads (-c), so a
// large package compiling alone partly uses the idle core: the replay
// overstates what a badly packed schedule loses (on an idle 2-core VM,
// modernc.org/sqlite/lib took 18.6 s of CPU in 11.9 s). See "First run and
// binary size" in docs/PERFORMANCE.md.
package main

import (
	"container/heap"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"
)

type action struct {
	ID        int
	Mode      string
	Package   string
	Deps      []int
	Priority  int
	TimeStart time.Time
	TimeDone  time.Time
	CmdUser   time.Duration
	CmdSys    time.Duration
}

func (a *action) name() string { return a.Mode + " " + a.Package }

// cpu is the action's process CPU (compile, asm, cgo); actions without a
// command (cache checks, the link, whose CPU the graph does not record)
// count their wall time, except the program's own run under `go run`.
func (a *action) cpu() float64 {
	if a.Mode == "go run" {
		return 0
	}
	if c := a.CmdUser + a.CmdSys; c > 0 {
		return c.Seconds()
	}
	if !a.TimeStart.IsZero() {
		return a.TimeDone.Sub(a.TimeStart).Seconds()
	}
	return 0
}

func main() {
	cores := flag.Int("p", 2, "cores of the replayed schedule")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: coldbuild [-p cores] actiongraph.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var g []*action
	if err := json.Unmarshal(data, &g); err != nil {
		fmt.Fprintln(os.Stderr, "coldbuild:", err)
		os.Exit(1)
	}
	var t0, t1 time.Time
	var sum float64
	for _, a := range g {
		sum += a.cpu()
		if !a.TimeStart.IsZero() && (t0.IsZero() || a.TimeStart.Before(t0)) {
			t0 = a.TimeStart
		}
		if a.TimeDone.After(t1) {
			t1 = a.TimeDone
		}
	}
	fmt.Printf("actions: %d, wall %.1f s from the first to the last, CPU %.1f s\n", len(g), t1.Sub(t0).Seconds(), sum)

	// Longest chain by CPU: dependencies come first in priority order.
	order := make([]*action, len(g))
	copy(order, g)
	slices.SortFunc(order, func(a, b *action) int { return a.Priority - b.Priority })
	longest := make([]float64, len(g))
	prev := make([]int, len(g))
	for _, a := range order {
		prev[a.ID] = -1
		for _, d := range a.Deps {
			if prev[a.ID] < 0 || longest[d] > longest[prev[a.ID]] {
				prev[a.ID] = d
			}
		}
		longest[a.ID] = a.cpu()
		if p := prev[a.ID]; p >= 0 {
			longest[a.ID] += longest[p]
		}
	}
	end := 0
	for i := range g {
		if longest[i] > longest[end] {
			end = i
		}
	}
	fmt.Printf("critical path by CPU: %.1f s (actions of ≥ 0.3 s: CPU, started after the first action)\n", longest[end])
	var path []*action
	for i := end; i >= 0; i = prev[i] {
		path = append(path, g[i])
	}
	slices.Reverse(path)
	for _, a := range path {
		if a.cpu() >= 0.3 {
			fmt.Printf("  %6.1f s  at %6.1f s  %s\n", a.cpu(), a.TimeStart.Sub(t0).Seconds(), a.name())
		}
	}
	fmt.Printf("the go command's schedule replayed on %d idle cores with these CPU times: %.1f s (CPU / %d = %.1f s)\n",
		*cores, replay(g, *cores), *cores, sum/float64(*cores))
}

// replay runs the graph as the go command does: at most cores actions at
// once, the ready action of lowest priority first, each taking its CPU.
func replay(g []*action, cores int) float64 {
	pending := make([]int, len(g))
	triggers := make([][]int, len(g))
	ready := &queue{}
	for _, a := range g {
		pending[a.ID] = len(a.Deps)
		for _, d := range a.Deps {
			triggers[d] = append(triggers[d], a.ID)
		}
	}
	for _, a := range g {
		if pending[a.ID] == 0 {
			heap.Push(ready, item{key: float64(a.Priority), id: a.ID})
		}
	}
	running := &queue{}
	now := 0.0
	for ready.Len() > 0 || running.Len() > 0 {
		for ready.Len() > 0 && running.Len() < cores {
			id := heap.Pop(ready).(item).id
			heap.Push(running, item{key: now + g[id].cpu(), id: id})
		}
		done := heap.Pop(running).(item)
		now = done.key
		for _, t := range triggers[done.id] {
			if pending[t]--; pending[t] == 0 {
				heap.Push(ready, item{key: float64(g[t].Priority), id: t})
			}
		}
	}
	return now
}

type item struct {
	key float64
	id  int
}

type queue []item

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].key < q[j].key }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(item)) }
func (q *queue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
