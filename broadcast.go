package swim

import (
	"net/netip"
	"slices"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// queued is one delta waiting to be piggybacked, a membership change or
// an application's broadcast gossiped: an encoded frame plus how often it
// has been sent.
type queued struct {
	key       string // a newer delta with the same key replaces this one
	frame     []byte
	transmits int
	// lastPacket stamps the packet that last took this delta, so one packet
	// never carries it twice while it moves between buckets.
	lastPacket uint64
	removed    bool
	// lazy: join news in a storm, which opens no gossip round of its own
	// (joinstorm.go).
	lazy bool
	// proto is the protocol version a receiver must speak to be sent this
	// delta (wire.Versions); 1, every member, for all but new kinds.
	proto uint8
	// An application's broadcast: its place in its origin's order, so that
	// an older one never replaces a newer one with the same key; and, at
	// its origin, the id under which its fate is reported (0: none).
	epoch      uint64
	seq        uint32
	notify     uint64
	prev, next *queued
}

// bucketList is an intrusive doubly linked list of queued deltas with the
// same transmit count, newest at the head.
type bucketList struct {
	head, tail *queued
	n          int
}

func (l *bucketList) pushFront(b *queued) {
	b.prev, b.next = nil, l.head
	if l.head != nil {
		l.head.prev = b
	} else {
		l.tail = b
	}
	l.head = b
	l.n++
}

func (l *bucketList) remove(b *queued) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		l.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		l.tail = b.prev
	}
	b.prev, b.next = nil, nil
	l.n--
}

// piggybackQueue is the bounded piggyback queue (SWIM §4.1,
// "infection-style dissemination"). Deltas are taken fewest-transmitted
// first, newest first among equals, so fresh news spreads before old news
// is repeated. Each delta is sent a limited number of times,
// RetransmitMult·max(2, ceil(log10(N+1))) (retransmitLimit, machine.go),
// which reaches every member with high probability in O(log N) periods. A
// newer delta about a member invalidates the queued one. When the queue is
// over its limits (a count, and for applications' broadcasts bytes too),
// the deltas sent most often go first.
type piggybackQueue struct {
	buckets   []bucketList // index: transmit count
	byKey     map[string]*queued
	n         int
	bytes     int // of the frames queued
	peak      int // most deltas pending since byKey was last made
	limit     int
	byteLimit int // 0: none
	packet    uint64
	dropped   uint64
	lazy      int // queued deltas that are lazy
	// done collects the fates of the deltas that carry a notify id, for
	// the Machine to report (Ready.Outcomes).
	done []Outcome
}

func newPiggybackQueue(limit, byteLimit int) *piggybackQueue {
	return &piggybackQueue{byKey: make(map[string]*queued), limit: limit, byteLimit: byteLimit}
}

// Len is the number of pending deltas.
func (q *piggybackQueue) Len() int { return q.n }

func (q *piggybackQueue) bucket(i int) *bucketList {
	for len(q.buckets) <= i {
		q.buckets = append(q.buckets, bucketList{})
	}
	return &q.buckets[i]
}

// queue adds a delta about key, replacing any pending delta about it, and
// returns it so the caller can watch it (a leave waits until it was sent).
func (q *piggybackQueue) queue(key string, frame []byte) *queued {
	b := &queued{key: key, frame: frame, proto: 1}
	q.add(b)
	return b
}

// queueOrdered adds b unless a delta with its key is queued that comes
// later in its origin's order (epoch, seq), which it must not replace; it
// reports whether b was queued.
func (q *piggybackQueue) queueOrdered(b *queued) bool {
	if old, ok := q.byKey[b.key]; ok && (old.epoch > b.epoch || old.epoch == b.epoch && old.seq >= b.seq) {
		return false
	}
	q.add(b)
	return true
}

func (q *piggybackQueue) add(b *queued) {
	if old, ok := q.byKey[b.key]; ok {
		q.unlink(old)
		q.finish(old, ErrBroadcastReplaced)
	}
	q.byKey[b.key] = b
	q.bucket(0).pushFront(b)
	q.n++
	q.bytes += len(b.frame)
	q.peak = max(q.peak, q.n)
	for q.n > q.limit || q.byteLimit > 0 && q.bytes > q.byteLimit {
		q.dropMostSent()
	}
}

