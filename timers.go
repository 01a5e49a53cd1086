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
//     address check, suspicion and stream request, keyed by its sequence
//     number, stream id, or name and incarnation.
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
	timerRelayNack      timerKind = iota // key: relay seq; tell the requester the target is silent
	timerRelayExpire                     // key: relay seq; forget the relay
	timerProbeTimeout                    // key: probe seq; the direct ping gave up: ask k relays
	timerProbeEnd                        // key: probe seq; the period is over: judge the probe
	timerPairCheck                       // key: member id, inc: round; a partner's Heartbeat is due
	timerProbe                           // singleton: start the next probe
	timerHeartbeat                       // singleton: send the round's Heartbeats
	timerCheckExpire                     // key: check seq, inc: generation; the verdict of a final or leave check
	timerCheckRetry                      // key: check seq, inc: generation; ping once more
	timerSuspicion                       // name, inc: incarnation; the suspicion ran out
	timerGossip                          // singleton: the next gossip round
	timerPushPull                        // singleton: the next anti-entropy exchange
	timerReconnect                       // singleton: the next reconnect attempt
	timerReap                            // singleton: the oldest dead member is forgotten
	timerTombs                           // singleton: the oldest tombstone is forgotten
	timerSeeds                           // singleton: the join seeds are forgotten
	timerHeardSweep                      // singleton: heard times are clamped (table.go)
	timerMerge                           // singleton: the next slice of a large merge
	timerStream                          // key: stream id; a request the driver never answered
	timerUserPing                        // key: ping seq; an application's ping got no answer
	timerAddrCheck                       // key: ping seq, inc: its addrCheckKind; an address check's deadline (addrcheck.go)
	timerHoleAsk                         // name: a hole a join storm put off (joinstorm.go)
	timerLeaveNotices                    // singleton: the leave notices not acknowledged are sent again (lifecycle.go)
	timerTreeFlush                       // singleton: the tree links' queues are sent (tree.go)
	timerTreeGraft                       // key: broadcast id, inc: tries; an announced broadcast is still missing (tree.go)
	timerRestartNotices                  // singleton: this member's restart is told to every member (lives.go)
	timerKinds
)

// timer is one entry of the queue.
type timer struct {
	at    time.Time
	order uint64 // when it was armed, for ties
	key   uint64 // sequence number or stream id
	inc   uint64 // incarnation, generation or kind of address check
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
	h      []timer
	pushed uint64 // timers pushed so far: the next order

	// armed is the time the one entry of each singleton kind is armed
	// for, its token (zero: none is queued); due is when the work of each
	// periodic kind is next due. The entry may be armed earlier than the
	// work is due (firing early is harmless: the handler checks due and
	// the timer is armed again), or dropped while the work is not wanted
	// and armed again at due once it is (armPeriodic).
	armed [timerKinds]time.Time
	due   [timerKinds]time.Time
}

func (q *timerQueue) len() int { return len(q.h) }

func (q *timerQueue) push(t timer) {
	t.order = q.pushed
	q.pushed++
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
	if cur := m.timers.armed[kind]; !cur.IsZero() && !cur.After(at) {
		return
	}
	m.timers.armed[kind] = at
	m.timers.push(timer{at: at, kind: kind})
}

// schedule sets when the periodic work of kind is next due and arms its
// timer for then, for work that became due sooner than planned.
func (m *Machine) schedule(kind timerKind, at time.Time) {
	m.timers.due[kind] = at
	m.armAt(kind, at)
}

// timerSpec is what one kind of timer is: the table below holds the whole
// behaviour of each kind, so a new kind is a constant and an entry.
type timerSpec struct {
	// singleton: at most one current entry, armed with armAt, whose token
	// is the time it is armed for; otherwise an instance timer, armed with
	// after, whose tokens current checks.
	singleton bool
	// periodic (singletons only): the work recurs at timers.due; wanted
	// says whether it is possible now. A periodic timer whose work is not
	// possible is dropped rather than woken for nothing, and armed again
	// once it is (armPeriodic).
	periodic bool
	wanted   func(m *Machine) bool
	// current (instance timers only) reports whether the entry still
	// stands for pending work, by its tokens.
	current func(m *Machine, t *timer) bool
	// fire does the work of a current timer.
	fire func(m *Machine, now time.Time, t *timer)
}

