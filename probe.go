package swim

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// probeRound is the one probe a member runs per protocol period (SWIM §3.1):
// a direct ping, then indirect pings through k members if it stays silent.
type probeRound struct {
	target   *memberState
	name     string // the target's, to tell whether its entry is still the same member
	seq      uint32
	start    time.Time
	indirect bool // the direct ping timed out (timerProbeTimeout)
	// nacks expected from and received from the ping-req relays
	// (Lifeguard §IV-A): relays that stay silent point at us.
	nacksExpected, nacksReceived int
	tcpID                        uint64 // fallback TCP ping in flight, 0 if none
	incarnation                  uint64 // the target's when the probe started
	life                         uint64 // the target's when the probe started (lives.go)
	// relays are the members asked to ping the target: only they may
	// relay its ack, each may nack once.
	relays []probeRelay
}

// probeRelay is a member asked to ping a probe's target.
type probeRelay struct {
	addr   netip.AddrPort
	nacked bool
}

// answeredBy reports whether an ack from addr answers p: it must come from
// the target itself or from a relay that was asked. Anyone else could only
// have guessed the sequence number.
func (m *Machine) answeredBy(p *probeRound, addr netip.AddrPort) bool {
	if addr == m.addrOf(p.target) {
		return true
	}
	for _, r := range p.relays {
		if r.addr == addr {
			return true
		}
	}
	return false
}

// relay is a ping this member sends on behalf of a ping-req requester,
// in m.relays until its ack is relayed or it expires (timerRelayExpire).
type relay struct {
	seq          uint32 // our ping's sequence number
	target       netip.AddrPort
	name         string // the target's name, as the request gave it
	requester    netip.AddrPort
	requesterSeq uint32
	start        time.Time // when the ping went out, for the round trip
	nacked       bool
}

func (m *Machine) nextSeq() uint32 {
	m.seq++
	return m.seq
}

// tickProbe starts the next probe when it is due (timerProbe). The probe's
// own timers start its indirect phase and judge it.
func (m *Machine) tickProbe(now time.Time) {
	if m.self.state() != StateAlive || now.Before(m.timers.due[timerProbe]) {
		return
	}
	if m.cfg.AlignedProbing && m.roundOf(now) > m.probeRound+1 {
		// We were not running for more than a round (a pause): start
		// again from the present round instead of catching up on the
		// rounds missed.
		m.probeRound = m.roundOf(now)
		m.scheduleNextProbe(now)
		return
	}
	if !m.probingIn(m.probeRound) {
		return // the ring is stable: pairing checks every member (wanted)
	}
	target := m.nextProbeTarget(now)
	m.scheduleNextProbe(now)
	if target == nil {
		return
	}
	m.startProbe(target, now)
}

// startProbe pings target and arms the probe's timers as from start: its
// indirect phase after ProbeTimeout, its verdict after ProbeInterval, both
// longer while we are unhealthy (Lifeguard §IV-A).
func (m *Machine) startProbe(target *memberState, start time.Time) {
	p := &probeRound{
		target:      target,
		name:        m.nameOf(target),
		incarnation: target.inc(),
		life:        m.lifeOf(target),
		seq:         m.nextSeq(),
		start:       start,
	}
	m.probes = append(m.probes, p)
	m.after(start.Add(m.scaled(m.cfg.ProbeTimeout)), timerProbeTimeout, uint64(p.seq), 0, "")
	m.after(start.Add(m.scaled(m.cfg.ProbeInterval)), timerProbeEnd, uint64(p.seq), 0, "")
	m.stats.Probes++
	m.send(m.addrOf(target), &wire.Ping{Seq: p.seq, Target: p.name, From: m.selfName})
}

// scheduleNextProbe sets when the next probe starts. Lifeguard §IV-A: an
// unhealthy member probes less often, skipping health-score rounds.
func (m *Machine) scheduleNextProbe(now time.Time) {
	if !m.cfg.AlignedProbing {
		m.timers.due[timerProbe] = now.Add(m.scaled(m.cfg.ProbeInterval))
		return
	}
	m.probeRound += int64(m.health + 1)
	m.timers.due[timerProbe] = m.roundTime(m.probeRound, m.alignedTarget(m.probeRound))
}

