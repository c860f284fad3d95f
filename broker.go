package stepwise

import (
	"container/list"
	"slices"
	"sync"
)

// broker fans events out to live subscribers of a session and assigns each
// event its position. It keeps a ring of recent events per session so that a
// client reconnecting shortly after a disconnect also gets the deltas and run
// events it missed; older history is served from the store (committed
// steps). Topics of idle sessions are kept, with a short ring, up to
// maxIdle of them per shard, so positions stay continuous across runs of a
// session.
//
// The topics are spread over shards by session ID, each with its own mutex:
// events of different sessions rarely share a lock, while all the state of
// one session (positions, ring, subscribers) stays under one, which keeps
// the per-session ordering guarantees of a single lock.
type broker struct {
	shards   [brokerShards]brokerShard
	ringSize int
	idleRing int // events an idle topic keeps
	maxIdle  int // idle topics kept per shard
	bufSize  int
}

// brokerShards is the number of shards of the broker (a power of two).
const brokerShards = 64

type brokerShard struct {
	mu     sync.Mutex
	topics map[string]*topic
	idle   *list.List // idle topics, least recently used first
	_      [64]byte   // keeps shards' mutexes on separate cache lines
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
	pokes  uint64
	subs   []*subscriber // a slice: publishing ranges over it per event
	active int           // executions publishing into the topic
	// resolving counts this process's answers between the start of their
	// commit and their publication (beginResolution, publishResolution).
	// The answer's commit queues its run, which an execution of this or
	// another instance may resume and commit steps of before the answer is
	// published here. Until it is, a poke switches no subscriber to the
	// store (heldPoke: a subscriber that read those steps from the store
	// first would get the answer after them), and an execution of this
	// process waits in acquire before it publishes anything.
	resolving int
	heldPoke  bool
	resolved  chan struct{} // closed when resolving returns to 0
	sh        *brokerShard  // the shard holding it
	idleElem  *list.Element // position in the shard's idle list while idle
}

func newBroker() *broker {
	b := &broker{ringSize: 512, idleRing: 8, maxIdle: 32, bufSize: 1024}
	for i := range b.shards {
		b.shards[i].topics = map[string]*topic{}
		b.shards[i].idle = list.New()
	}
	return b
}

// lock returns the shard of a session, locked.
func (b *broker) lock(sessionID string) *brokerShard {
	sh := &b.shards[shardIndex(sessionID)]
	sh.mu.Lock()
	return sh
}

// topicLocked returns the session's topic, creating it, and marks it busy.
func (sh *brokerShard) topicLocked(sessionID string) *topic {
	t := sh.topics[sessionID]
	if t == nil {
		t = &topic{id: sessionID, sh: sh}
		sh.topics[sessionID] = t
	}
	if t.idleElem != nil {
		sh.idle.Remove(t.idleElem)
		t.idleElem = nil
	}
	return t
}

// settleLocked parks a topic nobody uses any more on the idle list with a
// short ring, evicting the least recently used idle topics beyond maxIdle.
func (b *broker) settleLocked(sh *brokerShard, t *topic) {
	if t.active > 0 || len(t.subs) > 0 || t.resolving > 0 || t.idleElem != nil {
		return
	}
	t.trimLocked(b.idleRing)
	t.idleElem = sh.idle.PushBack(t)
	for sh.idle.Len() > b.maxIdle {
		old := sh.idle.Remove(sh.idle.Front()).(*topic)
		old.idleElem = nil
		delete(sh.topics, old.id)
	}
}

// trimLocked keeps the last n events of the ring, in place unless the ring
// is much larger than needed (an idle topic gives its memory back).
func (t *topic) trimLocked(n int) {
	if len(t.ring) <= n {
		return
	}
	drop := len(t.ring) - n
	if t.startKnown {
		t.start = t.ring[drop-1].Position
	}
	if n >= cap(t.ring)/4 {
		copy(t.ring, t.ring[drop:])
		clear(t.ring[n:])
		t.ring = t.ring[:n]
		return
	}
	kept := make([]*Event, n, max(n, 16))
	copy(kept, t.ring[drop:])
	t.ring = kept
}

