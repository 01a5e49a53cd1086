package swim

import (
	"math"
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
//
// precedence decides it, for every delta, gossiped or merged.

// verdict is what a delta does to the member it is about.
type verdict uint8

const (
	// stale: no newer than what is held; ignored.
	stale verdict = iota
	// confirms: the suspicion already held, again: a confirmation
	// (Lifeguard §IV-B), which may shorten its timer.
	confirms
	// supersedes: newer than what is held; applied.
	supersedes
)

// precedence says what a delta claiming state st at incarnation inc does
// to a member held in state held at incarnation heldInc.
func precedence(held State, heldInc uint64, st State, inc uint64) verdict {
	live := held == StateAlive || held == StateSuspect
	switch {
	case inc < heldInc:
		return stale
	case inc > heldInc:
		if st == StateSuspect && !live {
			return stale // a suspicion resurrects nobody
		}
		return supersedes
	}
	switch st {
	case StateSuspect:
		switch held {
		case StateAlive:
			return supersedes
		case StateSuspect:
			return confirms
		}
	case StateDead, StateLeft:
		if live {
			return supersedes
		}
	}
	return stale // alive never beats the same incarnation; dead and left rank equal
}

// MaxIncarnationJump is how far a delta's incarnation may lie beyond the
// one held for its member (0 for a member not known yet, our own for this
// member) before it is taken for a forgery and dropped
// (Stats.DeltasImplausible). A member raises its incarnation by one per
// refutation or metadata change, so no real member gets anywhere near 2^32
// beyond what a peer last saw of it, even across restarts that overtake a
// previous life; while a single forged delta at 2^64-1 would otherwise
// leave its member unable to refute ever again. Incarnations also saturate
// instead of wrapping, so even a long run of forgeries,
// each within the bound, cannot turn one into a small number.
const MaxIncarnationJump = 1 << 32

// maxAccusationLead is how far above the incarnation held for a member an
// accusation of it (suspect, dead or left) may lie before it is dropped as
// implausible (DeltasImplausible), and this member's own incarnation for
// an accusation of itself before it is not refuted. An honest accuser
// accuses at the incarnation it holds, the member's own alive, at most a
// few refutations or updates newer than what another member holds; a
// member that drops a real one only suspects later. Without the bound each
// forged self-accusation raised the member's incarnation by up to
// MaxIncarnationJump (2^37 in 5 s from one accuser within its bucket); with
// it, by at most 64 per accusation the accuser's bucket lets through.
const maxAccusationLead = 64

// staleOrImplausibleAccusation is staleOrImplausible for an accusation:
// its incarnation within maxAccusationLead of the held one.
func (m *Machine) staleOrImplausibleAccusation(s *memberState, st State, inc uint64) bool {
	if m.staleOrImplausible(s, st, inc) {
		return true
	}
	if s != nil && inc > s.inc() && inc-s.inc() > maxAccusationLead {
		m.stats.DeltasImplausible++
		return true
	}
	return false
}

// nextIncarnation is inc+1, saturating at the largest incarnation.
func nextIncarnation(inc uint64) uint64 {
	if inc == math.MaxUint64 {
		return inc
	}
	return inc + 1
}

// plausible reports whether a delta at inc about the member held as s (nil:
// unknown) may be true, counting it when not (see MaxIncarnationJump).
func (m *Machine) plausible(s *memberState, inc uint64) bool {
	var known uint64
	if s != nil {
		known = s.inc()
	}
	if inc > known && inc-known > MaxIncarnationJump {
		m.stats.DeltasImplausible++
		return false
	}
	return true
}

// staleOrImplausible reports whether a delta claiming st at inc about the
// member held as s (nil: unknown) must be ignored: what is held takes
// precedence over it, or its incarnation is implausible (counted by
// plausible, which is asked only of a delta that is not stale).
func (m *Machine) staleOrImplausible(s *memberState, st State, inc uint64) bool {
	return s != nil && precedence(s.state(), s.inc(), st, inc) == stale || !m.plausible(s, inc)
}

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
	// mergeReply: as mergePushPull, for the reply to an exchange this
	// member started: first-hand news from the member it chose to ask,
	// which no third party can replay into the connection.
	mergeReply
	// mergeMoveChecked: news that a member moved, whose check found it at
	// the new address and not at the old one (moves.go); passed on.
	mergeMoveChecked
	// mergeChecked: news of a member not known, whose check found it at
	// its address (newcomers.go); passed on.
	mergeChecked
	// mergeFollowUp: as mergeReply, for the first exchange after our
	// join, back with the seed; as for the join, nothing is passed on.
	mergeFollowUp
)