func (m *Machine) findProbe(seq uint32) *probeRound {
	for _, p := range m.probes {
		if p.seq == seq {
			return p
		}
	}
	return nil
}

func (m *Machine) removeProbe(p *probeRound) {
	if i := slices.Index(m.probes, p); i >= 0 {
		m.probes = slices.Delete(m.probes, i, i+1)
	}
}

// nextProbeTarget picks the member to probe now.
func (m *Machine) nextProbeTarget(now time.Time) *memberState {
	if m.cfg.AlignedProbing {
		return m.alignedTarget(m.probeRound)
	}
	return m.shuffledTarget()
}

// Aligned probing. SWIM's randomized round-robin (§4.3) probes each member
// once per pass of every prober, but at independent random times: in a
// given period nobody probes a given member with probability about 1/e, so
// the first probe of a crashed member comes after 4.6 periods at p99. Here
// every member sorts the live members into one ring by a hash of their
// names and, in round r, probes the member (r mod (N-1))+1 places after
// itself. Rounds are numbered from the clock (round r is the r-th
// ProbeInterval since the Unix epoch), so while views agree each round is a
// permutation: every member is probed exactly once per round. Each target
// is probed at a fixed phase within the round, derived from its name, so
// consecutive probes of a member are one interval apart and a crash is
// first probed within one ProbeInterval; the phases also spread the traffic
// over the round. Views that disagree during churn only make a round probe
// some member twice and another not at all. A prober's probes can overlap
// (one target's phase late in a round, the next one's early), so several
// may be in flight.

// roundOf numbers the probe rounds from the clock.
func (m *Machine) roundOf(now time.Time) int64 {
	return now.UnixNano() / int64(m.cfg.ProbeInterval)
}

// roundTime is when target is probed in round r: at its phase within the
// round (the round's start when there is no target).
func (m *Machine) roundTime(r int64, target *memberState) time.Time {
	t := r * int64(m.cfg.ProbeInterval)
	if target != nil {
		t += int64(m.reg.ringKeys[target.id] % uint64(m.cfg.ProbeInterval))
	}
	return time.Unix(0, t).UTC()
}

// alignedTarget is the member this one probes in round r.
func (m *Machine) alignedTarget(r int64) *memberState {
	n := m.ring.len()
	if n < 2 {
		return nil
	}
	pos := m.ringSelfPos()
	if pos < 0 {
		return nil
	}
	off := 1 + int(uint64(r)%uint64(n-1))
	return m.entry(m.ring.at((pos + off) % n))
}

// shuffledTarget walks the probe list in its shuffled order and reshuffles
// it after each full pass: randomized round-robin, which bounds the time
// until any given member is probed (SWIM §4.3).
func (m *Machine) shuffledTarget() *memberState {
	for attempts := 0; attempts < 2; attempts++ {
		for m.probeNext < len(m.probeOrder) {
			id := m.probeOrder[m.probeNext]
			s := m.entry(id)
			m.probeNext++
			m.probeQueued.remove(id)
			if s != nil && s.live() && s != m.self {
				return s
			}
		}
		m.rebuildProbeOrder()
		if len(m.probeOrder) == 0 {
			return nil
		}
	}
	return nil
}

// rebuildProbeOrder drops members no longer probed and reshuffles the rest.
func (m *Machine) rebuildProbeOrder() {
	for _, id := range m.probeOrder[m.probeNext:] {
		m.probeQueued.remove(id)
	}
	m.probeOrder = m.probeOrder[:0]
	m.ring.each(func(id uint32) {
		if id != m.self.id {
			m.probeOrder = append(m.probeOrder, id)
			m.probeQueued.add(id)
		}
	})
	m.rng.Shuffle(len(m.probeOrder), func(i, j int) {
		m.probeOrder[i], m.probeOrder[j] = m.probeOrder[j], m.probeOrder[i]
	})
	m.probeNext = 0
}

