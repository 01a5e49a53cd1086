package swim

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// suspicion is the timer that turns a suspect member into a dead one unless
// it refutes first (SWIM §4.2). It is keyed by member and incarnation: a
// suspicion at a newer incarnation replaces it, a refutation cancels it.
// Independent accusations of the same incarnation shorten it (Lifeguard
// §IV-B): the more members fail to reach the suspect on their own, the less
// likely it is that the first accuser was the one in trouble.
type suspicion struct {
	name        string
	incarnation uint64
	start       time.Time // the anchor: the failed probe's start, or when the rumor arrived
	held        time.Time // when this member first held it: a claimed anchor can be forged, this cannot
	deadline    time.Time
	from        string   // who raised it first
	confirmers  []string // distinct accusers after the first, at most k
	// anchors is each accuser's anchor, from's first and then the
	// confirmers' in order: where it says the member fell silent. Only
	// this member's own and what two accusers agree on set the window
	// (windowStart).
	anchors  []time.Time
	k        int // confirmations that bring the timeout down to min
	min, max time.Duration
	// lead starts the final check this much before the timeout, so that
	// the check overlaps the end of the window instead of adding a whole
	// probe timeout after it. The decision still comes after the window
	// (by a fifth of the probe timeout), so a member that resumes from a
	// pause just inside the tolerance has time to answer.
	lead time.Duration
	// relay is added to the deadline while this member only relayed the
	// suspicion (see relayWait); zero once it accused the member itself.
	relay time.Duration
}

// timeout is max(Min, Max - (Max-Min)·ln(C+1)/ln(K+1)) for C confirmations
// (Lifeguard §IV-B): Max with none, falling to Min at K.
func (s *suspicion) timeout() time.Duration {
	if s.k < 1 || s.max <= s.min {
		return s.min
	}
	c := float64(len(s.confirmers))
	frac := math.Log(c+1) / math.Log(float64(s.k)+1)
	t := s.max - time.Duration(frac*float64(s.max-s.min))
	return max(t, s.min)
}

// confirm records an accusation by from, anchored at anchor; it reports
// whether it was new and counted (duplicates from one accuser count once).
// A copy of an accusation held already may move that accuser's anchor
// earlier: a rumor's claimed silence is stamped when it is queued, so the
// copies relayed later claim later anchors than the accuser did.
func (s *suspicion) confirm(from string, anchor time.Time) bool {
	if i := s.accuserIndex(from); i >= 0 {
		s.anchors[i] = earlierTime(s.anchors[i], anchor)
		return false
	}
	if len(s.confirmers) >= s.k {
		return false
	}
	s.confirmers = append(s.confirmers, from)
	s.anchors = append(s.anchors, anchor)
	return true
}

// accuserIndex is where name's anchor is in s.anchors, -1 if it did not
// accuse.
func (s *suspicion) accuserIndex(name string) int {
	if name == s.from {
		return 0
	}
	if i := slices.Index(s.confirmers, name); i >= 0 {
		return i + 1
	}
	return -1
}

// anchorOf is the anchor held for accuser name's accusation, or def if
// it did not accuse.
func (s *suspicion) anchorOf(name string, def time.Time) time.Time {
	if i := s.accuserIndex(name); i >= 0 {
		return s.anchors[i]
	}
	return def
}

// windowStart is where the suspicion's window counts from: the earliest
// of when this member first held it, its own anchor if it accused the
// member itself, and the second earliest of the other accusers' anchors.
// An anchor is a claim of silence; one other member's claim alone never
// moves the window earlier than this member learned of it, so no single
// member's word can cut a paused member's PauseTolerance short (Lifeguard
// §IV-B counts independent accusers; here they must also agree on when).
func (s *suspicion) windowStart(self string) time.Time {
	at := s.held
	first, second := time.Time{}, time.Time{}
	for i, a := range s.anchors {
		who := s.from
		if i > 0 {
			who = s.confirmers[i-1]
		}
		switch {
		case who == self:
			at = earlierTime(at, a)
		case first.IsZero() || a.Before(first):
			first, second = a, first
		case second.IsZero() || a.Before(second):
			second = a
		}
	}
	if !second.IsZero() {
		at = earlierTime(at, second)
	}
	return at
}

func earlierTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// suspicionBounds returns the suspicion timeout with full confirmation
// (Min) and with none (Max = SuspicionMaxTimeoutMult·Min).
//
// With a PauseTolerance T, Min = T: a suspicion is anchored at the start of
// the probe that failed, and a paused member stays silent from at most that
// moment on, so it is not declared dead before it has been silent for T; the
// final check that follows gives it the chance to answer once it resumes.
// Without the final check, Min also covers the time a refutation needs to
// reach everyone: GossipInterval times the gossip rounds to cover N members.
// With no tolerance set, Min = SuspicionMult·max(1, log10 N)·ProbeInterval,
// as in SWIM §4.2 with memberlist's scaling by cluster size.
func (m *Machine) suspicionBounds() (lo, hi time.Duration) {
	n := m.NumMembers()
	if m.cfg.PauseTolerance > 0 {
		lo = m.cfg.PauseTolerance
		if !m.cfg.Detection.FinalCheck {
			lo += m.refutationSpread(n)
		}
	} else {
		scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
		lo = time.Duration(float64(m.cfg.SuspicionMult) * scale * float64(m.cfg.ProbeInterval))
	}
	return lo, lo * time.Duration(m.cfg.SuspicionMaxTimeoutMult)
}

// refutationSpread estimates how long gossip takes to reach n members:
// each round, every member that knows sends to GossipNodes others, so the
// informed set grows about (GossipNodes+1)-fold per GossipInterval.
func (m *Machine) refutationSpread(n int) time.Duration {
	if m.cfg.GossipInterval <= 0 || n <= 1 {
		return m.cfg.ProbeInterval * time.Duration(max(1, int(math.Ceil(math.Log10(float64(n+1))))))
	}
	rounds := math.Ceil(math.Log(float64(n)) / math.Log(float64(m.cfg.GossipNodes+1)))
	return time.Duration(rounds+1) * m.cfg.GossipInterval
}

// confirmationsNeeded is K of Lifeguard §IV-B: SuspicionMult-2, and none
// when the cluster is too small to have that many independent accusers.
func (m *Machine) confirmationsNeeded() int {
	k := m.cfg.SuspicionMult - 2
	if others := m.NumMembers() - 2; others < k {
		k = max(others, 0)
	}
	return k
}

// startSuspicion arms the timer of a member suspected at inc, anchored at
// anchor; for a member already suspected at inc, it counts from as a
// confirmation and reports whether that was new.
func (m *Machine) startSuspicion(now time.Time, name string, inc uint64, from string, anchor time.Time) bool {
	if old, ok := m.suspicions[name]; ok {
		if old.incarnation > inc {
			return false
		}
		if old.incarnation == inc {
			// Since is the earliest silence any accuser claims; the
			// window counts from what windowStart trusts of them.
			old.start = earlierTime(old.start, anchor)
			window := old.windowStart(m.selfName)
			confirmed := old.confirm(from, anchor)
			accused := from == m.selfName && old.relay > 0
			if accused {
				old.relay = 0
			}
			if !old.windowStart(m.selfName).Equal(window) || confirmed || accused {
				m.armSuspicion(old)
			}
			return confirmed
		}
	}
	lo, hi := m.suspicionBounds()
	s := &suspicion{
		name:        name,
		incarnation: inc,
		start:       anchor,
		held:        now,
		from:        from,
		anchors:     []time.Time{anchor},
		k:           m.confirmationsNeeded(),
		min:         lo,
		max:         hi,
	}
	if m.cfg.Detection.FinalCheck {
		s.lead = m.cfg.ProbeTimeout * 4 / 5
	}
	if from != m.selfName {
		s.relay = m.relayWait()
	}
	m.suspicions[name] = s
	m.armSuspicion(s)
	return false
}