// passedOn reports whether news from src is passed on.
func (src mergeSource) passedOn() bool { return src != mergeJoin && src != mergeFollowUp }

// suspect marks a live member suspect at inc and gossips it (SWIM §4.2); the
// suspicion is anchored at anchor. An accusation of a member already
// suspected at inc is a confirmation: when it is a new, independent one,
// it shortens the timer and is passed on so others count it too (Lifeguard
// §IV-B).
func (m *Machine) suspect(now time.Time, s *memberState, inc uint64, from string, anchor time.Time) {
	name := m.nameOf(s)
	msg := func() *wire.Suspect {
		// The accuser's own claim of silence, as held here: another's
		// claims are not the accuser's to pass on.
		silence := now.Sub(anchor)
		if sp, ok := m.suspicions[name]; ok {
			silence = now.Sub(sp.anchorOf(from, anchor))
		}
		return &wire.Suspect{Name: name, Incarnation: inc, From: from, Silence: uint32(max(silence, 0) / time.Millisecond), Life: m.lifeOf(s)}
	}
	queue := m.queueNews
	if from == m.selfName {
		queue = m.queueOwnNews
	}
	if s.state() == StateSuspect && s.inc() == inc {
		if m.startSuspicion(now, name, inc, from, anchor) {
			m.stats.SuspicionsConfirmed++
			queue(name, msg())
		}
		return
	}
	if from == m.selfName {
		m.stats.SuspicionsRaised++
	}
	wasSuspect := s.state() == StateSuspect
	s.setInc(inc)
	m.setState(now, s, StateSuspect)
	m.version++
	m.startSuspicion(now, name, inc, from, anchor)
	if !wasSuspect {
		m.event(EventSuspect, s)
	}
	queue(name, msg())
}

// learnVersions fills in what a live member speaks from news of its
// current life (same incarnation) that carries it, and reports whether
// that is all the news says. A member's versions are set with each new
// incarnation from the delta that announces it; but a delta relayed by a
// member that predates versioning carries none, and would leave them
// unknown (read as protocol 1, the safe side) until news that carries them
// arrives: a later copy, or the member's own push-pull entry, at the same
// incarnation and so otherwise stale. The same goes for its life
// (lives.go), which a relay predating lives drops.
func (m *Machine) learnVersions(now time.Time, s *memberState, inc uint64, v wire.Versions, life uint64) bool {
	if inc != s.inc() || !s.live() || s == m.self {
		return false
	}
	if v == (wire.Versions{}) {
		v = m.versionsOf(s)
	}
	if held := m.lifeOf(s); held != 0 || life == 0 {
		life = held
	}
	if v == m.versionsOf(s) && life == m.lifeOf(s) {
		return false
	}
	m.setIdentity(now, s, m.addrOf(s), m.metaOf(s), v, life)
	m.version++
	return true
}

// declareDead marks a member dead (or left) and gossips it.
func (m *Machine) declareDead(now time.Time, s *memberState, inc uint64, from string, left bool) {
	name := m.nameOf(s)
	m.cancelSuspicion(name)
	s.setInc(inc)
	state := StateDead
	if left {
		state = StateLeft
	}
	m.setState(now, s, state)
	m.version++
	m.event(EventLeave, s)
	d := &wire.Dead{Name: name, Incarnation: inc, From: from, Left: left, Life: m.lifeOf(s)}
	if from != m.selfName {
		m.queueNews(name, d)
		return
	}
	m.queueOwnNews(name, d)
	m.urgent = true
	m.gossipNow(now)
}

// selfAccused handles a suspicion or death of this member at inc. At or
// above our incarnation it is refuted (SWIM §4.2). Below it, the claim is
// stale: we refuted it already, but whoever still spreads it missed the
// refutation, a rumor that died out too early under loss. Re-announcing our
// current alive, without raising the incarnation, lets it catch up.
func (m *Machine) selfAccused(now time.Time, inc uint64) { m.selfClaimed(now, inc, StateSuspect) }