// finish records the fate of b, if its origin waits for it.
func (q *piggybackQueue) finish(b *queued, err error) {
	if b.notify != 0 {
		q.done = append(q.done, Outcome{ID: b.notify, Err: err})
		b.notify = 0
	}
}

// finishAll retires every queued delta as sent: none is left to send it
// to (the applications' broadcasts once no member reads gossip, tree.go).
func (q *piggybackQueue) finishAll() {
	for i := range q.buckets {
		for b := q.buckets[i].head; b != nil; {
			next := b.next
			q.unlink(b)
			q.finish(b, nil)
			b = next
		}
	}
}

// takeDone returns the fates recorded since the last call.
func (q *piggybackQueue) takeDone() []Outcome {
	d := q.done
	q.done = nil
	return d
}

// markLazy marks b, just queued, as lazy.
func (q *piggybackQueue) markLazy(b *queued) {
	if b != nil && !b.lazy && !b.removed {
		b.lazy = true
		q.lazy++
	}
}

func (q *piggybackQueue) unlink(b *queued) {
	q.bucket(b.transmits).remove(b)
	q.forget(b)
}

// forget drops b, already out of its bucket, from the index and counts.
func (q *piggybackQueue) forget(b *queued) {
	if q.byKey[b.key] == b {
		delete(q.byKey, b.key)
	}
	b.removed = true
	if b.lazy {
		q.lazy--
	}
	q.n--
	q.bytes -= len(b.frame)
	q.shrinkIfEmpty()
}

// shrinkIfEmpty replaces the index of an emptied queue that once held many
// deltas: Go maps never give back their buckets, and after a join storm
// every member of a large cluster would otherwise hold an index sized for
// the whole cluster.
func (q *piggybackQueue) shrinkIfEmpty() {
	if q.n == 0 && q.peak > 64 {
		q.byKey = make(map[string]*queued)
		q.peak = 0
	}
}

func (q *piggybackQueue) dropMostSent() {
	for i := len(q.buckets) - 1; i >= 0; i-- {
		if t := q.buckets[i].tail; t != nil {
			q.unlink(t)
			q.dropped++
			q.finish(t, ErrBroadcastDropped)
			return
		}
	}
}

// dropMostSentLazy drops the lazy delta sent most often, the oldest among
// equals; it reports false when none is queued.
func (q *piggybackQueue) dropMostSentLazy() bool {
	for i := len(q.buckets) - 1; i >= 0; i-- {
		for b := q.buckets[i].tail; b != nil; b = b.prev {
			if b.lazy {
				q.unlink(b)
				return true
			}
		}
	}
	return false
}

// minFrame is the smallest frame worth looking for once a packet is nearly
// full; below it the scan stops early.
const minFrame = 8

// maxSkips bounds how many deltas too large for the remaining space one take
// looks past, keeping a take cheap when the queue is long.
const maxSkips = 32

// take appends to frames the deltas that fit in budget bytes (counting the
// compound framing overhead per frame) and that a receiver speaking up to
// protocol proto reads, counting one transmission for each, and retires
// those sent limit times. It returns the frames and the bytes used.
func (q *piggybackQueue) take(frames [][]byte, budget, limit int, proto uint8) ([][]byte, int) {
	q.packet++
	return q.takeMore(frames, budget, limit, proto)
}

// takeMore is take for the packet the last take began: a delta that one
// took is not taken again.
func (q *piggybackQueue) takeMore(frames [][]byte, budget, limit int, proto uint8) ([][]byte, int) {
	if q.n == 0 {
		return frames, 0
	}
	used, skips := 0, 0
	for i := 0; i < len(q.buckets) && skips < maxSkips; i++ {
		for b := q.buckets[i].head; b != nil && skips < maxSkips; {
			next := b.next
			if b.lastPacket == q.packet {
				b = next
				continue
			}
			size := len(b.frame) + wire.FrameOverheadMax
			if used+size > budget || b.proto > proto {
				skips++
				b = next
				continue
			}
			if len(frames) >= wire.MaxCompoundParts {
				return frames, used
			}
			frames = append(frames, b.frame)
			used += size
			b.lastPacket = q.packet
			q.buckets[i].remove(b)
			b.transmits++
			if b.transmits >= limit || b.lazy && b.transmits >= lazyLimit(limit) {
				q.forget(b)
				q.finish(b, nil)
			} else {
				q.bucket(b.transmits).pushFront(b)
			}
			if budget-used < minFrame+wire.FrameOverheadMax {
				return frames, used
			}
			b = next
		}
	}
	return frames, used
}

