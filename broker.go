package stepwise

import (
	"sync"
	"sync/atomic"
)

// broker fans events out to live subscribers of a session and assigns each
// event its position. It keeps a ring of recent events per session so that a
// client reconnecting shortly after a disconnect also gets the deltas it
// missed; older history is served from the store (committed steps).
type broker struct {
	mu       sync.Mutex
	topics   map[string]*topic
	ringSize int
	bufSize  int
}

type topic struct {
	seq, idx int64
	ring     []*Event // recent events, oldest first, at most ringSize
	subs     map[*subscriber]struct{}
	active   int // executions publishing into the topic
}

type subscriber struct {
	ch      chan *Event
	runID   string        // only events of this run, if set
	lag     chan struct{} // closed when the subscriber fell behind
	lagOnce sync.Once
	lagged  atomic.Bool
}

func (s *subscriber) markLagged() {
	s.lagged.Store(true)
	s.lagOnce.Do(func() { close(s.lag) })
}

func newBroker() *broker {
	return &broker{topics: map[string]*topic{}, ringSize: 512, bufSize: 1024}
}

func (b *broker) topicLocked(sessionID string) *topic {
	t := b.topics[sessionID]
	if t == nil {
		t = &topic{subs: map[*subscriber]struct{}{}}
		b.topics[sessionID] = t
	}
	return t
}

// acquire marks an execution publishing into a session whose last committed
// sequence is lastSeq.
func (b *broker) acquire(sessionID string, lastSeq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(sessionID)
	t.active++
	if lastSeq > t.seq {
		t.seq, t.idx = lastSeq, 0
	}
}

// release ends an acquire.
func (b *broker) release(sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil {
		t.active--
		b.gcLocked(sessionID, t)
	}
}

func (b *broker) gcLocked(sessionID string, t *topic) {
	if t.active <= 0 && len(t.subs) == 0 {
		delete(b.topics, sessionID)
	}
}

// publish assigns ev its position and delivers it. A subscriber whose buffer
// is full is marked lagged and stops receiving; it catches up from the store.
func (b *broker) publish(ev *Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(ev.SessionID)
	if ev.Type == EventStepCompleted && ev.Step != nil && ev.Step.Sequence > t.seq {
		t.seq, t.idx = ev.Step.Sequence, 0
	} else {
		t.idx++
	}
	ev.Position = Position{Seq: t.seq, Idx: t.idx}
	if len(t.ring) >= b.ringSize {
		copy(t.ring, t.ring[len(t.ring)/2:])
		t.ring = t.ring[:len(t.ring)-len(t.ring)/2]
	}
	t.ring = append(t.ring, ev)
	for s := range t.subs {
		if s.runID != "" && s.runID != ev.RunID {
			continue
		}
		if s.lagged.Load() {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			s.markLagged()
		}
	}
	if t.active <= 0 && len(t.subs) == 0 {
		delete(b.topics, ev.SessionID)
	}
}

// subscribe registers a live subscriber and returns the buffered events
// after pos that are still in the ring, plus whether the ring covers pos
// (every event after pos is either returned or will be delivered).
func (b *broker) subscribe(sessionID, runID string, pos Position) (*subscriber, []*Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(sessionID)
	s := &subscriber{ch: make(chan *Event, b.bufSize), runID: runID, lag: make(chan struct{})}
	t.subs[s] = struct{}{}
	var out []*Event
	// The ring covers pos when its oldest event is not after pos: then every
	// later event is in the ring or still to come.
	covered := len(t.ring) > 0 && !pos.Less(t.ring[0].Position)
	for _, ev := range t.ring {
		if pos.Less(ev.Position) && (runID == "" || ev.RunID == runID) {
			out = append(out, ev)
		}
	}
	return s, out, covered
}

func (b *broker) unsubscribe(sessionID string, s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil {
		delete(t.subs, s)
		b.gcLocked(sessionID, t)
	}
}

// poke makes every live subscriber of a session catch up from the store:
// another instance committed steps this broker has not seen.
func (b *broker) poke(sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil {
		for s := range t.subs {
			s.markLagged()
		}
	}
}

// observe records that the store holds steps up to seq (seen by a
// subscriber catching up), so that events published here afterwards are
// positioned after them even when another instance committed them.
func (b *broker) observe(sessionID string, seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil && seq > t.seq {
		t.seq, t.idx = seq, 0
	}
}
