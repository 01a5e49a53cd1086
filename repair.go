package swim

import (
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Repairing gossip's gaps. Gossip reaches every member with high
// probability, not with certainty (SWIM §4.1). Anti-entropy (push-pull,
// pushpull.go) repairs every gap eventually; this file repairs them as soon
// as they show, in two ways: asks for a member a packet names that this
// one lacks (holes, below), and view digests beside Heartbeats that find a
// gap no packet names (further below). In a join storm the asks wait
// (joinstorm.go decides when; deferHole here keeps them).
//
// Rumor holes. Gossip reaches every member with high probability, not
// with certainty (SWIM §4.1): a member that loses every copy of another's
// alive, or of its refutation, lacks it (or holds it dead) until
// anti-entropy, which at a thousand members comes every few minutes. But
// the member goes on hearing of the one it lacks: as the accuser of a
// suspicion others relay, as the sender of a ping, as the target of a
// ping-req. A packet that shows a member acting (alive now) that this one
// holds dead or has forgotten, or that names one it never heard of, is
// evidence of a hole, and this member asks:
//
//   - the member itself, when it holds an address for it (its entry in the
//     table, or its tombstone): a TCP ping there, which carries the claim
//     that it is dead, as a final check does, so that a member that missed
//     its death refutes it before it answers; the reply brings the
//     member's current alive (holePing);
//   - otherwise, by a push-pull, the member that relayed the name, which
//     holds it, or a random live member when a stranger named itself: the
//     reply fills every hole this member has that the other does not
//     (holePushPull).
//
// Neither contacts an address the packet chose, so a stranger can only make
// this member contact its own members and the addresses of the members it
// declared dead, and only at the rates below. Every ask and every refusal
// is counted (Stats.HolePings, HolePushPulls, HoleAsksRefused).

// Bounds on the asks.
const (
	// holePingBurst TCP pings at once, then holePingRefill per
	// ProbeInterval: after a partition heals, many members held dead act
	// at once, and each ask costs a connection.
	holePingBurst  = 4
	holePingRefill = 1
	// holePingEvery is how often one member is asked, in ProbeIntervals: a
	// member really dead goes on being named by old rumors for a while.
	holePingEvery = 10
	// holePushPullEvery is how often, in ProbeIntervals, a push-pull may
	// ask for members never heard of: one fills every hole this member
	// has that its peer does not, so a second is worth it only once the
	// first's reply is in and more news came; and each carries the
	// whole table.
	holePushPullEvery = 10
	// maxHoleNames bounds the members and peers remembered as asked.
	maxHoleNames = 64
)

// holeAsks is the state of the asks.
type holeAsks struct {
	tokens   float64
	tokensAt time.Time
	// pinged: when each member was last asked by a TCP ping; pushed: when
	// each peer was last asked by a push-pull. At most maxHoleNames each.
	pinged map[string]time.Time
	pushed map[netip.AddrPort]time.Time
	// lastPushPull is when the last push-pull ask started.
	lastPushPull time.Time
	// deferred: the names asks wait for in a join storm (joinstorm.go);
	// at most maxHoleNames.
	deferred map[string]deferredHole
}

// holeNote is a name a packet shows acting (alive now), or names as the
// subject of news; entry is set for the packet's sender held dead, whose
// entry needs no lookup.
type holeNote struct {
	name  string
	actor bool
	entry *memberState
}

// noteNames notes, for askHoles, the names a message of the packet being
// handled, from the member sender (nil for a stranger), shows acting
// (actor) and names as the subject of news (subject), either of them empty
// if none. Names the table holds live are the rule; the commonest, the
// sender's own (a ping's From, an accusation it raised), costs no lookup.
func (m *Machine) noteNames(sender *memberState, actor, subject string) {
	if actor != "" && !m.knownLive(sender, actor) {
		m.addHoleNote(holeNote{name: actor, actor: true})
	}
	if subject != "" && !m.knownLive(sender, subject) {
		m.addHoleNote(holeNote{name: subject})
	}
}

// addHoleNote notes n once per packet (its sender is often named in it
// again, as a ping's From).
func (m *Machine) addHoleNote(n holeNote) {
	for _, o := range m.holeNotes {
		if o == n {
			return
		}
	}
	m.holeNotes = append(m.holeNotes, n)
}

// knownLive reports whether the table holds the member called name live
// (this member included), sender being the packet's (nil for a stranger).
func (m *Machine) knownLive(sender *memberState, name string) bool {
	if sender != nil && sender.live() && m.nameOf(sender) == name || name == m.selfName {
		return true
	}
	s := m.lookup(name)
	return s != nil && s.live()
}

// askHoles asks for the names the packet from the address from noted, now
// that it has been applied.
func (m *Machine) askHoles(now time.Time, from netip.AddrPort) {
	for _, n := range m.holeNotes {
		switch {
		case n.entry != nil:
			// The sender, held dead when its packet came: still so
			// unless the packet carried its refutation.
			m.askDead(now, n.entry)
		case n.actor:
			m.noteActor(now, from, n.name)
		default:
			m.noteSubject(now, from, n.name)
		}
	}
	clear(m.holeNotes)
	m.holeNotes = m.holeNotes[:0]
}

// noteActor handles evidence, in a packet from the address from, that the
// member called name is alive now (it sent a ping or ping-req, or accused
// another member).
func (m *Machine) noteActor(now time.Time, from netip.AddrPort, name string) {
	if name == "" || name == m.selfName || m.self.state() != StateAlive {
		return
	}
	if s := m.lookup(name); s != nil {
		m.askDead(now, s)
		return
	}
	if t := m.tombByName[name]; t != nil {
		if !t.left {
			m.holePing(now, name, t.addr, &wire.Dead{Name: name, Incarnation: t.inc, From: m.selfName, Life: t.life})
		}
		return
	}
	if m.inJoinStorm(now) {
		m.deferHole(now, from, name)
		return
	}
	m.holePushPull(now, m.byAddr(from))
}

// askDead asks the member s, which a packet showed acting, for its alive if
// it is held dead. A member that left and acts again rejoined, and
// announced it with a new alive: only a death can be a mistake to refute.
func (m *Machine) askDead(now time.Time, s *memberState) {
	if s.state() != StateDead || m.self.state() != StateAlive {
		return
	}
	name := m.nameOf(s)
	m.holePing(now, name, m.addrOf(s), &wire.Dead{Name: name, Incarnation: s.inc(), From: m.selfName, Life: m.lifeOf(s)})
}

// noteSubject handles a packet from the address from naming the member
// called name as the subject of news (a suspicion, a ping-req's target): a
// member never heard of is a hole; one held dead or forgotten is news this
// member has already taken into account (the precedence rule and the
// tombstones decide).
func (m *Machine) noteSubject(now time.Time, from netip.AddrPort, name string) {
	if name == "" || name == m.selfName || m.self.state() != StateAlive {
		return
	}
	if m.lookup(name) != nil || m.tombByName[name] != nil {
		return
	}
	if m.inJoinStorm(now) {
		m.deferHole(now, from, name)
		return
	}
	m.holePushPull(now, m.byAddr(from))
}

// holePing asks the member called name, at addr, for its alive by a TCP
// ping carrying claim (that it is dead or left), within the bounds.
func (m *Machine) holePing(now time.Time, name string, addr netip.AddrPort, claim *wire.Dead) {
	h := &m.holes
	if at, ok := h.pinged[name]; ok && now.Sub(at) < holePingEvery*m.cfg.ProbeInterval {
		return // asked already; not a refusal: the ask is in flight or done
	}
	if !m.holeToken(now) || !remember(h.pinged, name, now, holePingEvery*m.cfg.ProbeInterval) {
		m.stats.HoleAsksRefused++
		return
	}
	ping, err := wire.AppendFrame(nil, &wire.Ping{Seq: m.nextSeq(), Target: name, From: m.selfName})
	if err != nil {
		m.stats.EncodeErrors++
		return
	}
	frames := [][]byte{ping}
	if f, err := wire.AppendFrame(nil, claim); err == nil {
		frames = append(frames, f)
	}
	m.stats.HolePings++
	m.stats.TCPPings++
	m.startStream(now, addr, streamPing, wire.AppendCompound(nil, frames), m.cfg.ProbeInterval)
}

// holeToken takes a token of the TCP pings' bucket, if there is one.
func (m *Machine) holeToken(now time.Time) bool {
	h := &m.holes
	if h.tokensAt.IsZero() {
		h.tokens, h.tokensAt = holePingBurst, now
	}
	if el := now.Sub(h.tokensAt); el > 0 {
		h.tokens = min(holePingBurst, h.tokens+holePingRefill*float64(el)/float64(m.cfg.ProbeInterval))
		h.tokensAt = now
	}
	if h.tokens < 1 {
		return false
	}
	h.tokens--
	return true
}

// holePushPull starts a push-pull with the live member sender, or with a
// random live member if sender is nil, within the bounds: one per
// holePushPullEvery ProbeIntervals in all, and the same peer at most once
// per push-pull interval.
func (m *Machine) holePushPull(now time.Time, sender *memberState) {
	h := &m.holes
	if m.cfg.PushPullInterval <= 0 || m.tableSize() >= m.cfg.MaxMembers {
		// Without anti-entropy a member expects holes; with a full table
		// it cannot fill them.
		return
	}
	if !h.lastPushPull.IsZero() && now.Sub(h.lastPushPull) < holePushPullEvery*m.cfg.ProbeInterval {
		m.stats.HoleAsksRefused++
		return
	}
	if sender == nil || !sender.live() || sender == m.self {
		peers := m.randomLive(1, nil)
		if len(peers) == 0 {
			return
		}
		sender = peers[0]
	}
	addr := m.addrOf(sender)
	iv := m.pushPullInterval()
	if at, ok := h.pushed[addr]; ok && now.Sub(at) < iv {
		m.stats.HoleAsksRefused++
		return
	}
	if !remember(h.pushed, addr, now, iv) {
		m.stats.HoleAsksRefused++
		return
	}
	if _, ok := m.startPushPull(now, addr, streamPushPull); ok {
		h.lastPushPull = now
		m.stats.HolePushPulls++
	}
}

// remember records key as asked at now in seen, first forgetting the
// entries older than keep when seen holds maxHoleNames; it reports false if
// there is no room even then.
func remember[K comparable](seen map[K]time.Time, key K, now time.Time, keep time.Duration) bool {
	if len(seen) >= maxHoleNames {
		for k, at := range seen {
			if now.Sub(at) >= keep {
				delete(seen, k)
			}
		}
		if len(seen) >= maxHoleNames {
			return false
		}
	}
	seen[key] = now
	return true
}

// View digests. Gossip reaches every member with high probability, not
// with certainty (SWIM §4.1), and a member that lost every copy of a join
// may go on lacking the member for minutes: once the news is old no packet
// names it, and under paired probing two members meet only once every N−1
// rounds. The asks for holes above need a packet that names the missing
// member; a digest needs none. For a while after its view last changed, a
// member sends beside each Heartbeat a summary of the live members it
// holds (their number and the XOR of their name hashes, wire.ViewDigest),
// and a partner whose own view differs asks for the difference with a
// push-pull (holePushPull, rate-limited as every hole ask is). A hole left
// by a boot, a join or a refutation is found in the first round in which
// the member that has it is paired with one that does not.
//
// Digests are sent only while they can tell something: not while the
// view changes (news still in flight makes views differ for a round or
// two, and a push-pull then would carry a whole table to learn what gossip
// brings anyway), and not once the view has stood still for digestRounds:
// every view that changed around the same time has by then met many
// partners. A cluster at rest sends none, so they cost nothing in the
// steady state; after a change, 9 bytes per Heartbeat for a minute.
//
// A digest asks for nothing by itself: the push-pull goes to the member
// that sent it, at its address in this member's table, at most once per
// holePushPullEvery probe intervals, so a forged one can make a member do
// no more than what any hole ask does.

// digestRounds is how many rounds after the ring last changed Heartbeats
// carry the digest.
const digestRounds = 60

// viewDigest summarises this member's view: the ring holds the live
// members, itself included.
func (m *Machine) viewDigest() wire.ViewDigest {
	return wire.ViewDigest{Live: uint32(m.ring.len()), Digest: m.ringXor}
}

// viewStill reports whether the ring has stood still for the last
// stableRoundsToPair rounds, so that the digest speaks of news that has
// landed.
func (m *Machine) viewStill(now time.Time) bool {
	return m.roundOf(now)-m.ringChanged >= stableRoundsToPair
}

// digestDue reports whether this round's Heartbeats carry the digest.
func (m *Machine) digestDue(now time.Time) bool {
	return m.viewStill(now) && m.roundOf(now)-m.ringChanged <= digestRounds
}

// handleViewDigest compares a partner's digest with this member's view.
// When they differ one of the two asks: the one that holds fewer live
// members (the likelier to lack one), the other when the counts are equal
// and its name comes first; and this one in any case when it sends no
// digest itself, since the sender then cannot tell.
func (m *Machine) handleViewDigest(now time.Time, sender *memberState, d *wire.ViewDigest) {
	if sender == nil || !sender.live() || sender == m.self || m.self.state() != StateAlive || !m.viewStill(now) {
		return
	}
	mine := m.viewDigest()
	if mine == *d {
		return
	}
	m.stats.ViewDigestsDiffering++
	ask := !m.digestDue(now) || mine.Live < d.Live || mine.Live == d.Live && m.selfName < m.nameOf(sender)
	if ask {
		m.holePushPull(now, sender)
	}
}

// deferredHole is a hole ask put off: the address of the packet that named
// the member, and when the ask is due (its timer's token).
type deferredHole struct {
	from netip.AddrPort
	due  time.Time
}

// deferHole remembers that a packet from the address from named the
// unknown member called name, to ask for it after joinStormGrace if it is
// still unknown then. At most maxHoleNames wait; past that the ask is
// dropped (counted as refused): the next packet naming the member notes it
// again.
func (m *Machine) deferHole(now time.Time, from netip.AddrPort, name string) {
	h := &m.holes
	if _, ok := h.deferred[name]; ok {
		return
	}
	if len(h.deferred) >= maxHoleNames {
		m.stats.HoleAsksRefused++
		return
	}
	due := now.Add(m.joinStormGrace())
	h.deferred[name] = deferredHole{from: from, due: due}
	m.stats.HoleAsksDeferred++
	m.after(due, timerHoleAsk, 0, 0, name)
}

// askDeferredHole asks for the member called name, deferred by deferHole,
// unless gossip has brought it meanwhile.
func (m *Machine) askDeferredHole(now time.Time, name string) {
	d, ok := m.holes.deferred[name]
	if !ok {
		return
	}
	delete(m.holes.deferred, name)
	if m.self.state() != StateAlive || m.lookup(name) != nil || m.tombByName[name] != nil {
		return
	}
	m.holePushPull(now, m.byAddr(d.from))
}