// timerSpecs is the behaviour of every kind of timer. It is filled in
// init because the handlers it names arm timers in turn.
var timerSpecs [timerKinds]timerSpec

func init() {
	alive := func(m *Machine) bool { return m.self.state() == StateAlive }
	relay := func(m *Machine, t *timer) *relay { return m.relays[uint32(t.key)] }
	check := func(m *Machine, t *timer) *finalCheck { return m.finalChecks[uint32(t.key)] }
	timerSpecs = [timerKinds]timerSpec{
		timerRelayNack: {
			current: func(m *Machine, t *timer) bool { rl := relay(m, t); return rl != nil && !rl.nacked },
			fire:    func(m *Machine, _ time.Time, t *timer) { m.relayNack(relay(m, t)) },
		},
		timerRelayExpire: {
			current: func(m *Machine, t *timer) bool { return relay(m, t) != nil },
			fire:    func(m *Machine, now time.Time, t *timer) { m.relayExpired(now, relay(m, t)) },
		},
		timerProbeTimeout: {
			current: func(m *Machine, t *timer) bool { p := m.findProbe(uint32(t.key)); return p != nil && !p.indirect },
			fire:    func(m *Machine, now time.Time, t *timer) { m.startIndirect(now, m.findProbe(uint32(t.key))) },
		},
		timerProbeEnd: {
			current: func(m *Machine, t *timer) bool { return m.findProbe(uint32(t.key)) != nil },
			fire: func(m *Machine, now time.Time, t *timer) {
				p := m.findProbe(uint32(t.key))
				m.removeProbe(p)
				m.probeEnded(now, t.at, p)
			},
		},
		timerPairCheck: {
			current: func(m *Machine, t *timer) bool { return m.pairCheckPending(uint32(t.key), int64(t.inc)) },
			fire:    func(m *Machine, _ time.Time, t *timer) { m.checkPartner(uint32(t.key), int64(t.inc)) },
		},
		timerProbe: {
			singleton: true, periodic: true,
			wanted: func(m *Machine) bool { return alive(m) && m.probingIn(m.probeRound) },
			fire:   func(m *Machine, now time.Time, _ *timer) { m.tickProbe(now) },
		},
		timerHeartbeat: {
			singleton: true, periodic: true,
			wanted: func(m *Machine) bool { return alive(m) && m.pairable() },
			fire:   func(m *Machine, now time.Time, _ *timer) { m.tickHeartbeat(now) },
		},
		timerCheckExpire: {
			current: func(m *Machine, t *timer) bool { fc := check(m, t); return fc != nil && fc.gen == t.inc },
			fire:    func(m *Machine, now time.Time, t *timer) { m.expireCheck(now, t.at, check(m, t)) },
		},
		timerCheckRetry: {
			current: func(m *Machine, t *timer) bool { fc := check(m, t); return fc != nil && fc.gen == t.inc && !fc.retried },
			fire:    func(m *Machine, now time.Time, t *timer) { m.retryCheck(now, t.at, check(m, t)) },
		},
		timerSuspicion: {
			current: func(m *Machine, t *timer) bool {
				s := m.suspicions[t.name]
				return s != nil && s.incarnation == t.inc && s.deadline.Equal(t.at)
			},
			fire: func(m *Machine, now time.Time, t *timer) { m.expireSuspicion(now, m.suspicions[t.name]) },
		},
		timerGossip: {
			singleton: true, periodic: true,
			wanted: func(m *Machine) bool {
				return m.cfg.GossipInterval > 0 && m.bq.Len()+m.uq.Len() > 0 && m.gossipTargets() > 0
			},
			fire: func(m *Machine, now time.Time, _ *timer) { m.tickGossip(now) },
		},
		timerPushPull: {
			singleton: true, periodic: true,
			wanted: func(m *Machine) bool { return alive(m) && m.cfg.PushPullInterval > 0 && m.numOthers() > 0 },
			fire:   func(m *Machine, now time.Time, _ *timer) { m.tickPushPull(now) },
		},
		timerReconnect: {
			singleton: true, periodic: true,
			wanted: func(m *Machine) bool { return alive(m) && m.reconnectWanted() },
			fire:   func(m *Machine, now time.Time, _ *timer) { m.tickReconnect(now) },
		},
		timerReap:         {singleton: true, fire: func(m *Machine, now time.Time, _ *timer) { m.reap(now) }},
		timerTombs:        {singleton: true, fire: func(m *Machine, now time.Time, _ *timer) { m.expireTombs(now) }},
		timerSeeds:        {singleton: true, fire: func(m *Machine, now time.Time, _ *timer) { m.expireSeeds(now) }},
		timerHeardSweep:   {singleton: true, fire: func(m *Machine, now time.Time, _ *timer) { m.sweepHeard(now) }},
		timerMerge:        {singleton: true, fire: func(m *Machine, now time.Time, _ *timer) { m.tickMerges(now) }},
		timerLeaveNotices: {singleton: true, fire: func(m *Machine, now time.Time, _ *timer) { m.resendLeaveNotices(now) }},
		timerTreeFlush:    {singleton: true, fire: func(m *Machine, now time.Time, _ *timer) { m.treeFlush(now) }},
		timerTreeGraft: {
			current: func(m *Machine, t *timer) bool { return m.tree.GraftPending(t.key, t.inc) },
			fire:    func(m *Machine, now time.Time, t *timer) { m.treeGraftDue(now, t.key) },
		},
		timerStream: {
			current: func(m *Machine, t *timer) bool { _, ok := m.streams[t.key]; return ok },
			fire:    func(m *Machine, now time.Time, t *timer) { m.expireStream(now, t.key) },
		},
		timerUserPing: {
			current: func(m *Machine, t *timer) bool { return m.userPings[uint32(t.key)] != nil },
			fire:    func(m *Machine, _ time.Time, t *timer) { m.expirePing(uint32(t.key)) },
		},
		timerAddrCheck: {
			current: func(m *Machine, t *timer) bool { return m.addrCheckPending(uint32(t.key), addrCheckKind(t.inc)) },
			fire:    func(m *Machine, now time.Time, t *timer) { m.addrCheckSilent(now, uint32(t.key)) },
		},
		timerRestartNotices: {singleton: true, fire: func(m *Machine, _ time.Time, _ *timer) { m.sendRestartNotices() }},
		timerHoleAsk: {
			current: func(m *Machine, t *timer) bool { d, ok := m.holes.deferred[t.name]; return ok && d.due.Equal(t.at) },
			fire:    func(m *Machine, now time.Time, t *timer) { m.askDeferredHole(now, t.name) },
		},
	}
}