// acquire marks an execution publishing into a session whose last committed
// sequence is lastSeq. It returns the session's topic, which stays the
// session's until the matching release: the execution publishes into it
// (publishTo) without looking it up per event.
//
// An execution that resumes a run whose answer this process has committed
// but not published yet waits for that publication (bounded by the
// answer's commit): its steps come after the answer (see topic.resolving).
func (b *broker) acquire(sessionID string, lastSeq int64) *topic {
	for {
		sh := b.lock(sessionID)
		t := sh.topicLocked(sessionID)
		if t.resolving == 0 {
			t.active++
			t.advanceLocked(lastSeq)
			sh.mu.Unlock()
			return t
		}
		wait := t.resolved
		sh.mu.Unlock()
		<-wait
	}
}

// advanceLocked records that the store holds steps up to seq; when the
// topic had no ring yet, the ring starts here.
func (t *topic) advanceLocked(seq int64) {
	if seq > t.seq {
		t.seq, t.idx = seq, 0
	}
	if len(t.ring) == 0 {
		t.start, t.startKnown = Position{Seq: t.seq, Idx: t.idx}, true
	}
}

// release ends an acquire.
func (b *broker) release(sessionID string) {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	if t := sh.topics[sessionID]; t != nil {
		t.active--
		b.settleLocked(sh, t)
	}
}

// beginResolution is called before the commit of an answer in a session;
// publishResolution ends it. In between, pokes of the session are held and
// executions of the session wait in acquire (see topic.resolving).
func (b *broker) beginResolution(sessionID string) {
	sh := b.lock(sessionID)
	t := sh.topicLocked(sessionID)
	if t.resolving++; t.resolving == 1 {
		t.resolved = make(chan struct{})
	}
	sh.mu.Unlock()
}

// publishResolution publishes the step_completed event of a step resolved
// after its commit (an answer), then applies the pokes held since
// beginResolution; ev nil (the answer failed) only does the latter. When
// this broker never saw the step's commit (another instance made it, and
// its notification has not been handled here yet), the topic is behind the
// store: its subscribers are sent to the store first (they read the steps
// up to the resolved one, which they may not have yet), and the resolution
// is positioned after the commit's (seq, 0), never at it, or a subscriber
// that read the step from the store would take it for the commit it has
// and drop it.
func (b *broker) publishResolution(sessionID string, ev *Event) {
	if ev != nil {
		sh := b.lock(sessionID)
		if t := sh.topicLocked(sessionID); t.seq < ev.Step.Sequence {
			t.startKnown = false
			t.pokes++
			t.lagSubsLocked()
			t.advanceLocked(ev.Step.Sequence)
		}
		sh.mu.Unlock()
		b.publish(ev)
	}
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	t := sh.topicLocked(sessionID)
	if t.resolving > 0 { // 0: a test's call without beginResolution
		if t.resolving--; t.resolving == 0 {
			close(t.resolved)
			if t.heldPoke {
				t.heldPoke = false
				t.lagSubsLocked()
			}
		}
	}
	b.settleLocked(sh, t)
}

// publish assigns ev its position and delivers it. A subscriber whose buffer
// is full is marked lagged and stops receiving; it catches up from the store.
func (b *broker) publish(ev *Event) { b.publishTo(nil, ev) }

// publishTo is publish into the topic acquire returned for ev's session
// (nil: look it up). A topic no longer acquired may have left the
// session's shard: then it is looked up too.
func (b *broker) publishTo(t *topic, ev *Event) {
	// Consumers are woken after the shard is unlocked: waking a goroutine
	// is a scheduler call, and every other session of the shard would wait
	// on it.
	var wakeBuf [4]*subscriber
	wake := b.publishLocked(t, ev, wakeBuf[:0])
	for i, s := range wake {
		// At most one direct delivery per event: the publisher (a run)
		// spends one non-blocking write on its subscribers, not one each.
		if i == 0 {
			s.deliver()
		} else {
			s.wake()
		}
	}
}

