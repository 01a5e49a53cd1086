package swim

import (
	"net/netip"
	"slices"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Precedence of membership deltas (SWIM §4.2, as refined by memberlist):
//
//   - A higher incarnation beats a lower one, whatever the states.
//   - At the same incarnation, dead and left beat suspect, which beats alive.
//   - Only the member itself raises its incarnation: it refutes a suspicion
//     or a death by announcing alive at a higher incarnation. So a member
//     declared dead comes back only through its own newer alive message.

// mergeSource says where a delta came from, which decides whether it is
// passed on.
type mergeSource uint8

const (
	// mergeGossip: a piggybacked or gossiped delta; changes are passed on.
	mergeGossip mergeSource = iota
	// mergePushPull: a peer's full state; changes are passed on, and a
	// remote "dead" only makes the member suspect here.
	mergePushPull
	// mergeJoin: the state a seed sent us when we joined; everyone else
	// knows it already, so nothing is passed on.
	mergeJoin
)

// handleAlive applies an alive delta.
func (m *Machine) handleAlive(now time.Time, a *wire.Alive, src mergeSource) {
	if len(a.Name) == 0 || len(a.Meta) > m.cfg.MaxMetaSize {
		m.stats.PacketsDropped++
		return
	}
	if a.Name == m.self.Name {
		// Someone holds a newer incarnation of us, from a previous life
		// under this name: overtake it.
		if a.Incarnation > m.self.Incarnation && m.self.State == StateAlive {
			m.refute(now, a.Incarnation)
		}
		return
	}
	addr, err := wire.DecodeAddr(a.Addr)
	if err != nil {
		m.stats.PacketsDropped++
		return
	}
	s, known := m.members[a.Name]
	if !known {
		s = &memberState{
			Member:      Member{Name: a.Name, Addr: addr, Meta: cloneBytes(a.Meta), State: StateAlive, Incarnation: a.Incarnation},
			stateChange: now,
			liveIdx:     -1,
		}
		m.members[a.Name] = s
		m.setAddr(s, addr)
		m.dropReconnect(a.Name)
		m.setLive(s)
		m.addToProbeOrder(s)
		m.version++
		m.event(EventJoin, s)
		if src != mergeJoin {
			m.queueBroadcast(a.Name, a)
		}
		return
	}
	if a.Incarnation <= s.Incarnation {
		return
	}
	prev := s.State
	changed := s.Addr != addr || string(s.Meta) != string(a.Meta)
	s.Incarnation = a.Incarnation
	if s.Addr != addr {
		m.setAddr(s, addr)
	}
	if string(s.Meta) != string(a.Meta) {
		s.Meta = cloneBytes(a.Meta)
	}
	m.version++
	switch prev {
	case StateAlive:
		if changed {
			m.event(EventUpdate, s)
		}
	case StateSuspect:
		m.cancelSuspicion(s.Name)
		m.setState(now, s, StateAlive)
		m.event(EventAlive, s)
	case StateDead, StateLeft:
		m.setState(now, s, StateAlive)
		// Its old entry may still wait later in this pass; one is enough.
		if !slices.Contains(m.probeOrder[m.probeNext:], s) {
			m.addToProbeOrder(s)
		}
		m.event(EventJoin, s)
	}
	if src != mergeJoin {
		m.queueBroadcast(a.Name, a)
	}
}

// handleSuspect applies a suspect delta.
func (m *Machine) handleSuspect(now time.Time, d *wire.Suspect) {
	if d.Name == m.self.Name {
		m.selfAccused(now, d.Incarnation)
		return
	}
	s, ok := m.members[d.Name]
	if !ok || !s.live() || d.Incarnation < s.Incarnation {
		return
	}
	// Anchor where the accuser did (Geode: at the last moment the member
	// was known alive, not when the news arrived), so that all members
	// decide at about the same time. The claimed silence is capped: a
	// suspicion can never be older than its longest timeout.
	_, hi := m.suspicionBounds()
	silence := min(time.Duration(d.Silence)*time.Millisecond, hi)
	m.suspect(now, s, d.Incarnation, d.From, now.Add(-silence))
}

// suspect marks a live member suspect at inc and gossips it (SWIM §4.2); the
// suspicion is anchored at anchor. An accusation of a member already
// suspected at inc is a confirmation: when it is a new, independent one,
// it shortens the timer and is passed on so others count it too (Lifeguard
// §IV-B).
func (m *Machine) suspect(now time.Time, s *memberState, inc uint64, from string, anchor time.Time) {
	msg := func() *wire.Suspect {
		silence := now.Sub(anchor)
		if sp, ok := m.suspicions[s.Name]; ok {
			silence = now.Sub(sp.start)
		}
		return &wire.Suspect{Name: s.Name, Incarnation: inc, From: from, Silence: uint32(max(silence, 0) / time.Millisecond)}
	}
	if s.State == StateSuspect && s.Incarnation == inc {
		if m.startSuspicion(now, s.Name, inc, from, anchor) {
			m.stats.SuspicionsConfirmed++
			m.queueBroadcast(s.Name, msg())
		}
		return
	}
	if from == m.self.Name {
		m.stats.SuspicionsRaised++
	}
	wasSuspect := s.State == StateSuspect
	s.Incarnation = inc
	m.setState(now, s, StateSuspect)
	m.version++
	m.startSuspicion(now, s.Name, inc, from, anchor)
	if !wasSuspect {
		m.event(EventSuspect, s)
	}
	m.queueBroadcast(s.Name, msg())
}

// handleDead applies a dead or left delta.
func (m *Machine) handleDead(now time.Time, d *wire.Dead) {
	if d.Name == m.self.Name {
		m.selfAccused(now, d.Incarnation)
		return
	}
	s, ok := m.members[d.Name]
	if !ok || d.Incarnation < s.Incarnation {
		return
	}
	if !s.live() {
		// Already gone: a newer incarnation only updates the record (the
		// member came back and went again while we were not looking), so
		// that older news about it stays ignored, and passes it on. No
		// event: we reported its departure already.
		if d.Incarnation > s.Incarnation {
			s.Incarnation = d.Incarnation
			if d.Left {
				m.setState(now, s, StateLeft)
			} else {
				m.setState(now, s, StateDead)
			}
			m.version++
			m.queueBroadcast(s.Name, d)
		}
		return
	}
	m.declareDead(now, s, d.Incarnation, d.From, d.Left)
}

// declareDead marks a member dead (or left) and gossips it.
func (m *Machine) declareDead(now time.Time, s *memberState, inc uint64, from string, left bool) {
	m.cancelSuspicion(s.Name)
	s.Incarnation = inc
	state := StateDead
	if left {
		state = StateLeft
	}
	m.setState(now, s, state)
	m.version++
	m.event(EventLeave, s)
	m.queueBroadcast(s.Name, &wire.Dead{Name: s.Name, Incarnation: inc, From: from, Left: left})
	if from == m.self.Name {
		m.urgent = true
		m.nextGossip = now
	}
}

// selfAccused handles a suspicion or death of this member at inc. At or
// above our incarnation it is refuted (SWIM §4.2). Below it, the claim is
// stale: we refuted it already, but whoever still spreads it missed the
// refutation, a rumor that died out too early under loss. Re-announcing our
// current alive, without raising the incarnation, lets it catch up.
func (m *Machine) selfAccused(now time.Time, inc uint64) {
	if m.self.State != StateAlive {
		return
	}
	if inc >= m.self.Incarnation {
		// Lifeguard §IV-A: being accused is a sign that we may be the
		// slow one.
		m.adjustHealth(1)
		m.refute(now, inc)
		return
	}
	if b, queued := m.bq.byKey[m.self.Name]; !queued || b.transmits > 0 {
		m.stats.Reasserts++
		m.broadcastSelfAlive()
	}
}

// refute answers a suspicion or death of this member: only the member itself
// may raise its incarnation, and the newer alive overrides the older claim
// everywhere it spreads (SWIM §4.2).
func (m *Machine) refute(now time.Time, seen uint64) {
	m.stats.Refutations++
	m.self.Incarnation = seen + 1
	m.version++
	m.broadcastSelfAlive()
}

func (m *Machine) broadcastSelfAlive() { m.queueBroadcast(m.self.Name, m.selfAlive()) }

func (m *Machine) selfAlive() *wire.Alive {
	return &wire.Alive{
		Name:        m.self.Name,
		Addr:        wire.EncodeAddr(m.self.Addr),
		Incarnation: m.self.Incarnation,
		Meta:        m.self.Meta,
	}
}

// setState moves a member between the live set and the dead list.
func (m *Machine) setState(now time.Time, s *memberState, state State) {
	wasLive, wasDead := s.live(), !s.live()
	s.State = state
	s.stateChange = now
	switch {
	case s.live() && !wasLive:
		m.removeDead(s)
		m.setLive(s)
	case !s.live() && wasLive:
		m.unsetLive(s)
		m.dead = append(m.dead, s)
	case !s.live() && wasDead:
		// Dead to left: keep its place in the reaping order fair by
		// moving it to the back, since stateChange moved.
		m.removeDead(s)
		m.dead = append(m.dead, s)
	}
}

func (m *Machine) setLive(s *memberState) {
	if s.liveIdx >= 0 {
		return
	}
	s.liveIdx = len(m.live)
	m.live = append(m.live, s)
	m.ringInsert(s)
}

func (m *Machine) unsetLive(s *memberState) {
	i := s.liveIdx
	if i < 0 {
		return
	}
	last := len(m.live) - 1
	m.live[i] = m.live[last]
	m.live[i].liveIdx = i
	m.live[last] = nil
	m.live = m.live[:last]
	s.liveIdx = -1
	m.ringRemove(s)
}

func (m *Machine) removeDead(s *memberState) {
	if i := slices.Index(m.dead, s); i >= 0 {
		m.dead = slices.Delete(m.dead, i, i+1)
	}
}

func (m *Machine) setAddr(s *memberState, addr netip.AddrPort) {
	if m.byAddr[s.Addr] == s {
		delete(m.byAddr, s.Addr)
	}
	s.Addr = addr
	m.byAddr[addr] = s
}

// reap forgets members dead or left for GossipToDeadTime. A failed member is
// still remembered, for ReconnectTimeout, as a reconnect target.
func (m *Machine) reap(now time.Time) {
	for len(m.dead) > 0 && !now.Before(m.dead[0].stateChange.Add(m.cfg.GossipToDeadTime)) {
		s := m.dead[0]
		m.dead[0] = nil
		m.dead = m.dead[1:]
		delete(m.members, s.Name)
		if m.byAddr[s.Addr] == s {
			delete(m.byAddr, s.Addr)
		}
		m.version++
		if s.State == StateDead && m.cfg.ReconnectInterval > 0 {
			m.reconnect = append(m.reconnect, reconnectEntry{name: s.Name, addr: s.Addr, since: s.stateChange})
		}
	}
	for len(m.reconnect) > 0 && !now.Before(m.reconnect[0].since.Add(m.cfg.ReconnectTimeout)) {
		m.reconnect = m.reconnect[1:]
	}
	if !m.seedsUntil.IsZero() && !now.Before(m.seedsUntil) {
		m.seeds, m.seedsUntil = nil, time.Time{}
	}
}

func (m *Machine) dropReconnect(name string) {
	m.reconnect = slices.DeleteFunc(m.reconnect, func(e reconnectEntry) bool { return e.name == name })
}