// addToProbeOrder places a new member at a random position among those not
// yet probed in this pass (SWIM §4.3), so it is probed within one pass. A
// member back from the dead may still have its old entry later in this
// pass (as may a new member under the id of a forgotten one); one is
// enough.
func (m *Machine) addToProbeOrder(s *memberState) {
	if m.cfg.AlignedProbing {
		return // aligned probing walks the ring instead
	}
	if !m.probeQueued.add(s.id) {
		return
	}
	m.probeOrder = append(m.probeOrder, s.id)
	last := len(m.probeOrder) - 1
	pos := m.probeNext + m.rng.IntN(last-m.probeNext+1)
	m.probeOrder[pos], m.probeOrder[last] = m.probeOrder[last], m.probeOrder[pos]
}

// startIndirect asks IndirectChecks random live members to ping the target
// and relay its ack (SWIM §3.1).
func (m *Machine) startIndirect(now time.Time, p *probeRound) {
	p.indirect = true
	if m.lookup(p.name) != p.target || !p.target.live() {
		return
	}
	req := &wire.PingReq{
		Seq:        p.seq,
		Target:     p.name,
		TargetAddr: wire.EncodeAddr(m.addrOf(p.target)),
		From:       m.selfName,
	}
	for _, peer := range m.randomLive(m.cfg.IndirectChecks, p.target) {
		m.stats.PingReqsSent++
		if m.cfg.Detection.Nacks {
			p.nacksExpected++
		}
		p.relays = append(p.relays, probeRelay{addr: m.addrOf(peer)})
		m.send(m.addrOf(peer), req)
	}
	if m.cfg.Detection.TCPChecks && m.tcpCheckAllowed(p.target) {
		// In parallel with the indirect probes, for networks that drop
		// UDP to some members: a TCP connection that answers is alive.
		p.tcpID = m.startStreamPing(now, p.target, &wire.Ping{Seq: p.seq, Target: p.name, From: m.selfName}, m.scaled(m.cfg.ProbeInterval-m.cfg.ProbeTimeout))
	}
}

func (m *Machine) tcpCheckAllowed(s *memberState) bool {
	return m.cfg.Detection.TCPCheckFilter == nil || m.cfg.Detection.TCPCheckFilter(m.nameOf(s))
}

// probeSucceeded ends the current probe on an ack (direct, relayed or over
// TCP).
func (m *Machine) probeSucceeded(p *probeRound) {
	m.removeProbe(p)
	m.adjustHealth(-1)
}

// probeEnded handles a period that ended without an ack. If the target was
// heard from during the probe (any packet, Geode's heartbeat rule), the ack
// was merely lost: success. Otherwise the target becomes suspect, not dead
// (SWIM §4.2), and our health score rises: by one, or by the nacks that did
// not come, which say our own link is the problem (Lifeguard §IV-A).
func (m *Machine) probeEnded(now, due time.Time, p *probeRound) {
	t := p.target
	if m.lookup(p.name) != t {
		// Forgotten while we probed it.
		return
	}
	if m.cfg.Detection.AnyTrafficHeartbeat && m.heardSince(t, p.start) {
		m.stats.ProbesSavedByTraffic++
		m.adjustHealth(-1)
		return
	}
	if !t.live() || t.inc() != p.incarnation || m.lifeOf(t) != p.life {
		// Declared dead, gone, or back at a new incarnation (it refuted)
		// or a new life (it restarted) while we probed it: our silence
		// from it says nothing about us, nor anything about its present
		// life.
		return
	}
	m.stats.ProbesFailed++
	if m.lateFor(due, now) {
		// We were not running when the answer was due (health.go): the
		// silence may be ours.
		m.stats.ProbesInconclusive++
		return
	}
	if p.nacksExpected > 0 {
		// Each relay nacks at most once (handleNack), so this is never
		// negative.
		missing := max(p.nacksExpected-p.nacksReceived, 0)
		m.stats.NacksMissing += uint64(missing)
		m.adjustHealth(missing)
		if p.nacksReceived == 0 {
			// Not one relay answered, not even to say the target was
			// silent: the failure says nothing about the target that it
			// does not say about our own links, so we accuse no one
			// (Lifeguard §IV-A taken one step further: a requester that
			// misses every nack is the one in trouble).
			m.stats.SuspicionsWithheld++
			return
		}
	} else {
		m.adjustHealth(1)
	}
	if m.restartPending(t) {
		// A new life of it is being checked (lives.go): the silence of
		// the old one is expected, and the check decides.
		m.stats.SuspicionsWithheld++
		return
	}
	wasSuspect := t.state() == StateSuspect
	m.suspect(now, t, t.inc(), m.selfName, p.start)
	if !wasSuspect {
		m.tellSuspect(t)
		m.treeTellNeighbors(now, t)
	}
}