// publishLocked is publishTo under the shard lock; it returns the
// subscribers to wake, appended to wake.
func (b *broker) publishLocked(t *topic, ev *Event, wake []*subscriber) []*subscriber {
	var sh *brokerShard
	if t != nil && t.id == ev.SessionID {
		sh = t.sh
		sh.mu.Lock()
		if t.active == 0 { // released: it may be idle or gone
			t = sh.topicLocked(ev.SessionID)
		}
	} else {
		sh = b.lock(ev.SessionID)
		t = sh.topicLocked(ev.SessionID)
	}
	defer sh.mu.Unlock()
	if ev.Type == EventStepCompleted && ev.Step != nil && ev.Step.Sequence > t.seq {
		t.seq, t.idx = ev.Step.Sequence, 0
	} else {
		t.idx++
	}
	ev.Position = Position{Seq: t.seq, Idx: t.idx}
	if len(t.ring) >= b.ringSize {
		t.trimLocked(b.ringSize / 2)
	}
	t.ring = append(t.ring, ev)
	for _, s := range t.subs {
		if s.runID != "" && s.runID != ev.RunID {
			continue
		}
		if s.offer(ev) {
			wake = append(wake, s)
		}
	}
	b.settleLocked(sh, t)
	return wake
}

// subscribe registers a live subscriber and returns the buffered events
// after pos that are in the ring, and from where the store must be read:
// storeTo is the last sequence to read from the store (0: nothing, -1: to
// the end). direct, if not nil, is the subscriber's direct hook (see
// subscriber.deliver); the calling goroutine is then its consumer.
func (b *broker) subscribe(sessionID, runID string, pos Position, direct func(*Event) (taken, sent bool)) (s *subscriber, buffered []*Event, storeTo int64) {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	t := sh.topicLocked(sessionID)
	s = newSubscriber(runID, b.bufSize, direct)
	t.subs = append(t.subs, s)
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
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	if t := sh.topics[sessionID]; t != nil {
		if i := slices.Index(t.subs, s); i >= 0 {
			last := len(t.subs) - 1
			t.subs[i] = t.subs[last]
			t.subs[last] = nil
			t.subs = t.subs[:last]
		}
		b.settleLocked(sh, t)
	}
}

// poke makes every live subscriber of a session catch up from the store:
// another instance committed steps this broker has not seen.
func (b *broker) poke(sessionID string) {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	if t := sh.topics[sessionID]; t != nil {
		// Steps committed elsewhere are not in the ring: from now on the
		// ring covers nothing on its own and subscribers read the store.
		t.pokeLocked()
	}
}

// pokeLocked marks the ring incomplete and switches the topic's
// subscribers to catch-up.
func (t *topic) pokeLocked() {
	t.startKnown = false
	t.pokes++
	if t.resolving > 0 {
		t.heldPoke = true // see topic.resolving
		return
	}
	t.lagSubsLocked()
}

// lagSubsLocked switches the topic's subscribers to catch-up.
func (t *topic) lagSubsLocked() {
	for _, s := range t.subs {
		s.markLagged()
	}
}

// pokesOf returns the session's poke count, taken before a store read
// whose result is then passed to observe.
func (b *broker) pokesOf(sessionID string) uint64 {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	if t := sh.topics[sessionID]; t != nil {
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
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	t := sh.topics[sessionID]
	switch {
	case t == nil:
	case t.pokes == pokes:
		t.advanceLocked(seq)
	case seq > t.seq:
		t.seq, t.idx = seq, 0
	}
}

// pokeBehind pokes a session's subscribers unless this broker has already
// published or observed its steps up to seq (a commit of this process).
func (b *broker) pokeBehind(sessionID string, seq int64) {
	sh := b.lock(sessionID)
	t := sh.topics[sessionID]
	behind := t != nil && t.seq < seq
	sh.mu.Unlock()
	if behind {
		b.poke(sessionID)
	}
}

// pokeAll makes every live subscriber catch up from the store: changes may
// have been committed that no notification reported.
func (b *broker) pokeAll() {
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for _, t := range sh.topics {
			t.pokeLocked()
		}
		sh.mu.Unlock()
	}
}

// watch registers a subscriber of a run's live events used as a wake-up
// only (the client protocol re-reads the store when it fires).
func (b *broker) watch(sessionID, runID string) *subscriber {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	t := sh.topicLocked(sessionID)
	s := newSubscriber(runID, 64, nil)
	t.subs = append(t.subs, s)
	return s
}

// subscriberCount is the number of live subscribers (for tests and
// benchmarks).
func (b *broker) subscriberCount() int {
	n := 0
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for _, t := range sh.topics {
			n += len(t.subs)
		}
		sh.mu.Unlock()
	}
	return n
}