// armSuspicion (re)computes the suspicion's deadline and arms its timer;
// a timer armed for an earlier deadline of it no longer matches and is
// dropped.
func (m *Machine) armSuspicion(s *suspicion) {
	s.deadline = s.windowStart(m.selfName).Add(s.timeout() - s.lead + s.relay)
	m.after(s.deadline, timerSuspicion, 0, s.incarnation, s.name)
}

// relayWait is how much longer than an accuser a member that only relayed
// a suspicion waits before its own final check and verdict, in a cluster
// whose relayed news is paced (joinStormGap; from 1,024 members with LAN
// defaults); zero elsewhere. Every member that holds a suspicion runs its
// timer, and most of those timers run out within a few gossip rounds of
// the accuser's; without the wait each of those members pings the suspect
// and many declare the death themselves, each declaration news of its own.
// After 40 of 4,096 members crash at once that is about three final checks
// per member per second for five seconds, most of the packets of the peak.
// With the wait the accuser's verdict usually comes first, and the
// relayer's own check is left for when it does not: the accuser crashed or
// was cut off too, or its verdict was lost. The wait is twice the unpaced
// spread of a rumor (refutationSpread) because paced news hops at
// joinStormGap or on other packets: with one spread a quarter of the
// relayers still ran their checks in that mass failure, with two one in a
// hundred. It costs no accuracy, since a relayer's check never saves a
// member the accuser declared dead (only the member's refutation at a
// higher incarnation does), and a relayer that misses the verdict knows
// the death at most this much later. Below the pacing scale a verdict
// spreads in refutationSpread and the checks are few, so there it waits
// no longer than the accuser.
func (m *Machine) relayWait() time.Duration {
	if m.joinStormGap() <= m.cfg.GossipInterval {
		return 0
	}
	return 2 * m.refutationSpread(m.NumMembers())
}

// cancelSuspicion stops a member's suspicion timer, if any.
func (m *Machine) cancelSuspicion(name string) { delete(m.suspicions, name) }

// expireSuspicion handles a suspicion whose timer ran out: it starts the
// final check, or declares the member dead.
func (m *Machine) expireSuspicion(now time.Time, s *suspicion) {
	delete(m.suspicions, s.name)
	mem := m.lookup(s.name)
	if mem == nil || mem.state() != StateSuspect || mem.inc() != s.incarnation {
		return
	}
	if m.cfg.Detection.AnyTrafficHeartbeat && m.heardSince(mem, s.start.Add(time.Millisecond)) {
		// Geode: the suspect has been heard from since it was accused,
		// so it is not dead; start over from that moment, and tell it of
		// the suspicion so it refutes.
		m.stats.SuspicionsSavedByTraffic++
		m.startSuspicion(now, s.name, s.incarnation, m.selfName, m.lastHeard(mem, now))
		m.send(m.addrOf(mem), &wire.Ping{Seq: m.nextSeq(), Target: s.name, From: m.selfName})
		return
	}
	if m.cfg.Detection.FinalCheck {
		m.startFinalCheck(now, mem, s.accusedBy(m.selfName))
		return
	}
	m.stats.DeathsDeclared++
	m.declareDead(now, mem, s.incarnation, m.selfName, false)
}

// finalCheck is the last direct ping of a suspect before it is declared
// dead (Geode's final check). It carries the suspicion, so a member that is
// alive but missed the accusation, or whose refutation missed us, answers
// with its refutation piggybacked on the ack.
//
// The same check, carrying a claim that the member left or died, confirms
// a leave or a death reported by another member (a claim check): a member
// that did not leave refutes the claim on its ack, one that left answers
// without a refutation; a member reported dead that answers at all is not
// dead. One that does not answer is taken to be what the claim said.
//
// A check is in m.finalChecks, by sequence number, until its verdict; a
// claim check also in m.claimChecks, by name.
type finalCheck struct {
	seq         uint32
	name        string
	incarnation uint64
	gen         uint64 // how often it was (re)armed: the token of its timers
	retried     bool
	leave       bool   // a claim check of a leave: the member is reported left at incarnation
	dead        bool   // a claim check of a death: the member is reported dead at incarnation
	from        string // a claim check: who reported it
	started     time.Time
}