// piggyback appends to frames the pending deltas that fit in budget bytes
// of a packet to `to`: membership deltas and applications' broadcasts. The
// fair budget: each kind is sure of half the budget whatever the other
// holds, and may use what the other leaves. Membership deltas go first, up
// to half; broadcasts then take what is left; membership deltas then take
// what the broadcasts left. So a cluster whose membership churns still
// carries applications' data (at 2,500 members, membership news alone can
// fill every packet), and a flood of broadcasts never holds back a
// suspicion or a refutation by more than half a packet's room. Broadcasts
// go by gossip only to members that read no trees (tree.go); announcements
// of the trees take what room is left.
func (m *Machine) piggyback(frames [][]byte, budget int, to netip.AddrPort) [][]byte {
	proto := m.protocolAt(to)
	limit := m.retransmitLimit()
	if m.uq.Len() == 0 || proto < wire.ProtocolUser || m.treeOn() && proto >= wire.ProtocolTree {
		frames, used := m.bq.take(frames, budget, limit, proto)
		return m.treePiggyback(frames, budget-used, to)
	}
	frames, used := m.bq.take(frames, budget/2, limit, proto)
	frames, more := m.uq.take(frames, budget-used, limit, proto)
	used += more
	frames, more = m.bq.takeMore(frames, budget-used, limit, proto)
	return m.treePiggyback(frames, budget-used-more, to)
}

// tickGossip sends pending deltas to GossipNodes random members every
// GossipInterval, so news spreads in a few hundred milliseconds per hop
// instead of one hop per probe period; an idle cluster sends nothing here.
// Members recently declared dead are among the targets, so one that was
// wrongly declared dead learns it and refutes.
func (m *Machine) tickGossip(now time.Time) {
	if m.cfg.GossipInterval <= 0 || now.Before(m.timers.due[timerGossip]) || m.bq.Len()+m.uq.Len() == 0 {
		return
	}
	if m.roundsPaced() {
		if at := m.lastGossipRound.Add(m.joinStormGap()); now.Before(at) {
			m.schedule(timerGossip, at)
			return
		}
	}
	m.lastGossipRound = now
	m.ownNews = false
	m.timers.due[timerGossip] = now.Add(m.cfg.GossipInterval)
	if m.bq.Len() > 0 {
		m.lastMemberGossip = now
	}
	fanout := m.cfg.GossipNodes
	if m.urgent {
		// News of a death this member declared itself goes out with a
		// wider first round: everyone is waiting on it, and it is rare.
		fanout *= 3
		m.urgent = false
	}
	m.gossip(fanout)
}

// gossipNow moves the next gossip round to now: news that everyone waits
// on (a death we declared, our leave).
func (m *Machine) gossipNow(now time.Time) {
	m.schedule(timerGossip, now)
}

// gossip sends pending deltas to fanout random members.
func (m *Machine) gossip(fanout int) {
	if m.gossipTargets() == 0 {
		return
	}
	// Draw from the ring (which holds this member too) and the dead list.
	n := m.ring.len() + m.dead.slotCount()
	picked := m.pickScratch[:0]
	for attempts := 0; len(picked) < fanout && attempts < 4*fanout+8; attempts++ {
		i := m.rng.IntN(n)
		var s *memberState
		if i < m.ring.len() {
			if s = m.entry(m.ring.at(i)); s == m.self {
				continue
			}
		} else if d, ok := m.dead.at(i - m.ring.len()); !ok {
			continue // a hole the list has not compacted yet
		} else if s = m.entry(d.id); s.state() != StateDead {
			continue
		}
		if slices.Contains(picked, s) {
			continue
		}
		picked = append(picked, s)
	}
	for _, s := range picked {
		// Nothing sent: nothing left, unless this target's release
		// reads none of the broadcasts waiting.
		if !m.sendGossip(m.addrOf(s)) && m.bq.Len() == 0 && m.protocolAt(m.addrOf(s)) >= wire.ProtocolUser {
			break
		}
	}
	clear(picked)
	m.pickScratch = picked[:0]
}

// gossipTargets is the size of the pool gossip picks from: live members and
// those still within GossipToDeadTime of their death.
func (m *Machine) gossipTargets() int { return m.numOthers() + m.dead.len() }