// tellSuspect sends a member this one has just accused a ping carrying the
// suspicion (claimFor), so that a member that is alive but was late to
// answer refutes on the ack, one round trip after the accusation.
// Lifeguard §IV-C has the next prober's ping carry the suspicion; under
// aligned and paired probing the next prober is the next one on the ring,
// which hears of the suspicion only by gossip, so without this the suspect
// learns of it no sooner than everyone else does: at 4,096 members, with
// relayed news paced, seconds later, and a member held back by a busy
// machine then refutes too late for the holders whose timers run out
// first. A member already held suspect was told by our probe's own pings.
// The cost is one ping, and for a live member its ack, per accusation.
func (m *Machine) tellSuspect(s *memberState) {
	if !m.cfg.Detection.BuddyPing || s.state() != StateSuspect {
		return
	}
	m.stats.SuspectsTold++
	m.send(m.addrOf(s), &wire.Ping{Seq: m.nextSeq(), Target: m.nameOf(s), From: m.selfName})
}

// randomLive picks up to n distinct random live members other than exclude.
func (m *Machine) randomLive(n int, exclude *memberState) []*memberState {
	if n <= 0 || m.numOthers() == 0 {
		return nil
	}
	out := make([]*memberState, 0, n)
	// Rejection sampling is cheap while n is small next to the member
	// count; the attempt bound covers tiny clusters.
	for attempts := 0; len(out) < n && attempts < 4*n+8; attempts++ {
		s := m.entry(m.ring.at(m.rng.IntN(m.ring.len())))
		if s == exclude || s == m.self || s.state() != StateAlive {
			continue
		}
		dup := false
		for _, o := range out {
			if o == s {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, s)
		}
	}
	return out
}

// handlePing answers a ping addressed to this member with an ack. sender is
// the member at the ping's source address, nil if none: a stranger (or a
// member we have not heard of yet) gets the bare ack, no piggybacked
// deltas, and only when the ack is no larger than its ping, so that a
// spoofed source address cannot make us send more than the spoofer did.
func (m *Machine) handlePing(now time.Time, from netip.AddrPort, sender *memberState, p *wire.Ping, size int) {
	if p.Target != "" && p.Target != m.selfName || p.TargetLife != 0 && p.TargetLife != m.life {
		// Another member, or another life of this one, used to live at
		// this address; staying silent lets the prober find out that its
		// target is gone.
		m.stats.PacketsDropped++
		return
	}
	ack := &wire.Ack{Seq: p.Seq}
	if p.From == m.selfName && m.self.state() == StateAlive {
		// A process at from pings in this member's name: a second
		// process named alike checking on us (admission.go).
		defer m.checkConflict(now, from)
	}
	if sender == nil {
		m.sendPlain(from, ack, size)
		return
	}
	if ap := m.ackPayloadFor(sender, p.Seq); ap != nil {
		m.sendWith(from, ack, ap)
		return
	}
	m.send(from, ack)
}

// maxRelays bounds the ping-reqs served at once. A member receives about
// IndirectChecks of them per failed probe in the cluster, each living one
// ProbeTimeout; more than this means a storm or abuse, and refusing only
// costs the requester one of its k paths.
const maxRelays = 1024

// maxRelayBurst bounds the rate of ping-reqs served: at most this many at
// once, refilled at this many per ProbeInterval. Across the cluster a member
// receives about IndirectChecks·(failed probes)/N a round, a fraction of
// one even when a tenth of the cluster fails at once; a requester over the
// rate is a storm or abuse, and a refusal costs it one of its k paths.
const maxRelayBurst = 64

