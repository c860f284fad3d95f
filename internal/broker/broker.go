package broker

import (
	"container/list"
	"slices"
	"sync"

	"github.com/stepwise-run/stepwise/steptype"
)

// Broker fans events out to live subscribers of a session and assigns each
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
type Broker struct {
	shards   [shardCount]brokerShard
	ringSize int
	idleRing int // events an idle Topic keeps
	maxIdle  int // idle topics kept per shard
	bufSize  int
}

// shardCount is the number of shards of the broker (a power of two).
const shardCount = 64

type brokerShard struct {
	mu     sync.Mutex
	topics map[string]*Topic
	idle   *list.List // idle topics, least recently used first
	_      [64]byte   // keeps shards' mutexes on separate cache lines
}

// Topic is the broker's state of one session: its positions, its ring of
// recent events and its live subscribers. An execution holds the topic
// Acquire returned and publishes into it (PublishTo).
type Topic struct {
	id       string
	seq, idx int64
	ring     []*steptype.Event // recent events, oldest first, at most ringSize
	// start is the position just before ring[0] when known: every event
	// after start is in the ring. Unknown (the topic was created without
	// knowing the session's last sequence) until an execution acquires it.
	start      steptype.Position
	startKnown bool
	// pokes counts the pokes: a store read that a poke overtook does not
	// make the ring complete again (see observe).
	pokes  uint64
	subs   []*Subscriber // a slice: publishing ranges over it per event
	active int           // executions publishing into the Topic
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

// New returns a broker with its default ring and buffer sizes.
func New() *Broker {
	b := &Broker{ringSize: 512, idleRing: 8, maxIdle: 32, bufSize: 1024}
	for i := range b.shards {
		b.shards[i].topics = map[string]*Topic{}
		b.shards[i].idle = list.New()
	}
	return b
}

// lock returns the shard of a session, locked.
func (b *Broker) lock(sessionID string) *brokerShard {
	sh := &b.shards[shardIndex(sessionID)]
	sh.mu.Lock()
	return sh
}

// topicLocked returns the session's topic, creating it, and marks it busy.
func (sh *brokerShard) topicLocked(sessionID string) *Topic {
	t := sh.topics[sessionID]
	if t == nil {
		t = &Topic{id: sessionID, sh: sh}
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
func (b *Broker) settleLocked(sh *brokerShard, t *Topic) {
	if t.active > 0 || len(t.subs) > 0 || t.resolving > 0 || t.idleElem != nil {
		return
	}
	t.trimLocked(b.idleRing)
	t.idleElem = sh.idle.PushBack(t)
	for sh.idle.Len() > b.maxIdle {
		old := sh.idle.Remove(sh.idle.Front()).(*Topic)
		old.idleElem = nil
		delete(sh.topics, old.id)
	}
}

// trimLocked keeps the last n events of the ring, in place unless the ring
// is much larger than needed (an idle topic gives its memory back).
func (t *Topic) trimLocked(n int) {
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
	kept := make([]*steptype.Event, n, max(n, 16))
	copy(kept, t.ring[drop:])
	t.ring = kept
}

// Acquire marks an execution publishing into a session whose last committed
// sequence is lastSeq. It returns the session's topic, which stays the
// session's until the matching release: the execution publishes into it
// (publishTo) without looking it up per event.
//
// An execution that resumes a run whose answer this process has committed
// but not published yet waits for that publication (bounded by the
// answer's commit): its steps come after the answer (see topic.resolving).
func (b *Broker) Acquire(sessionID string, lastSeq int64) *Topic {
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
// Topic had no ring yet, the ring starts here. Steps past the last this
// broker published or observed were committed elsewhere and never reached
// its subscribers: they are sent to the store for them (a poke) before the
// next event, positioned after those steps, could make them skip them.
func (t *Topic) advanceLocked(seq int64) {
	if seq > t.seq {
		if len(t.subs) > 0 {
			t.pokeLocked()
		}
		t.seq, t.idx = seq, 0
	}
	if len(t.ring) == 0 {
		t.start, t.startKnown = steptype.Position{Seq: t.seq, Idx: t.idx}, true
	}
}

// Release ends an acquire.
func (b *Broker) Release(sessionID string) {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	if t := sh.topics[sessionID]; t != nil {
		t.active--
		b.settleLocked(sh, t)
	}
}

// BeginResolution is called before the commit of an answer in a session;
// publishResolution ends it. In between, pokes of the session are held and
// executions of the session wait in acquire (see topic.resolving).
func (b *Broker) BeginResolution(sessionID string) {
	sh := b.lock(sessionID)
	t := sh.topicLocked(sessionID)
	if t.resolving++; t.resolving == 1 {
		t.resolved = make(chan struct{})
	}
	sh.mu.Unlock()
}

// PublishResolution publishes the step_completed event of a step resolved
// after its commit (an answer), then applies the pokes held since
// beginResolution; ev nil (the answer failed) only does the latter. When
// this broker never saw the step's commit (another instance made it, and
// its notification has not been handled here yet), the topic is behind the
// store: its subscribers are sent to the store first (they read the steps
// up to the resolved one, which they may not have yet), and the resolution
// is positioned after the commit's (seq, 0), never at it, or a subscriber
// that read the step from the store would take it for the commit it has
// and drop it.
func (b *Broker) PublishResolution(sessionID string, ev *steptype.Event) {
	if ev != nil {
		sh := b.lock(sessionID)
		if t := sh.topicLocked(sessionID); t.seq < ev.Step.Sequence {
			t.startKnown = false
			t.pokes++
			t.lagSubsLocked()
			t.advanceLocked(ev.Step.Sequence)
		}
		sh.mu.Unlock()
		b.Publish(ev)
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

// Publish assigns ev its position and delivers it. A subscriber whose buffer
// is full is marked lagged and stops receiving; it catches up from the store.
func (b *Broker) Publish(ev *steptype.Event) { b.PublishTo(nil, ev) }

// PublishTo is publish into the topic acquire returned for ev's session
// (nil: look it up). A topic no longer acquired may have left the
// session's shard: then it is looked up too.
func (b *Broker) PublishTo(t *Topic, ev *steptype.Event) {
	// Consumers are woken after the shard is unlocked: waking a goroutine
	// is a scheduler call, and every other session of the shard would wait
	// on it.
	var wakeBuf [4]*Subscriber
	wake := b.publishLocked(t, ev, wakeBuf[:0])
	for i, s := range wake {
		// At most one direct delivery per event: the publisher (a run)
		// spends one non-blocking write on its subscribers, not one each.
		if i == 0 {
			s.deliver()
		} else {
			s.Wake()
		}
	}
}

// publishLocked is publishTo under the shard lock; it returns the
// subscribers to wake, appended to wake.
func (b *Broker) publishLocked(t *Topic, ev *steptype.Event, wake []*Subscriber) []*Subscriber {
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
	if ev.Type == steptype.EventStepCompleted && ev.Step != nil && ev.Step.Sequence > t.seq {
		t.seq, t.idx = ev.Step.Sequence, 0
	} else {
		t.idx++
	}
	ev.Position = steptype.Position{Seq: t.seq, Idx: t.idx}
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

// Subscribe registers a live subscriber and returns the buffered events
// after pos that are in the ring, and from where the store must be read:
// storeTo is the last sequence to read from the store (0: nothing, -1: to
// the end). direct, if not nil, is the subscriber's direct hook (see
// Subscriber.deliver); the calling goroutine is then its consumer.
func (b *Broker) Subscribe(sessionID, runID string, pos steptype.Position, direct func(*steptype.Event) (taken, sent bool)) (s *Subscriber, buffered []*steptype.Event, storeTo int64) {
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

func (b *Broker) Unsubscribe(sessionID string, s *Subscriber) {
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

// Poke makes every live subscriber of a session catch up from the store:
// another instance committed steps this broker has not seen.
func (b *Broker) Poke(sessionID string) {
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
func (t *Topic) pokeLocked() {
	t.startKnown = false
	t.pokes++
	if t.resolving > 0 {
		t.heldPoke = true // see Topic.resolving
		return
	}
	t.lagSubsLocked()
}

// lagSubsLocked switches the topic's subscribers to catch-up.
func (t *Topic) lagSubsLocked() {
	for _, s := range t.subs {
		s.MarkLagged()
	}
}

// PokesOf returns the session's poke count, taken before a store read
// whose result is then passed to observe.
func (b *Broker) PokesOf(sessionID string) uint64 {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	if t := sh.topics[sessionID]; t != nil {
		return t.pokes
	}
	return 0
}

// Observe records that the store holds steps up to seq (seen by a
// Subscriber catching up), so that events published here afterwards are
// positioned after them even when another instance committed them. pokes is
// the count taken before the read: when a poke came in since, steps were
// committed elsewhere after the read and the ring does not cover them, so
// it is not marked complete.
func (b *Broker) Observe(sessionID string, seq int64, pokes uint64) {
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

// PokeBehind pokes a session's subscribers unless this broker has already
// published or observed its steps up to seq (a commit of this process).
func (b *Broker) PokeBehind(sessionID string, seq int64) {
	sh := b.lock(sessionID)
	t := sh.topics[sessionID]
	behind := t != nil && t.seq < seq
	sh.mu.Unlock()
	if behind {
		b.Poke(sessionID)
	}
}

// PokeAll makes every live subscriber catch up from the store: changes may
// have been committed that no notification reported.
func (b *Broker) PokeAll() {
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for _, t := range sh.topics {
			t.pokeLocked()
		}
		sh.mu.Unlock()
	}
}

// Watch registers a subscriber of a run's live events used as a wake-up
// only (the client protocol re-reads the store when it fires).
func (b *Broker) Watch(sessionID, runID string) *Subscriber {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	t := sh.topicLocked(sessionID)
	s := newSubscriber(runID, 64, nil)
	t.subs = append(t.subs, s)
	return s
}

// SubscriberCount is the number of live subscribers (for tests and
// benchmarks).
func (b *Broker) SubscriberCount() int {
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

// Subscribers returns the live subscribers of a session (for tests).
func (b *Broker) Subscribers(sessionID string) []*Subscriber {
	sh := b.lock(sessionID)
	defer sh.mu.Unlock()
	if t := sh.topics[sessionID]; t != nil {
		return slices.Clone(t.subs)
	}
	return nil
}
