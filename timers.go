package swim

import "time"

// Timers are data. Every pending timeout of the Machine is an entry in one
// queue ordered by deadline, carrying the tokens (sequence number, member,
// incarnation, generation) that identify what it is about. A timer is never
// cancelled: when the probe, relay, check or suspicion it belongs to ends,
// or is re-armed, the entry simply stops matching the state, and current
// drops it when it reaches the head. So NextDeadline is the head of the
// queue and Tick pops what is due, in deadline order, whatever the kind (as
// foca's timer events do).
//
// Two families share the queue:
//
//   - Instance timers, one or two per probe, relay, final or leave check,
//     suspicion and stream request, keyed by its sequence number, stream
//     id, or name and incarnation.
//   - Singleton timers, at most one current entry per kind: the periodic
//     work (probing, gossip, push-pull, reconnect, the heard-time sweep),
//     the heads of the lists whose entries all live the same time (the
//     dead members, the tombstones, the seeds) and the slices of a large
//     merge. Their token is the time they are armed for (armed[kind]).

type timerKind uint8

// Timers due at the same instant fire in this order (then in the order
// they were armed), so that a probe's indirect phase starts before its
// period is judged and a relay's nack goes before the relay is forgotten.
const (
	timerRelayNack     timerKind = iota // key: relay seq; tell the requester the target is silent
	timerRelayExpire                    // key: relay seq; forget the relay
	timerProbeTimeout                   // key: probe seq; the direct ping gave up: ask k relays
	timerProbeEnd                       // key: probe seq; the period is over: judge the probe
	timerPairCheck                      // key: member id, inc: round; a partner's Heartbeat is due
	timerProbe                          // singleton: start the next probe
	timerHeartbeat                      // singleton: send the round's Heartbeats
	timerCheckExpire                    // key: check seq, inc: generation; the verdict of a final or leave check
	timerCheckRetry                     // key: check seq, inc: generation; ping once more
	timerSuspicion                      // name, inc: incarnation; the suspicion ran out
	timerGossip                         // singleton: the next gossip round
	timerPushPull                       // singleton: the next anti-entropy exchange
	timerReconnect                      // singleton: the next reconnect attempt
	timerReap                           // singleton: the oldest dead member is forgotten
	timerTombs                          // singleton: the oldest tombstone is forgotten
	timerSeeds                          // singleton: the join seeds are forgotten
	timerHeardSweep                     // singleton: heard times are clamped (table.go)
	timerMerge                          // singleton: the next slice of a large merge
	timerStream                         // key: stream id; a request the driver never answered
	timerUserPing                       // key: ping seq; an application's ping got no answer
	timerConflictCheck                  // key: ping seq; a name-conflict check got no answer
	timerHoleAsk                        // name: a hole a join storm put off (joinstorm.go)
	timerKinds
)

// timer is one entry of the queue.
type timer struct {
	at    time.Time
	order uint64 // when it was armed, for ties
	key   uint64 // sequence number or stream id
	inc   uint64 // incarnation or generation
	name  string // the suspect, for a suspicion
	kind  timerKind
}