// takeRelayToken reports whether a ping-req may be served now.
func (m *Machine) takeRelayToken(now time.Time) bool {
	if el := now.Sub(m.relayTokensAt); el > 0 {
		m.relayTokens = min(maxRelayBurst, m.relayTokens+float64(maxRelayBurst)*float64(el)/float64(m.cfg.ProbeInterval))
		m.relayTokensAt = now
	}
	if m.relayTokens < 1 {
		return false
	}
	m.relayTokens--
	return true
}

// handlePingReq pings the target on the requester's behalf (SWIM §3.1).
// It is served only for a live member (sender, the member at the source
// address) and at a bounded rate: otherwise anyone could have us ping any
// address. size is the request's packet size.
func (m *Machine) handlePingReq(now time.Time, from netip.AddrPort, sender *memberState, r *wire.PingReq, size int) {
	addr, err := wire.DecodeAddr(r.TargetAddr)
	if err != nil {
		m.stats.PacketsDropped++
		return
	}
	if sender == nil || !sender.live() || addr == m.addrOf(m.self) {
		m.stats.PingReqsRefused++
		return
	}
	if len(m.relays) >= maxRelays || !m.takeRelayToken(now) {
		m.stats.PingReqsRefused++
		return
	}
	m.stats.PingReqsServed++
	rl := &relay{
		seq:          m.nextSeq(),
		target:       addr,
		requester:    from,
		requesterSeq: r.Seq,
		start:        now,
		name:         r.Target,
	}
	m.relays[rl.seq] = rl
	if m.cfg.Detection.Nacks {
		// Lifeguard §IV-A: the nack goes out at 80% of the probe
		// timeout, early enough to reach the requester in time.
		m.after(now.Add(m.cfg.ProbeTimeout*4/5), timerRelayNack, uint64(rl.seq), 0, "")
	}
	m.after(now.Add(m.cfg.ProbeTimeout), timerRelayExpire, uint64(rl.seq), 0, "")
	ping := &wire.Ping{Seq: rl.seq, Target: r.Target, From: m.selfName}
	if target := m.lookup(r.Target); target == nil || target == m.self || m.addrOf(target) != addr {
		// A target we do not know there (the requester may well know
		// better: a member that just joined or moved) gets the bare ping,
		// so that a ping-req forged in a member's name reflects no more
		// bytes than it carried.
		m.sendPlain(addr, ping, size)
		return
	}
	m.send(addr, ping)
}

// handleAck completes our probe, an application's ping (userping.go), an
// address check (addrcheck.go), a leave notice (lifecycle.go), a final or
// claim check (suspicion.go), or relays an ack to a ping-req requester.
// An ack counts only from the address it was asked of (the target, or a
// relay asked): a stranger would have had to guess the sequence number,
// and one who saw the ping could still not fake an answer from elsewhere.
func (m *Machine) handleAck(now time.Time, from netip.AddrPort, a *wire.Ack) {
	if p := m.findProbe(a.Seq); p != nil {
		if !m.answeredBy(p, from) {
			m.stats.AcksRefused++
			return
		}
		if from == m.addrOf(p.target) {
			// A direct answer (possibly after the indirect phase began):
			// a round-trip sample.
			m.sampleRTT(p.name, now.Sub(p.start))
			m.observeRTT(now.Sub(p.start))
			m.ackHeard(p.target, a.Seq, now.Sub(p.start))
		}
		m.probeSucceeded(p)
		return
	}
	if m.pingAnswered(now, from, a.Seq) || m.addrCheckAnswered(now, from, a.Seq) || m.leaveNoticeAnswered(from, a.Seq) {
		return
	}
	if fc, ok := m.finalChecks[a.Seq]; ok {
		if mem := m.lookup(fc.name); mem == nil || m.addrOf(mem) != from {
			m.stats.AcksRefused++
			return
		}
		m.finalCheckAnswered(now, fc)
		return
	}
	if rl, ok := m.relays[a.Seq]; ok {
		if from != rl.target {
			m.stats.AcksRefused++
			return
		}
		delete(m.relays, a.Seq)
		m.observeRTT(now.Sub(rl.start))
		m.send(rl.requester, &wire.Ack{Seq: rl.requesterSeq})
	}
}

