package stepwise

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// broker fans events out to live subscribers of a session and assigns each
// event its position. It keeps a ring of recent events per session so that a
// client reconnecting shortly after a disconnect also gets the deltas and run
// events it missed; older history is served from the store (committed
// steps). Topics of idle sessions are kept, with a short ring, up to
// maxIdle of them, so positions stay continuous across runs of a session.
type broker struct {
	mu       sync.Mutex
	topics   map[string]*topic
	idle     *list.List // idle topics, least recently used first
	ringSize int
	idleRing int // events an idle topic keeps
	maxIdle  int
	bufSize  int
}

type topic struct {
	id       string
	seq, idx int64
	ring     []*Event // recent events, oldest first, at most ringSize
	// start is the position just before ring[0] when known: every event
	// after start is in the ring. Unknown (the topic was created without
	// knowing the session's last sequence) until an execution acquires it.
	start      Position
	startKnown bool
	// pokes counts the pokes: a store read that a poke overtook does not
	// make the ring complete again (see observe).
	pokes    uint64
	subs     map[*subscriber]struct{}
	active   int           // executions publishing into the topic
	idleElem *list.Element // position in broker.idle while idle
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
	return &broker{topics: map[string]*topic{}, idle: list.New(), ringSize: 512, idleRing: 8, maxIdle: 1024, bufSize: 1024}
}

// topicLocked returns the session's topic, creating it, and marks it busy.
func (b *broker) topicLocked(sessionID string) *topic {
	t := b.topics[sessionID]
	if t == nil {
		t = &topic{id: sessionID, subs: map[*subscriber]struct{}{}}
		b.topics[sessionID] = t
	}
	if t.idleElem != nil {
		b.idle.Remove(t.idleElem)
		t.idleElem = nil
	}
	return t
}

// settleLocked parks a topic nobody uses any more on the idle list with a
// short ring, evicting the least recently used idle topics beyond maxIdle.
func (b *broker) settleLocked(t *topic) {
	if t.active > 0 || len(t.subs) > 0 || t.idleElem != nil {
		return
	}
	b.trimLocked(t, b.idleRing)
	t.idleElem = b.idle.PushBack(t)
	for b.idle.Len() > b.maxIdle {
		old := b.idle.Remove(b.idle.Front()).(*topic)
		old.idleElem = nil
		delete(b.topics, old.id)
	}
}

// trimLocked keeps the last n events of the ring.
func (b *broker) trimLocked(t *topic, n int) {
	if len(t.ring) <= n {
		return
	}
	drop := len(t.ring) - n
	if t.startKnown {
		t.start = t.ring[drop-1].Position
	}
	kept := make([]*Event, n, max(n, 16))
	copy(kept, t.ring[drop:])
	t.ring = kept
}

// acquire marks an execution publishing into a session whose last committed
// sequence is lastSeq.
func (b *broker) acquire(sessionID string, lastSeq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(sessionID)
	t.active++
	b.advanceLocked(t, lastSeq)
}

// advanceLocked records that the store holds steps up to seq; when the
// topic had no ring yet, the ring starts here.
func (b *broker) advanceLocked(t *topic, seq int64) {
	if seq > t.seq {
		t.seq, t.idx = seq, 0
	}
	if len(t.ring) == 0 {
		t.start, t.startKnown = Position{Seq: t.seq, Idx: t.idx}, true
	}
}

// release ends an acquire.
func (b *broker) release(sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil {
		t.active--
		b.settleLocked(t)
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
		b.trimLocked(t, b.ringSize/2)
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
	b.settleLocked(t)
}

// subscribe registers a live subscriber and returns the buffered events
// after pos that are in the ring, and from where the store must be read:
// storeTo is the last sequence to read from the store (0: nothing, -1: to
// the end).
func (b *broker) subscribe(sessionID, runID string, pos Position) (s *subscriber, buffered []*Event, storeTo int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(sessionID)
	s = &subscriber{ch: make(chan *Event, b.bufSize), runID: runID, lag: make(chan struct{})}
	t.subs[s] = struct{}{}
	switch {
	case !t.startKnown:
		storeTo = -1
	case pos.Less(t.start):
		storeTo = t.start.Seq
	}
	for _, ev := range t.ring {
		if pos.Less(ev.Position) && (runID == "" || ev.RunID == runID) {
			buffered = append(buffered, ev)
		}
	}
	return s, buffered, storeTo
}

func (b *broker) unsubscribe(sessionID string, s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil {
		delete(t.subs, s)
		b.settleLocked(t)
	}
}

// poke makes every live subscriber of a session catch up from the store:
// another instance committed steps this broker has not seen.
func (b *broker) poke(sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil {
		// Steps committed elsewhere are not in the ring: from now on the
		// ring covers nothing on its own and subscribers read the store.
		t.startKnown = false
		t.pokes++
		for s := range t.subs {
			s.markLagged()
		}
	}
}

// pokesOf returns the session's poke count, taken before a store read
// whose result is then passed to observe.
func (b *broker) pokesOf(sessionID string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[sessionID]; t != nil {
		return t.pokes
	}
	return 0
}

// observe records that the store holds steps up to seq (seen by a
// subscriber catching up), so that events published here afterwards are
// positioned after them even when another instance committed them. pokes is
// the count taken before the read: when a poke came in since, steps were
// committed elsewhere after the read and the ring does not cover them, so
// it is not marked complete.
func (b *broker) observe(sessionID string, seq int64, pokes uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[sessionID]
	switch {
	case t == nil:
	case t.pokes == pokes:
		b.advanceLocked(t, seq)
	case seq > t.seq:
		t.seq, t.idx = seq, 0
	}
}

// pokeBehind pokes a session's subscribers unless this broker has already
// published or observed its steps up to seq (a commit of this process).
func (b *broker) pokeBehind(sessionID string, seq int64) {
	b.mu.Lock()
	t := b.topics[sessionID]
	behind := t != nil && t.seq < seq
	b.mu.Unlock()
	if behind {
		b.poke(sessionID)
	}
}

// pokeAll makes every live subscriber catch up from the store: changes may
// have been committed that no notification reported.
func (b *broker) pokeAll() {
	b.mu.Lock()
	ids := make([]string, 0, len(b.topics))
	for id := range b.topics {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		b.poke(id)
	}
}

// watch registers a subscriber of a run's live events used as a wake-up
// only (the client protocol re-reads the store when it fires).
func (b *broker) watch(sessionID, runID string) *subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(sessionID)
	s := &subscriber{ch: make(chan *Event, 64), runID: runID, lag: make(chan struct{})}
	t.subs[s] = struct{}{}
	return s
}