// armCheck (re)starts a check's clock at now: the UDP ping is sent again
// halfway through if still unanswered, and the verdict comes at the end.
func (m *Machine) armCheck(now time.Time, fc *finalCheck) {
	fc.gen++
	fc.retried = false
	// Lifeguard §IV-A scales a probe's timeout by local health; the final
	// check is a probe too, and the last one: a member that has been
	// failing to keep up waits as much longer before its silence kills.
	timeout := m.scaled(m.cfg.ProbeTimeout)
	m.after(now.Add(timeout/2), timerCheckRetry, uint64(fc.seq), fc.gen, "")
	m.after(now.Add(timeout), timerCheckExpire, uint64(fc.seq), fc.gen, "")
}

// ping is the check's ping: every one of them carries the same sequence
// number, so an ack to any of them answers the check.
func (fc *finalCheck) ping(from string) *wire.Ping {
	return &wire.Ping{Seq: fc.seq, Target: fc.name, From: from}
}

// checked returns the suspect fc is about while it is still suspect at the
// checked incarnation, nil once it refuted, died or was forgotten. For a
// leave check: the member while it is live and has not refuted the leave.
func (m *Machine) checked(fc *finalCheck) *memberState {
	mem := m.lookup(fc.name)
	switch {
	case mem == nil:
		return nil
	case fc.isClaim() && mem.live() && mem.inc() <= fc.incarnation:
		return mem
	case !fc.isClaim() && mem.state() == StateSuspect && mem.inc() == fc.incarnation:
		return mem
	}
	return nil
}

// isClaim reports whether fc checks a claim another member made (a leave
// or a death) rather than this member's own suspicion.
func (fc *finalCheck) isClaim() bool { return fc.leave || fc.dead }

// claim is the message a check's ping carries: the suspicion, the leave or
// the death.
func (fc *finalCheck) claim() wire.Message {
	if fc.isClaim() {
		return &wire.Dead{Name: fc.name, Incarnation: fc.incarnation, From: fc.from, Left: fc.leave}
	}
	return &wire.Suspect{Name: fc.name, Incarnation: fc.incarnation, From: fc.from}
}

// maxClaimChecks bounds the death checks in flight. A claim about a live
// member costs one ping and ends in a round trip; only a member that does
// not answer keeps one for a probe timeout. Past the bound, a death is
// held as a suspicion (startClaimCheck), so a flood of claims costs no
// more packets and still kills no one at once. Leave checks are not
// bounded: a mass leave of a scaled-down cluster must not be taken for
// failures, and a member checks each leave once.
const maxClaimChecks = 16

// startClaimCheck asks a live member reported left or dead at
// d.Incarnation by another whether it is (see finalCheck). One check per
// member runs at a time; a report at a higher incarnation replaces it.
// Past maxClaimChecks death checks, a death is held as a suspicion from
// its reporter instead, which the member can refute as any other
// (counted: ClaimChecksRefused).
func (m *Machine) startClaimCheck(now time.Time, mem *memberState, d *wire.Dead) {
	name := m.nameOf(mem)
	old := m.claimCheckOf(name)
	if old != nil {
		if old.incarnation >= d.Incarnation {
			return
		}
		m.endCheck(old)
	}
	if !d.Left && m.deathChecks >= maxClaimChecks {
		m.stats.ClaimChecksRefused++
		if mem.state() == StateAlive {
			m.suspect(now, mem, d.Incarnation, d.From, now)
		}
		return
	}
	fc := &finalCheck{seq: m.nextSeq(), name: name, incarnation: d.Incarnation, leave: d.Left, dead: !d.Left, from: d.From, started: now}
	m.finalChecks[fc.seq] = fc
	m.claimChecks[name] = fc.seq
	m.armCheck(now, fc)
	if d.Left {
		m.stats.LeaveChecks++
	} else {
		m.stats.DeathChecks++
		m.deathChecks++
	}
	m.send(m.addrOf(mem), fc.ping(m.selfName))
}