func (a *timer) before(b *timer) bool {
	if c := a.at.Compare(b.at); c != 0 {
		return c < 0
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.order < b.order
}

// timerQueue is a binary min-heap of timers. It is written out rather than
// built on container/heap so that pushing a timer, a value, allocates
// nothing beyond the slice's growth.
type timerQueue struct {
	h     []timer
	armed uint64 // timers armed so far: the next order
}

func (q *timerQueue) len() int { return len(q.h) }

func (q *timerQueue) push(t timer) {
	t.order = q.armed
	q.armed++
	q.h = append(q.h, t)
	for i := len(q.h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.h[i].before(&q.h[parent]) {
			break
		}
		q.h[i], q.h[parent] = q.h[parent], q.h[i]
		i = parent
	}
}

// head returns the earliest timer; the queue must not be empty.
func (q *timerQueue) head() *timer { return &q.h[0] }

// pop removes and returns the earliest timer; the queue must not be empty.
func (q *timerQueue) pop() timer {
	t := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = timer{}
	q.h = q.h[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < last && q.h[l].before(&q.h[small]) {
			small = l
		}
		if r < last && q.h[r].before(&q.h[small]) {
			small = r
		}
		if small == i {
			break
		}
		q.h[i], q.h[small] = q.h[small], q.h[i]
		i = small
	}
	return t
}

// after arms an instance timer.
func (m *Machine) after(at time.Time, kind timerKind, key, inc uint64, name string) {
	m.timers.push(timer{at: at, kind: kind, key: key, inc: inc, name: name})
}

// armAt arms the singleton timer of kind for at, unless it is armed already
// no later than that: firing early is harmless, every singleton's handler
// checks what is due and arms again.
func (m *Machine) armAt(kind timerKind, at time.Time) {
	if cur := m.armed[kind]; !cur.IsZero() && !cur.After(at) {
		return
	}
	m.armed[kind] = at
	m.timers.push(timer{at: at, kind: kind})
}

// armPeriodic arms the periodic timers whose work has become possible since
// they last fired or were dropped (see wanted). One that is armed stays as
// it is: whatever moves a periodic deadline earlier (gossipNow,
// scheduleFollowUps) arms it itself.
func (m *Machine) armPeriodic() {
	if m.armed[timerProbe].IsZero() && m.wanted(timerProbe) {
		m.armAt(timerProbe, m.nextProbe)
	}
	if m.armed[timerHeartbeat].IsZero() && m.wanted(timerHeartbeat) {
		m.armAt(timerHeartbeat, m.nextBeat)
	}
	if m.armed[timerGossip].IsZero() && m.wanted(timerGossip) {
		m.armAt(timerGossip, m.nextGossip)
	}
	if m.armed[timerPushPull].IsZero() && m.wanted(timerPushPull) {
		m.armAt(timerPushPull, m.nextPushPull)
	}
	if m.armed[timerReconnect].IsZero() && m.wanted(timerReconnect) {
		m.armAt(timerReconnect, m.nextReconnect)
	}
}

// wanted reports whether the work of a periodic timer is possible now:
// probing while alive, gossip while there is news and someone to tell,
// push-pull while there is a peer, reconnect while there is someone to
// reconnect to. A periodic timer whose work is not possible is dropped
// rather than woken for nothing, and armed again once it is.
func (m *Machine) wanted(kind timerKind) bool {
	alive := m.self.state() == StateAlive
	switch kind {
	case timerProbe:
		return alive && m.probingIn(m.probeRound)
	case timerHeartbeat:
		return alive && m.pairable()
	case timerGossip:
		return m.cfg.GossipInterval > 0 && m.bq.Len()+m.uq.Len() > 0 && m.gossipTargets() > 0
	case timerPushPull:
		return alive && m.cfg.PushPullInterval > 0 && m.numOthers() > 0
	case timerReconnect:
		return alive && m.reconnectWanted()
	}
	return true
}

// singleton reports whether timers of kind are singletons, armed with
// armAt.
func singleton(kind timerKind) bool {
	switch kind {
	case timerProbe, timerHeartbeat, timerGossip, timerPushPull, timerReconnect, timerReap,
		timerTombs, timerSeeds, timerHeardSweep, timerMerge:
		return true
	}
	return false
}

// current reports whether t still stands for pending work, by its tokens.
func (m *Machine) current(t *timer) bool {
	switch t.kind {
	case timerRelayNack:
		rl := m.relays[uint32(t.key)]
		return rl != nil && !rl.nacked
	case timerRelayExpire:
		return m.relays[uint32(t.key)] != nil
	case timerProbeTimeout:
		p := m.findProbe(uint32(t.key))
		return p != nil && !p.indirect
	case timerProbeEnd:
		return m.findProbe(uint32(t.key)) != nil
	case timerPairCheck:
		return m.pairCheckPending(uint32(t.key), int64(t.inc))
	case timerCheckExpire:
		fc := m.finalChecks[uint32(t.key)]
		return fc != nil && fc.gen == t.inc
	case timerCheckRetry:
		fc := m.finalChecks[uint32(t.key)]
		return fc != nil && fc.gen == t.inc && !fc.retried
	case timerSuspicion:
		s := m.suspicions[t.name]
		return s != nil && s.incarnation == t.inc && s.deadline.Equal(t.at)
	case timerStream:
		_, ok := m.streams[t.key]
		return ok
	case timerUserPing:
		return m.userPings[uint32(t.key)] != nil
	case timerConflictCheck:
		_, ok := m.conflictChecks[uint32(t.key)]
		return ok
	case timerHoleAsk:
		d, ok := m.holes.deferred[t.name]
		return ok && d.due.Equal(t.at)
	}
	if !singleton(t.kind) || !m.armed[t.kind].Equal(t.at) {
		return false
	}
	if !m.wanted(t.kind) {
		m.armed[t.kind] = time.Time{}
		return false
	}
	return true
}

// NextDeadline is when Tick must next be called; zero means no timer is
// armed. It may be in the past, meaning: now.
func (m *Machine) NextDeadline() time.Time {
	m.armPeriodic()
	for m.timers.len() > 0 {
		if t := m.timers.head(); m.current(t) {
			return t.at
		}
		m.timers.pop()
	}
	return time.Time{}
}

// Tick fires every timer due at now, earliest first.
func (m *Machine) Tick(now time.Time) {
	m.armPeriodic()
	for m.timers.len() > 0 && !m.timers.head().at.After(now) {
		t := m.timers.pop()
		if !m.current(&t) {
			continue
		}
		if singleton(t.kind) {
			m.armed[t.kind] = time.Time{}
		}
		m.fire(now, &t)
	}
	// A large merge applies one slice per Tick: the next is armed for now
	// after the loop, so that it waits for the next call instead of
	// running in this one.
	if len(m.merges) > 0 {
		m.armAt(timerMerge, now)
	}
}

// fire does the work of a current timer.
func (m *Machine) fire(now time.Time, t *timer) {
	switch t.kind {
	case timerRelayNack:
		m.relayNack(m.relays[uint32(t.key)])
	case timerRelayExpire:
		delete(m.relays, uint32(t.key))
	case timerProbeTimeout:
		m.startIndirect(now, m.findProbe(uint32(t.key)))
	case timerProbeEnd:
		p := m.findProbe(uint32(t.key))
		m.removeProbe(p)
		m.probeEnded(now, t.at, p)
	case timerPairCheck:
		m.checkPartner(uint32(t.key), int64(t.inc))
	case timerProbe:
		m.tickProbe(now)
	case timerHeartbeat:
		m.tickHeartbeat(now)
	case timerCheckExpire:
		m.expireCheck(now, t.at, m.finalChecks[uint32(t.key)])
	case timerCheckRetry:
		m.retryCheck(now, t.at, m.finalChecks[uint32(t.key)])
	case timerSuspicion:
		m.expireSuspicion(now, m.suspicions[t.name])
	case timerGossip:
		m.tickGossip(now)
	case timerPushPull:
		m.tickPushPull(now)
	case timerReconnect:
		m.tickReconnect(now)
	case timerReap:
		m.reap(now)
	case timerTombs:
		m.expireTombs(now)
	case timerSeeds:
		m.expireSeeds(now)
	case timerHoleAsk:
		m.askDeferredHole(now, t.name)
	case timerHeardSweep:
		m.sweepHeard(now)
	case timerMerge:
		m.tickMerges(now)
	case timerStream:
		m.expireStream(now, t.key)
	case timerUserPing:
		m.expirePing(uint32(t.key))
	case timerConflictCheck:
		delete(m.conflictChecks, uint32(t.key))
	}
}
