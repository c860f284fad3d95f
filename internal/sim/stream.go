package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise"
)

// stream is a subscriber to one run's events, on a random engine, that
// reconnects from its last position when its stream ends early (an error,
// its engine crashed, or a seeded cut standing for a dropped connection),
// as an SSE client with Last-Event-ID does.
type stream struct {
	session, turn int
	runID         string
	got           []string // "<step id> <status> <kind>" of each step_completed event, in order
	done          bool     // run_finished seen
}

func (w *world) watch(ctx context.Context, session, turn int, runID string) {
	rs := &stream{session: session, turn: turn, runID: runID}
	w.mu.Lock()
	w.streams = append(w.streams, rs)
	w.mu.Unlock()
	w.streamsWG.Add(1)
	go func() {
		defer w.streamsWG.Done()
		rng := w.rng("stream", session*1000+turn)
		var after stepwise.Position
		for ctx.Err() == nil {
			n := w.pick(rng)
			sctx, cut := context.WithCancel(n.ctx)
			t := time.AfterFunc(time.Duration(200+rng.IntN(4000))*time.Millisecond, cut)
			for ev, err := range n.eng.Subscribe(sctx, stepwise.SubscribeParams{RunID: runID, After: after}) {
				if err != nil {
					break
				}
				if !after.Less(ev.Position) {
					w.fail("session %d turn %d: stream position %v after %v", session, turn, ev.Position, after)
				}
				after = ev.Position
				if ev.Type != stepwise.EventStepDelta {
					w.logf("stream session %d turn %d on node %d: %s at %v", session, turn, n.id, ev.Type, ev.Position)
				}
				switch ev.Type {
				case stepwise.EventStepCompleted:
					w.mu.Lock()
					rs.got = append(rs.got, fmt.Sprintf("%s %s %s", ev.Step.ID, ev.Step.Status, ev.Step.Kind))
					w.mu.Unlock()
					w.logf("stream session %d turn %d: step %d %s", session, turn, ev.Step.Sequence, ev.Step.Status)
				case stepwise.EventRunFinished:
					w.mu.Lock()
					rs.done = true
					w.mu.Unlock()
				}
			}
			t.Stop()
			cut()
			w.logf("stream session %d turn %d on node %d: ended after %v", session, turn, n.id, after)
			w.mu.Lock()
			done := rs.done
			if !done {
				w.counts.reconnects++
			}
			w.mu.Unlock()
			if done {
				return
			}
			if !sleep(ctx, time.Duration(10+rng.IntN(200))*time.Millisecond) {
				return
			}
		}
	}()
}