// deathSettled reports whether a death reported at inc about the live
// member mem may be applied without a check: this member holds it suspect
// at inc, and either its own timer for the suspicion ran out (its final
// check is running or done) or the window has passed from where
// windowStart counts it. A real crash is suspected everywhere, by several
// accusers, seconds before its death is declared, so its death spreads as
// fast as before; a death forged about a member held alive, or one that
// only its own accuser's word makes overdue, is checked (SWIM §4.2: a
// suspect gets its window to refute, whoever reports it dead).
func (m *Machine) deathSettled(now time.Time, mem *memberState, inc uint64) bool {
	if mem.state() != StateSuspect || mem.inc() != inc {
		return false
	}
	sp, ok := m.suspicions[m.nameOf(mem)]
	return !ok || sp.incarnation != inc || !now.Before(sp.windowStart(m.selfName).Add(sp.min))
}

// claimCheckOf returns the leave check in flight of the member called
// name, nil if none.
func (m *Machine) claimCheckOf(name string) *finalCheck {
	seq, ok := m.claimChecks[name]
	if !ok {
		return nil
	}
	return m.finalChecks[seq]
}

// endCheck forgets a final or leave check: its verdict is in, or a newer
// one replaces it. Its timers no longer match and are dropped.
func (m *Machine) endCheck(fc *finalCheck) {
	delete(m.finalChecks, fc.seq)
	if fc.isClaim() && m.claimChecks[fc.name] == fc.seq {
		delete(m.claimChecks, fc.name)
	}
	if fc.dead {
		m.deathChecks--
	}
}

// concludeLeave applies a leave check's verdict: the member left.
func (m *Machine) concludeLeave(now time.Time, fc *finalCheck, mem *memberState) {
	m.declareDead(now, mem, fc.incarnation, fc.from, true)
}

// accusedBy reports whether name accused the member itself (first or as a
// confirmation), rather than only relaying the news.
func (s *suspicion) accusedBy(name string) bool {
	return s.from == name || slices.Contains(s.confirmers, name)
}

// startFinalCheck pings the suspect once more. Every member holding the
// suspicion does so over UDP (one small packet each); only those that
// accused it themselves add the TCP check, which keeps a paused member from
// facing a connection from every member when it resumes.
func (m *Machine) startFinalCheck(now time.Time, mem *memberState, accuser bool) {
	fc := &finalCheck{seq: m.nextSeq(), name: m.nameOf(mem), incarnation: mem.inc()}
	m.finalChecks[fc.seq] = fc
	m.armCheck(now, fc)
	m.stats.FinalChecks++
	ping := fc.ping(m.selfName)
	m.send(m.addrOf(mem), ping)
	if m.cfg.Detection.TCPChecks && accuser && m.tcpCheckAllowed(mem) {
		// The same check over TCP, for networks that drop UDP or lose
		// the one packet that matters.
		m.streamChecks[m.startStreamPing(now, mem, ping, m.cfg.ProbeTimeout)] = fc
	}
}

// finalCheckAnswered handles the ack of a final check in progress: the
// member lives, so its suspicion starts over instead of ending in death.
// Its refutation, carried on the ack, normally clears the suspicion at
// once.
func (m *Machine) finalCheckAnswered(now time.Time, fc *finalCheck) {
	m.endCheck(fc)
	if fc.leave {
		// Answered without refuting (the refutation, carried on the
		// ack, is applied before it): the member did leave.
		if mem := m.checked(fc); mem != nil {
			m.concludeLeave(now, fc, mem)
		}
		return
	}
	if fc.dead {
		// Answered: whoever said it died was wrong, or lying. Its
		// refutation, carried on the ack, tells the others.
		m.stats.DeathClaimsRefuted++
		return
	}
	m.stats.FinalChecksSaved++
	if m.checked(fc) != nil {
		m.startSuspicion(now, fc.name, fc.incarnation, m.selfName, now)
	}
}