// handleNack notes a relay's report that the target stayed silent: the
// relay is reachable, so our own link works (Lifeguard §IV-A). Only a relay
// that was asked counts, once.
func (m *Machine) handleNack(now time.Time, from netip.AddrPort, n *wire.Nack) {
	p := m.findProbe(n.Seq)
	if p == nil {
		return
	}
	for i := range p.relays {
		if r := &p.relays[i]; r.addr == from && !r.nacked {
			r.nacked = true
			m.stats.NacksReceived++
			p.nacksReceived++
			return
		}
	}
	m.stats.AcksRefused++
}

// relayNack tells a ping-req requester that the target has not answered
// the relay's ping (Lifeguard §IV-A).
func (m *Machine) relayNack(rl *relay) {
	rl.nacked = true
	m.stats.NacksSent++
	m.send(rl.requester, &wire.Nack{Seq: rl.requesterSeq})
}

// startStreamPing checks a member over TCP: the ping (with the member's
// suspicion, if we hold one) goes on a stream, and the member replies with
// an ack and its current alive, which proves it is the same member at an
// incarnation we can compare.
func (m *Machine) startStreamPing(now time.Time, target *memberState, ping *wire.Ping, timeout time.Duration) uint64 {
	frames := make([][]byte, 0, 2)
	f, err := wire.AppendFrame(nil, ping)
	if err != nil {
		m.stats.EncodeErrors++
		return 0
	}
	frames = append(frames, f)
	if sp := m.suspicionOf(target); sp != nil {
		if f, err := wire.AppendFrame(nil, sp); err == nil {
			frames = append(frames, f)
		}
	}
	m.stats.TCPPings++
	return m.startStream(now, m.addrOf(target), streamPing, wire.AppendCompound(nil, frames), timeout)
}

// handleStreamPing answers a ping received over TCP with an ack and this
// member's alive. The messages riding with the ping (a suspicion of us) are
// applied first, so a refutation is in the reply.
func (m *Machine) handleStreamPing(now time.Time, from netip.AddrPort, p *wire.Ping, rest []wire.Message) ([]byte, error) {
	if p.Target != m.selfName {
		return nil, fmt.Errorf("swim: TCP ping from %s for %q, this is %q", from, p.Target, m.selfName)
	}
	for _, msg := range rest {
		switch msg := msg.(type) {
		case *wire.Suspect:
			m.handleSuspect(now, msg)
		case *wire.Dead:
			m.handleDead(now, msg, nil)
		}
	}
	ack, err := wire.AppendFrame(nil, &wire.Ack{Seq: p.Seq})
	if err != nil {
		return nil, err
	}
	alive, err := wire.AppendFrame(nil, m.selfAlive())
	if err != nil {
		return nil, err
	}
	return wire.AppendCompound(nil, [][]byte{ack, alive}), nil
}

// handleStreamPingReply completes a TCP ping: the alive in the reply is
// applied (it refutes a suspicion at once), and the ack answers the check.
func (m *Machine) handleStreamPingReply(now time.Time, id uint64, resp []byte, err error) error {
	fc := m.streamChecks[id]
	delete(m.streamChecks, id)
	var probe *probeRound
	for _, p := range m.probes {
		if p.tcpID == id {
			probe = p
		}
	}
	if err != nil {
		m.stats.TCPPingsFailed++
		return err
	}
	if err := wire.CheckSmallStreamPacket(resp); err != nil {
		m.stats.TCPPingsFailed++
		return fmt.Errorf("swim: TCP ping reply: %w", err)
	}
	msgs, err := wire.DecodeStreamPacket(resp)
	if err != nil {
		m.stats.TCPPingsFailed++
		return fmt.Errorf("swim: TCP ping reply: %w", err)
	}
	for _, msg := range msgs {
		switch msg := msg.(type) {
		case *wire.Alive:
			m.handleAlive(now, msg, mergeGossip, vouched)
		case *wire.Ack:
			if fc != nil && msg.Seq == fc.seq && m.finalChecks[fc.seq] == fc {
				m.finalCheckAnswered(now, fc)
			}
			if probe != nil && msg.Seq == probe.seq && slices.Contains(m.probes, probe) {
				m.stats.TCPProbesSaved++
				m.probeSucceeded(probe)
			}
		}
	}
	return nil
}