// armPeriodic arms the periodic timers whose work has become possible since
// they last fired or were dropped (see timerSpec.wanted). One that is armed
// stays as it is: whatever moves a periodic deadline earlier (schedule)
// arms it itself.
func (m *Machine) armPeriodic() {
	for kind := range timerKinds {
		spec := &timerSpecs[kind]
		if spec.periodic && m.timers.armed[kind].IsZero() && spec.wanted(m) {
			m.armAt(kind, m.timers.due[kind])
		}
	}
}

// current reports whether t still stands for pending work: an instance
// timer by its tokens, a singleton by the time it is armed for, and a
// periodic one only while its work is possible (else it is dropped).
func (m *Machine) current(t *timer) bool {
	spec := &timerSpecs[t.kind]
	if !spec.singleton {
		return spec.current(m, t)
	}
	if !m.timers.armed[t.kind].Equal(t.at) {
		return false
	}
	if spec.periodic && !spec.wanted(m) {
		m.timers.armed[t.kind] = time.Time{}
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
		if timerSpecs[t.kind].singleton {
			m.timers.armed[t.kind] = time.Time{}
		}
		timerSpecs[t.kind].fire(m, now, &t)
	}
	// A large merge applies one slice per Tick: the next is armed for now
	// after the loop, so that it waits for the next call instead of
	// running in this one.
	if len(m.merges) > 0 {
		m.armAt(timerMerge, now)
	}
}