// retryCheck pings once more, halfway through the check, a suspect that
// has not answered: a UDP-only check (TCP off, or a member that only
// relayed the suspicion) otherwise fails whenever the ping or its ack is
// lost, 10% of the time at 5% loss, and that is a false death. A retry
// taken so late that the verdict is due as well is skipped: the verdict
// pings again if it runs the check again (health.go).
func (m *Machine) retryCheck(now, due time.Time, fc *finalCheck) {
	fc.retried = true
	if !now.Before(due.Add(m.cfg.ProbeTimeout / 2)) {
		return
	}
	if mem := m.checked(fc); mem != nil {
		m.send(m.addrOf(mem), fc.ping(m.selfName))
	}
}

// expireCheck gives the verdict of a check that was not answered (due is
// when it was due): the suspect is declared dead, the member reported left
// has left. A check expired late (health.go) is run again instead, with the
// same sequence number, so that an ack to any of its pings ends it.
func (m *Machine) expireCheck(now, due time.Time, fc *finalCheck) {
	mem := m.checked(fc)
	if mem == nil {
		m.endCheck(fc)
		return
	}
	if m.lateFor(due, now) {
		m.stats.FinalChecksExtended++
		m.armCheck(now, fc)
		m.send(m.addrOf(mem), fc.ping(m.selfName))
		return
	}
	m.endCheck(fc)
	if fc.leave && m.versionsOf(mem).Effective().ProtocolMax < wire.ProtocolLeaveNotice {
		// No answer from a member of an older release: left, as
		// reported. Such a member exits as soon as its leave is
		// gossiped, before the checks of those its leave reached last;
		// a leave forged while it stalls is taken for its own too
		// (docs/security.md).
		m.concludeLeave(now, fc, mem)
		return
	}
	if fc.isClaim() {
		// A member that leaves tells this one itself and answers its
		// checks until it did (lifecycle.go), and one that is alive
		// refutes a death: a claim it does not answer was forged, or the
		// member failed, or it is paused. Only its silence is this
		// member's own observation, so it is suspected from the check's
		// start with the usual window, and dies only if it stays silent
		// through it (SWIM §4.2): no one member's word skips the window.
		if fc.leave {
			m.stats.LeaveClaimsUnanswered++
		} else {
			m.stats.DeathClaimsUnanswered++
		}
		m.suspect(now, mem, fc.incarnation, m.selfName, fc.started)
		return
	}
	m.stats.DeathsDeclared++
	m.declareDead(now, mem, fc.incarnation, m.selfName, false)
}

// Suspicion is a suspicion in progress, as this member holds it: Name has
// been suspect at Incarnation since Since (the start of the probe that
// failed, or when the rumor arrived), accused first by From and since then
// by Confirmations other members. Unless it refutes, it is declared dead
// at Deadline: at once without Config.Detection.FinalCheck, after one last ping
// unanswered (at most ProbeTimeout) with it. More confirmations bring
// Deadline closer, down to the suspicion's shortest timeout; traffic
// from the suspect (Config.Detection.AnyTrafficHeartbeat) starts it over.
type Suspicion struct {
	Name          string
	Incarnation   uint64
	From          string
	Confirmations int
	Since         time.Time
	Deadline      time.Time
}

// Suspicions returns the suspicions whose timers run, of members suspect
// now, sorted by name. A suspect member missing from it is in its final
// check (Config.Detection.FinalCheck): past its Deadline, waiting for its last
// ping's answer.
func (m *Machine) Suspicions() []Suspicion {
	out := make([]Suspicion, 0, len(m.suspicions))
	for _, s := range m.suspicions {
		if mem := m.lookup(s.name); mem == nil || mem.state() != StateSuspect || mem.inc() != s.incarnation {
			continue
		}
		out = append(out, Suspicion{
			Name: s.name, Incarnation: s.incarnation, From: s.from, Confirmations: len(s.confirmers),
			Since: s.start, Deadline: s.windowStart(m.selfName).Add(s.timeout() + s.relay),
		})
	}
	slices.SortFunc(out, func(a, b Suspicion) int { return strings.Compare(a.Name, b.Name) })
	return out
}
