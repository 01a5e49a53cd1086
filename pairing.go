package swim

import (
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Paired probing. Under aligned probing (probe.go) every member is probed
// once a round, and each probe is a ping and an ack: two packets per member
// per round, and on a LAN the kernel's work per packet is most of what a
// member costs. Pairing halves that. In each round the ring is split into
// pairs, and the two members of a pair send each other one Heartbeat each,
// at their own phases within the round: the Heartbeat a member receives is
// the answer to the one it sends, since any packet from a member is a sign
// of life (Apache Geode). Each member is still checked once a round, by
// its partner, at the same phase as under aligned probing, so the time to
// the first check of a crashed member (at most one ProbeInterval) and the
// rest of detection are unchanged.
//
// A member whose partner has not been heard from by half a ProbeTimeout
// after the partner's phase probes it itself: the direct ping goes out
// then, and the probe runs on exactly as one started at the partner's
// phase would (the indirect phase at ProbeTimeout, the verdict at
// ProbeInterval, the suspicion timed from that phase; SWIM §3.1, Lifeguard
// §IV-A). So a lost Heartbeat costs one ping and its ack, views that
// disagree on the ring cost a ping where a Heartbeat went elsewhere, and
// nothing is ever checked less than by a probe. Clocks skewed by more than
// that half timeout make every check fall back to a probe: the cost of
// aligned probing, never a missed check.
//
// The pairs are the rounds of a round-robin tournament by the circle
// method: with M the ring's size made odd (N, or N-1 with the last member
// of the ring as the fixed one), round r pairs positions i and j with
// i+j ≡ r (mod M); the position with 2i ≡ r is paired with the fixed member
// when N is even. In M consecutive rounds each member meets every other
// once, so the members that confirm a suspicion (Lifeguard §IV-B) are
// different ones round after round, as under aligned probing. When N is
// odd that position is the round's odd one out, and the member after it on
// the ring takes it as a second partner: one Heartbeat more for the round,
// and no member goes unchecked.
//
// A member that hears from no member for two rounds sends no Heartbeats:
// a Heartbeat says "I am here", not "I can hear you", and a member that
// cannot receive should be probed and judged as under probing, where alive
// means answering (over TCP if that is all that reaches it).
//
// Lifeguard §IV-A: an unhealthy member waits longer (the deadlines scale
// with its health score) and checks its partner only every health score
// plus one rounds, but it sends its Heartbeats every round, since not
// sending them would only make its partners probe it. A ping to a partner
// held suspect carries the suspicion (buddy system, §IV-C), and so does a
// Heartbeat.
//
// Heartbeats exist from protocol 4 (wire.ProtocolPaired) on. A member pairs
// only while every live member it knows announced that protocol; otherwise
// it probes as aligned probing does, so a cluster being upgraded one
// process at a time probes as before until its last old member is gone.
//
// It also probes after its ring changed, while the rings of the others are
// likely to disagree with it, and the change moves it from one mode to the
// other mid-round while the others move at other moments, as the news
// reaches them. Under either mode alone every member is checked each
// round; a round in which a member's prober pairs and its partner probes
// would leave it unchecked. So no round is left between the modes: from
// the moment its ring changes a member probes, and still makes the checks
// and sends the Heartbeats it had planned for that round; it probes through
// the round stableRoundsToPair after the change, and in that round pairs as
// well. Two members that learn of a change up to a round apart are both
// probing, or one of them does both, in every round: the cost is one round
// of both modes per change, the gain that a wave of deaths, each changing
// every ring, never delays the next one's check.

// pairable reports whether this member may pair at all: configured to, and
// every live member it knows announced Heartbeats.
func (m *Machine) pairable() bool {
	return m.cfg.PairedProbing && m.cfg.AlignedProbing && m.cfg.Detection.AnyTrafficHeartbeat && len(m.unpaired) == 0
}

// pairingIn reports whether round r is a paired one: the ring stood still
// for stableRoundsToPair rounds before it (longer in a join storm).
func (m *Machine) pairingIn(r int64) bool {
	return m.pairable() && r >= m.pairFrom
}

// probingIn reports whether this member probes its aligned target in round
// r: always when it cannot pair, and otherwise from the round its ring
// changed through the first paired round after it.
func (m *Machine) probingIn(r int64) bool {
	return !m.pairable() || r <= m.pairFrom
}

// ringMoved notes a change of the ring, or of who on it can pair, at now,
// and restarts probing at the next aligned phase if it was idle.
func (m *Machine) ringMoved(now time.Time) {
	wasProbing := m.probingIn(m.probeRound)
	r := m.roundOf(now)
	m.ringChanged = r
	// A storm's hold is kept by a change after it ended: max.
	m.pairFrom = max(m.pairFrom, r+stableRoundsToPair+m.stormHoldRounds(now))
	if !m.cfg.AlignedProbing || wasProbing {
		return
	}
	m.probeRound = r
	if t := m.alignedTarget(r); t == nil || m.roundTime(r, t).Before(now) {
		m.probeRound++ // its phase in this round is past
	}
	m.timers.due[timerProbe] = m.roundTime(m.probeRound, m.alignedTarget(m.probeRound))
}

// stableRoundsToPair is how many rounds after its ring changed a member
// pairs again. While the ring changes (a boot, a join storm, a mass
// failure) the members' rings disagree, a Heartbeat goes to a member that
// does not expect it and its expected partner falls back to a probe: three
// packets where aligned probing, which only probes someone twice when
// views disagree, sends two, on a cluster that is busy already.
const stableRoundsToPair = 2

// stormHoldRounds is how many rounds more a member waits to pair after its
// ring changed in a join storm (joinstorm.go): the rounds of
// joinStormGrace, zero outside a storm and at or below joinStormScale
// members. In a storm of a large cluster each member's ring changes about
// every round, at moments that differ from member to member, so a member
// that went back to pairing whenever its ring stood still for
// stableRoundsToPair rounds would, most times, change it again before the
// round it planned for, and make those checks and Heartbeats on top of
// probing: more packets than probing alone, on a cluster the storm keeps
// busy already. Holding off until the storm has passed (the last join
// news is joinStormGrace old) costs a storm nothing, since it probes
// throughout, and the first change after a quiet spell, a lone join or a
// death, waits no longer than before.
func (m *Machine) stormHoldRounds(now time.Time) int64 {
	if !m.inJoinStorm(now) || m.cfg.ProbeInterval <= 0 {
		return 0
	}
	g, p := m.joinStormGrace(), m.cfg.ProbeInterval
	return int64((g + p - 1) / p)
}

// pairCapable reports whether s announced the protocol with Heartbeats.
func (m *Machine) pairCapable(s *memberState) bool {
	return m.versionsOf(s).Effective().ProtocolMax >= wire.ProtocolPaired
}

// notePairing records whether s, a member on the ring, can pair.
func (m *Machine) notePairing(now time.Time, s *memberState) {
	_, was := m.unpaired[s.id]
	if m.pairCapable(s) {
		delete(m.unpaired, s.id)
	} else {
		m.unpaired[s.id] = struct{}{}
	}
	if _, is := m.unpaired[s.id]; is != was {
		m.ringMoved(now)
	}
}

// pairPartners appends to buf the members this one is paired with in round
// r: none (alone), one, or two (the round's odd one out as a second).
func (m *Machine) pairPartners(r int64, buf []*memberState) []*memberState {
	pos := m.ringSelfPos()
	if pos < 0 {
		return buf
	}
	first, second := pairPositions(m.ring.len(), pos, r)
	for _, p := range [2]int{first, second} {
		if p < 0 {
			continue
		}
		if s := m.entry(m.ring.at(p)); s != nil && s != m.self {
			buf = append(buf, s)
		}
	}
	return buf
}

// pairPositions returns the ring positions paired with position pos of n in
// round r, -1 for none: the circle method over M = n (odd) or n-1 (even)
// positions, i paired with j where i+j ≡ r (mod M). The one position with
// 2i ≡ r is paired with position n-1 when n is even; when n is odd it is
// the odd one out, and position i+1 takes it as a second partner.
func pairPositions(n, pos int, r int64) (first, second int) {
	if n < 2 || pos < 0 || pos >= n {
		return -1, -1
	}
	modulus := n
	if n%2 == 0 {
		modulus = n - 1
	}
	c := int(uint64(r) % uint64(modulus))
	// M is odd, so halving mod M is multiplying by (M+1)/2.
	fixedPoint := int(uint64(c) * uint64((modulus+1)/2) % uint64(modulus))
	switch {
	case n%2 == 0 && pos == modulus:
		return fixedPoint, -1
	case pos == fixedPoint && n%2 == 0:
		return modulus, -1
	case pos == fixedPoint:
		return (pos + 1) % n, -1
	case n%2 == 1 && pos == (fixedPoint+1)%n:
		return (c - pos + modulus) % modulus, fixedPoint
	}
	return (c - pos + modulus) % modulus, -1
}

// ringSelfPos is this member's index in the ring, -1 if it is not on it.
func (m *Machine) ringSelfPos() int {
	if m.selfPosAt != m.ring.mods+1 {
		// Views change rarely next to how often we probe.
		m.selfPos, m.selfPosAt = m.ring.index(m.ringOrder(), m.self.id), m.ring.mods+1
	}
	return m.selfPos
}

// scheduleHeartbeats starts the paired rounds at now: the Heartbeat of the
// current round if its phase is still ahead, else of the next one.
func (m *Machine) scheduleHeartbeats(now time.Time) {
	m.beatRound = m.roundOf(now)
	if !m.roundTime(m.beatRound, m.self).After(now) {
		m.beatRound++
	}
	m.timers.due[timerHeartbeat] = m.roundTime(m.beatRound, m.self)
	m.planChecks(m.beatRound)
}

// tickHeartbeat sends this round's Heartbeats (timerHeartbeat) and plans
// the checks of the next round: every check of a round is due after its
// start, and the Heartbeat of the round before comes before that. It runs
// every round while the member may pair, so that the first paired round
// after a change is planned in the round before it, except while a storm
// holds pairing off: then it sleeps until the round before pairFrom.
func (m *Machine) tickHeartbeat(now time.Time) {
	if now.Before(m.timers.due[timerHeartbeat]) {
		return
	}
	if m.roundOf(now) > m.beatRound {
		// We were not running for the rest of the round (a pause), or
		// pairing has just become possible: start again from now.
		m.scheduleHeartbeats(now)
		if now.Before(m.timers.due[timerHeartbeat]) {
			return
		}
	}
	if m.pairingIn(m.beatRound) || m.checksPlanned == m.beatRound {
		m.sendHeartbeats(now)
	}
	m.beatRound++
	if m.beatRound < m.pairFrom-1 {
		// A storm holds pairing off (stormHoldRounds): nothing to send
		// nor to plan before the round ahead of the first paired one.
		// pairFrom only moves later, so the wake-up is never late.
		m.beatRound = m.pairFrom - 1
	}
	m.timers.due[timerHeartbeat] = m.roundTime(m.beatRound, m.self)
	m.planChecks(m.beatRound)
}

// sendHeartbeats sends this round's Heartbeats to this member's partners,
// unless it hears no one.
func (m *Machine) sendHeartbeats(now time.Time) {
	var buf [2]*memberState
	partners := m.pairPartners(m.beatRound, buf[:0])
	if len(partners) > 0 && !m.heardAnyoneSince(now.Add(-deafRounds*m.cfg.ProbeInterval)) {
		// We hear no one: our Heartbeats would say we are alive while
		// we cannot hear a ping, a suspicion or a refutation's cause.
		// Silent, we are probed instead, and alive is what it meant
		// under probing: we answer (over TCP, if that is all that
		// reaches us).
		m.stats.HeartbeatsWithheld += uint64(len(partners))
		partners = partners[:0]
	}
	digest := m.digestDue(now)
	for _, p := range partners {
		m.stats.HeartbeatsSent++
		hb := &wire.Heartbeat{From: m.selfName}
		// A wire.Message holding a nil pointer is not nil: keep the
		// interfaces nil when there is nothing to send.
		var claim, vd wire.Message
		if sp := m.suspicionOf(p); sp != nil && m.cfg.Detection.BuddyPing {
			claim = sp
		}
		if digest {
			m.stats.ViewDigestsSent++
			d := m.viewDigest()
			vd = &d
		}
		m.sendWith(m.addrOf(p), hb, claim, vd)
	}
}

// deafRounds is how many rounds a member may hear nothing from any member
// and still send Heartbeats: two, so that one lost Heartbeat in a cluster
// of two does not silence a member.
const deafRounds = 2

// heardAnyoneSince reports whether a packet from any member arrived at or
// after t.
func (m *Machine) heardAnyoneSince(t time.Time) bool {
	return !m.lastHeardAny.IsZero() && !m.lastHeardAny.Before(t)
}

// planChecks arms the checks of this member's partners in round r if it is
// a paired round, unless local health skips it (Lifeguard §IV-A).
func (m *Machine) planChecks(r int64) {
	if !m.pairingIn(r) || r < m.checkRound {
		return
	}
	m.checkRound = r + int64(m.health) + 1
	m.checksPlanned = r
	var buf [2]*memberState
	for _, p := range m.pairPartners(r, buf[:0]) {
		m.after(m.checkDue(r, p), timerPairCheck, uint64(p.id), uint64(r), "")
	}
}

// checkDue is when p's Heartbeat of round r must have arrived: half a
// ProbeTimeout (scaled by our health) after its phase, which leaves the
// other half for the direct ping that follows if it has not.
func (m *Machine) checkDue(r int64, p *memberState) time.Time {
	return m.roundTime(r, p).Add(m.scaled(m.cfg.ProbeTimeout) / 2)
}

// checkPartner probes member id, whose Heartbeat of round r has not come
// (timerPairCheck, fired only while pairCheckPending holds), as from its
// phase. A check planned is made even if the ring changed since: the
// member's partner in the new ring may not have planned one (see the top
// of this file).
func (m *Machine) checkPartner(id uint32, r int64) {
	s := m.entry(id)
	m.stats.PairFallbacks++
	m.startProbe(s, m.roundTime(r, s))
}

// pairCheckPending reports whether the check of member id's Heartbeat of
// round r still waits for its time. A check whose partner has been heard
// from in time is passed as soon as the timer queue looks at it, since
// waiting could not change its verdict: its timer then never wakes the
// member, which saves one wake-up a round of the three a paired member
// has (its Heartbeat, its partner's, the check), and a wake-up, in the
// runtime's scheduler and system calls, costs more than the check.
func (m *Machine) pairCheckPending(id uint32, r int64) bool {
	s := m.entry(id)
	if s == nil || !s.live() || s == m.self || m.self.state() != StateAlive {
		return false // gone: nothing to check
	}
	if m.heardSince(s, m.roundTime(r, s).Add(-m.cfg.ProbeInterval/2)) {
		m.stats.PairChecks++
		m.adjustHealth(-1)
		return false
	}
	return true
}

// handleHeartbeat takes a partner's Heartbeat. Its work, marking the
// sender heard, is done for every packet (HandlePacket); here only a
// Heartbeat in this member's own name matters: a second process named
// alike (admission.go).
func (m *Machine) handleHeartbeat(now time.Time, from netip.AddrPort, hb *wire.Heartbeat) {
	m.stats.HeartbeatsReceived++
	if hb.From == m.selfName && m.self.state() == StateAlive {
		m.checkConflict(now, from)
	}
}