// selfClaimed answers a claim that this member is suspect or dead at inc.
func (m *Machine) selfClaimed(now time.Time, inc uint64, claim State) {
	if m.self.state() != StateAlive {
		return
	}
	if inc > m.self.inc() && inc-m.self.inc() > maxAccusationLead {
		m.stats.DeltasImplausible++
		return
	}
	if inc >= m.self.inc() {
		if m.cfg.SelfEvents {
			mb := m.export(m.self)
			mb.State, mb.Incarnation = claim, inc
			kind := EventSuspect
			if claim == StateDead {
				kind = EventLeave
			}
			m.emitEvent(Event{Kind: kind, Member: mb})
		}
		// Lifeguard §IV-A: being accused is a sign that we may be the
		// slow one; once per probe interval, so that a flood of
		// accusations from one member cannot hold our health at its
		// worst (a member probes one peer per interval, SWIM §4.3).
		if m.accusedAt.IsZero() || now.Sub(m.accusedAt) >= m.cfg.ProbeInterval {
			m.accusedAt = now
			m.adjustHealth(1)
		}
		m.refute(now, inc)
		if m.cfg.SelfEvents {
			m.event(EventAlive, m.self)
		}
		return
	}
	if b, queued := m.bq.byKey[m.selfName]; !queued || b.transmits > 0 {
		m.stats.Reasserts++
		m.broadcastSelfAlive()
	}
}

// selfDeclaredDead handles news that others declared this member dead at
// inc: a refutation as for any accusation, and, when it is news (at or
// above our incarnation), the early push-pulls of a join. Members that
// declared us dead stopped gossiping to us, so we may have missed the news
// of anyone (after a partition heals, everyone on both sides); waiting for
// the periodic push-pull would leave such holes for a minute or more.
func (m *Machine) selfDeclaredDead(now time.Time, inc uint64) {
	if m.self.state() == StateAlive && inc >= m.self.inc() && inc-m.self.inc() <= maxAccusationLead {
		m.scheduleFollowUps(now)
	}
	m.selfClaimed(now, inc, StateDead)
}

// refute answers a suspicion or death of this member: only the member itself
// may raise its incarnation, and the newer alive overrides the older claim
// everywhere it spreads (SWIM §4.2).
func (m *Machine) refute(now time.Time, seen uint64) {
	m.stats.Refutations++
	m.self.setInc(nextIncarnation(seen))
	m.version++
	m.broadcastSelfAlive()
}

func (m *Machine) broadcastSelfAlive() { m.queueOwnNews(m.selfName, m.selfAlive()) }

func (m *Machine) selfAlive() *wire.Alive { return m.aliveOf(m.self) }

// aliveOf is the alive delta of s as this member knows it.
func (m *Machine) aliveOf(s *memberState) *wire.Alive {
	a := &wire.Alive{
		Name:        m.nameOf(s),
		Addr:        wire.EncodeAddr(m.addrOf(s)),
		Incarnation: s.inc(),
		Meta:        m.metaOf(s),
		Versions:    m.versionsOf(s),
		Life:        m.lifeOf(s),
	}
	m.proveAlive(s, a)
	return a
}

// answerStale answers an accusation of s older than the alive we know of
// it: someone still holds a suspicion that s refuted, because the
// refutation missed it, and the accusation it keeps gossiping is the sign.
// We gossip the newer alive once more, as a member accused at an old
// incarnation reasserts itself, so that the holder learns it before its
// suspicion runs out instead of at the next anti-entropy exchange. Only
// when the alive is not already queued untransmitted: a burst of stale
// accusations re-queues it once.
func (m *Machine) answerStale(s *memberState) {
	name := m.nameOf(s)
	if b, queued := m.bq.byKey[name]; queued && b.transmits == 0 {
		return
	}
	m.stats.StaleAccusationsAnswered++
	m.queueNews(name, m.aliveOf(s))
}

// setState sets a member's state, which moves it between the live set and
// the dead list (memberChanged).
func (m *Machine) setState(now time.Time, s *memberState, state State) {
	was := s.state()
	s.setState(state)
	m.memberChanged(now, s, memberStateChanged, was)
}
