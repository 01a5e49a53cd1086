package swim

import (
	"net/netip"
	"time"
	"unicode/utf8"

	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/wire"
)

// The gates of a claim. A membership delta (alive, suspect, dead or left)
// is a claim about a member, and takes effect only if its author may say
// it. Each kind passes one ordered list of gates, below; the first gate
// that takes the claim ends its way, and a claim no gate takes is applied.
// A gate that takes a claim drops it (counting it or not), answers it, or
// starts a check at an address whose verdict brings the claim back later
// (addrcheck.go, with a source that the same gate then lets through).
//
// The lists are the single place that states the order (TestGateOrder
// and the list in docs/security.md follow it). It is cheapest first but
// for one seam: with signatures on, an alive's signature is verified
// ("signature") before its life, versions, staleness, address, name and
// capacity are looked at, since the gates after it act on what the claim
// says. What may reach the verifier is decided first, cheaply: copies
// that change nothing held are dropped before it ("news"), and
// "signature" itself verifies an unsolicited claim only within its
// source's budget and a stranger's only when it is its member's own word,
// leaving a member not known to the newcomer check.

// A gate is one check on the way of a claim of type C to the table.
type gate[C any] struct {
	name string
	// doc says what the gate checks and what it does with a claim it
	// takes.
	doc string
	// take reports whether the gate took the claim: it goes no further.
	take func(m *Machine, c *C) bool
}

// passGates runs c through gates in order, and reports whether one took
// it.
func passGates[C any](m *Machine, gates []gate[C], c *C) bool {
	for i := range gates {
		if gates[i].take(m, c) {
			return true
		}
	}
	return false
}

// aliveClaim is an alive delta on its way through aliveGates.
type aliveClaim struct {
	now time.Time
	a   *wire.Alive
	src mergeSource
	o   teller
	s   *memberState // held under a.Name; nil: not held

	// Set by the gates on the way, for the later ones and the apply.
	addr    netip.AddrPort // "address": a.Addr decoded
	moved   bool           // "move": a.Addr is not the held address
	life    uint64         // "admit change": the life to hold
	changed bool           // "admit change": address, metadata or versions change
}

// claimSpares keeps one claim of each kind for the next delta, so that
// passing the gates allocates nothing: the gates are called through
// function values, which makes a claim escape to the heap. A delta that
// arrives while its kind's spare is in use (a gate's consequence handing
// the Machine another) takes a new one.
type claimSpares struct {
	alive   *aliveClaim
	suspect *suspectClaim
	dead    *deadClaim
}

// spare returns *p, or a new claim if it is in use (nil), leaving *p nil
// until the caller hands the claim back.
func spare[C any](p **C) *C {
	c := *p
	if c == nil {
		return new(C)
	}
	*p = nil
	return c
}

// aliveGates, suspectGates and deadGates are the gates of each kind of
// claim, in the order a claim meets them. They are set in init: the gates
// start checks whose verdicts come back through the handlers that run the
// lists.
var (
	aliveGates   []gate[aliveClaim]
	suspectGates []gate[suspectClaim]
	deadGates    []gate[deadClaim]
)

func init() {
	aliveGates = []gate[aliveClaim]{
		{"size", "an empty name, or metadata over MaxMetaSize: dropped, counted (PacketsDropped)", (*Machine).gateAliveSize},
		{"own life", "this member's name at another life: a previous or a second process, checked at its address when it is under this member's key (or one a trusted root certifies for the name)", (*Machine).gateOwnLife},
		{"own name", "this member's name at its own life: a newer incarnation refuted, and the address checked for a second process of the name", (*Machine).gateOwnName},
		{"news", "with signatures on, a copy that changes nothing held: dropped before its signature is verified", (*Machine).gateAliveNews},
		{"signature", "with signatures on, not the word of the key its name is bound to: dropped, counted; unsolicited, verified only within its source's budget (Claims.OverBudget), and from a stranger only when it is the member's own word (Claims.FromStrangers), a member not known left to \"newcomer\"", (*Machine).gateAliveSignature},
		{"key binding", "a signed copy of what is held, for a name bound to no key yet: the key bound, the claim passed on", (*Machine).gateBindsKey},
		{"other life", "a held member at another life: a restart, a second process or a forgery, checked at its address first; an address that does not decode dropped, counted (PacketsDropped)", (*Machine).gateOtherLife},
		{"versions word", "a held member's life with other versions than held, not its own word (from its address, or signed): the held versions kept, counted (VersionsRefused)", (*Machine).gateVersionsWord},
		{"versions", "the held incarnation, with versions or a life the held entry lacks: learned, and the claim goes no further", (*Machine).gateVersions},
		{"stale", "what is held takes precedence, or the incarnation is implausibly far ahead (counted, DeltasImplausible): dropped", (*Machine).gateAliveStale},
		{"address", "an address that does not decode: dropped, counted (PacketsDropped)", (*Machine).gateAddress},
		{"name text", "a member not held whose name is not UTF-8: dropped, counted (PacketsDropped)", (*Machine).gateNameText},
		{"tombstone", "a member forgotten after its death, at no newer incarnation, not from an exchange this member started: counted (DeltasStale), its death gossiped again", (*Machine).gateTombstone},
		{"capacity", "a member not held while MaxMembers are held or the registry's versions are full: refused, counted (MembersRefused)", (*Machine).gateCapacity},
		{"newcomer", "a member not held, from no live member at its own address: checked at its address first", (*Machine).gateNewcomer},
		{"admit", "a member not held that Config.Admission.Admit refuses: dropped, counted (Admission.Refused)", (*Machine).gateAdmit},
		{"move", "a live member at another address, not from a move check: checked at both addresses first", (*Machine).gateMove},
		{"admit change", "a change that Config.Admission.Admit refuses (Admission.Updates): the member taken out of this view, held dead here", (*Machine).gateAdmitChange},
	}
	suspectGates = []gate[suspectClaim]{
		{"own name", "this member's name at its life (or none): refuted if at or above its incarnation, else its alive gossiped again (Reasserts)", (*Machine).gateSuspectSelf},
		{"other life", "a held member at another life: dropped, counted (DeltasStale)", (*Machine).gateSuspectOtherLife},
		{"echo", "an accusation in this member's own name: its own news come back, or a forgery, dropped (only its own probes make it an accuser)", (*Machine).gateSuspectEcho},
		{"older than alive", "a member held alive at a newer incarnation: that alive gossiped again (StaleAccusationsAnswered)", (*Machine).gateSuspectOlder},
		{"unknown", "a member not held: dropped; a hole to repair when no tombstone knows it either", (*Machine).gateSuspectUnknown},
		{"stale", "what is held takes precedence, or the incarnation is implausibly far ahead (counted, DeltasImplausible): dropped", (*Machine).gateSuspectStale},
		{"repeat", "by an accuser whose accusation of the member was refuted lately: dropped while it waits, counted (AccusationsWaited)", (*Machine).gateSuspectRepeat},
		{"signature", "with signatures on, the accuser's signature missing or wrong, or past the accuser's bound: dropped, counted", (*Machine).gateSuspectSignature},
	}
	deadGates = []gate[deadClaim]{
		{"own name", "this member's name at its life (or none): refuted if at or above its incarnation, else its alive gossiped again (Reasserts)", (*Machine).gateDeadSelf},
		{"other life", "a held member at another life: dropped, counted (DeltasStale)", (*Machine).gateDeadOtherLife},
		{"echo", "an accusation in this member's own name: its own news come back, or a forgery, dropped", (*Machine).gateDeadEcho},
		{"unknown", "a member not held: dropped", (*Machine).gateDeadUnknown},
		{"stale", "what is held takes precedence, or the incarnation is implausibly far ahead (counted, DeltasImplausible): dropped", (*Machine).gateDeadStale},
		{"signature", "with signatures on, a leave not signed by its member's key, a relayed leave, or an accusation not signed by its accuser or past the accuser's bound: dropped, counted", (*Machine).gateDeadSignature},
		{"member's word", "a live member's death before its suspicion window passed as this member counts it, or a leave that is not its own word: asked of the member first (DeathChecks, LeaveChecks); unanswered, it is suspected with the usual window", (*Machine).gateDeadCheck},
	}
}

// handleAlive runs an alive delta, passed on by o, through aliveGates and
// applies it if none takes it.
func (m *Machine) handleAlive(now time.Time, a *wire.Alive, src mergeSource, o teller) {
	c := spare(&m.claimSpares.alive)
	*c = aliveClaim{now: now, a: a, src: src, o: o}
	if a.Name != m.selfName {
		c.s = m.lookup(a.Name)
	}
	switch {
	case passGates(m, aliveGates, c):
	case c.s == nil:
		m.applyJoin(c)
	default:
		m.applyAlive(c)
	}
	*c = aliveClaim{} // keeps nothing of the delta
	m.claimSpares.alive = c
}

func (m *Machine) gateAliveSize(c *aliveClaim) bool {
	if len(c.a.Name) == 0 || len(c.a.Meta) > m.cfg.MaxMetaSize {
		m.stats.PacketsDropped++
		return true
	}
	return false
}

func (m *Machine) gateOwnLife(c *aliveClaim) bool {
	a := c.a
	if a.Name != m.selfName || a.Life == 0 || a.Life == m.life {
		return false
	}
	if addr, err := wire.DecodeAddr(a.Addr); err == nil && m.ownLifeProven(c.now, a) {
		m.ownLife(c.now, a, addr)
	}
	return true
}

func (m *Machine) gateOwnName(c *aliveClaim) bool {
	a := c.a
	if a.Name != m.selfName {
		return false
	}
	// Someone holds a newer incarnation of us, from a previous life
	// under this name: overtake it.
	if a.Incarnation > m.self.inc() && m.self.state() == StateAlive && m.plausible(m.self, a.Incarnation) {
		m.refute(c.now, a.Incarnation)
	}
	// Or from a second process of the same name: find out.
	if addr, err := wire.DecodeAddr(a.Addr); err == nil && m.self.state() == StateAlive {
		m.checkConflict(c.now, addr)
	}
	return true
}

func (m *Machine) gateAliveNews(c *aliveClaim) bool {
	return m.signing() && !m.aliveNews(c.a, c.s)
}

func (m *Machine) gateAliveSignature(c *aliveClaim) bool {
	if !m.signing() {
		return false
	}
	if unsolicited := c.src == mergeGossip || c.src == mergePushPull; unsolicited {
		addr, err := wire.DecodeAddr(c.a.Addr)
		switch {
		case !c.o.member && c.s == nil:
			// A member not known, from a stranger: "newcomer" checks
			// its address first, and the check brings the claim back
			// to be verified.
			return false
		case !c.o.member && (err != nil || !ownNews(c.o, c.a.Name, addr)):
			m.stats.Claims.FromStrangers++
			return true
		case !m.verifies.take(c.now, c.o.from.Addr()):
			m.stats.Claims.OverBudget++
			return true
		}
	}
	return !m.aliveProven(c.now, c.a, c.s)
}

func (m *Machine) gateBindsKey(c *aliveClaim) bool { return m.bindsKey(c.a, c.s, c.src) }

func (m *Machine) gateOtherLife(c *aliveClaim) bool {
	if c.s == nil || !otherLife(m.lifeOf(c.s), c.a.Life) {
		return false
	}
	if addr, err := wire.DecodeAddr(c.a.Addr); err == nil {
		m.checkLife(c.now, c.s, c.a, addr)
	} else {
		m.stats.PacketsDropped++
	}
	return true
}

func (m *Machine) gateVersionsWord(c *aliveClaim) bool {
	s, a := c.s, c.a
	if s == nil || a.Versions == (wire.Versions{}) || a.Versions == m.versionsOf(s) || m.lifeOf(s) == 0 || a.Life != m.lifeOf(s) {
		return false
	}
	// A process's versions are fixed for its life (Config); a claim of
	// others for the same life is no one's but the member's to make.
	if m.signing() && len(a.Sig) > 0 || ownNews(c.o, a.Name, m.addrOf(s)) {
		return false
	}
	m.stats.VersionsRefused++
	a.Versions = m.versionsOf(s)
	return false
}

func (m *Machine) gateVersions(c *aliveClaim) bool {
	if c.s != nil && m.learnVersions(c.now, c.s, c.a.Incarnation, c.a.Versions, c.a.Life) {
		m.sigs.KeepAlive(c.a)
		return true
	}
	return false
}

func (m *Machine) gateAliveStale(c *aliveClaim) bool {
	return m.staleOrImplausible(c.s, StateAlive, c.a.Incarnation)
}

func (m *Machine) gateAddress(c *aliveClaim) bool {
	addr, err := wire.DecodeAddr(c.a.Addr)
	if err != nil {
		m.stats.PacketsDropped++
		return true
	}
	c.addr = addr
	return false
}

func (m *Machine) gateNameText(c *aliveClaim) bool {
	// Two such names would print alike in logs and JSON, so operators
	// could not tell the members apart.
	if c.s == nil && !utf8.ValidString(c.a.Name) {
		m.stats.PacketsDropped++
		return true
	}
	return false
}

func (m *Machine) gateTombstone(c *aliveClaim) bool {
	if c.s != nil {
		return false
	}
	a, src := c.a, c.src
	// News from before its death about a member we forgot: a replay, or
	// a rumor that outlived it. A member really back announces a higher
	// incarnation; the reply to an exchange we started (a reconnect
	// after a partition healed) is first-hand.
	if t := m.tombByName[a.Name]; t != nil && a.Incarnation <= t.inc && !otherLife(t.life, a.Life) && src != mergeReply && src != mergeJoin && src != mergeFollowUp {
		m.stats.DeltasStale++
		m.nudge(c.now, t)
		return true
	}
	return false
}

func (m *Machine) gateCapacity(c *aliveClaim) bool {
	if c.s == nil && (m.tableSize() >= m.cfg.MaxMembers || m.reg.versionsFull()) {
		m.stats.MembersRefused++
		return true
	}
	return false
}

func (m *Machine) gateNewcomer(c *aliveClaim) bool {
	if c.s != nil || c.o.member {
		return false
	}
	m.checkNewcomer(c.now, c.a, c.addr, c.o)
	return true
}

func (m *Machine) gateAdmit(c *aliveClaim) bool { return c.s == nil && !m.admit(c.a, c.addr) }

func (m *Machine) gateMove(c *aliveClaim) bool {
	if c.s == nil {
		return false
	}
	c.moved = m.addrOf(c.s) != c.addr
	if c.moved && c.src != mergeMoveChecked && c.s.live() {
		m.checkMove(c.now, c.s, c.a, c.addr)
		return true
	}
	return false
}

func (m *Machine) gateAdmitChange(c *aliveClaim) bool {
	s, a := c.s, c.a
	if s == nil {
		return false
	}
	c.life = a.Life
	if c.life == 0 {
		c.life = m.lifeOf(s) // relayed by a member that predates lives
	}
	c.changed = c.moved || string(m.metaOf(s)) != string(a.Meta) || a.Versions != m.versionsOf(s)
	if !m.admitsChange(s, a, c.addr, c.changed || c.life != m.lifeOf(s)) {
		m.refuseChange(c.now, s)
		return true
	}
	return false
}

// applyJoin adds the member an alive that passed the gates announces.
func (m *Machine) applyJoin(c *aliveClaim) {
	now, a := c.now, c.a
	s := m.addEntry(a.Name, c.addr, a.Meta, a.Versions, a.Life, StateAlive, a.Incarnation, now)
	m.sigs.KeepAlive(a)
	m.dropTomb(a.Name)
	m.memberChanged(now, s, memberAdded, StateAlive)
	m.version++
	m.event(EventJoin, s)
	if c.src.passedOn() {
		m.queueJoinNews(now, a.Name, a)
	}
}

// applyAlive applies to a held member an alive that passed the gates.
func (m *Machine) applyAlive(c *aliveClaim) {
	now, a, s, life := c.now, c.a, c.s, c.life
	prev := s.state()
	s.setInc(a.Incarnation)
	if c.changed || life != m.lifeOf(s) {
		m.setIdentity(now, s, c.addr, a.Meta, a.Versions, life)
	}
	m.sigs.KeepAlive(a)
	m.version++
	switch prev {
	case StateAlive:
		if c.changed {
			m.event(EventUpdate, s)
		}
	case StateSuspect:
		m.strikeRefuted(now, a.Name, m.suspicions[a.Name])
		m.cancelSuspicion(a.Name)
		m.setState(now, s, StateAlive)
		m.event(EventAlive, s)
		if c.moved {
			// Restarted elsewhere while suspected: the refutation is
			// also news of a new address, which is always an update.
			m.event(EventUpdate, s)
		}
	case StateDead, StateLeft:
		m.setState(now, s, StateAlive)
		m.event(EventJoin, s)
	}
	if c.src.passedOn() {
		m.queueNews(a.Name, a)
	}
}

// suspectClaim is a suspect delta on its way through suspectGates.
type suspectClaim struct {
	now time.Time
	d   *wire.Suspect
	s   *memberState // held under d.Name; nil: not held
	// unknown is set by "unknown": the suspect is a member never heard
	// of, neither in the table nor a tombstone.
	unknown bool
}

// handleSuspect runs a suspect delta through suspectGates and applies it
// if none takes it. It reports whether the suspect is a member never
// heard of (neither in the table nor a tombstone): a hole, if the delta
// came in a packet (repair.go).
func (m *Machine) handleSuspect(now time.Time, d *wire.Suspect) (unknown bool) {
	c := spare(&m.claimSpares.suspect)
	*c = suspectClaim{now: now, d: d}
	defer func() {
		*c = suspectClaim{} // keeps nothing of the delta
		m.claimSpares.suspect = c
	}()
	if d.Name != m.selfName {
		c.s = m.lookup(d.Name)
	}
	if passGates(m, suspectGates, c) {
		return c.unknown
	}
	// Anchor where the accuser did (Geode: at the last moment the member
	// was known alive, not when the news arrived), so that all members
	// decide at about the same time. The claimed silence is capped: a
	// suspicion can never be older than its longest timeout.
	_, hi := m.suspicionBounds()
	silence := min(time.Duration(d.Silence)*time.Millisecond, hi)
	m.suspect(now, c.s, d.Incarnation, d.From, now.Add(-silence))
	m.witness(now, c.s, d.Incarnation)
	return false
}

func (m *Machine) gateSuspectSelf(c *suspectClaim) bool {
	d := c.d
	if d.Name != m.selfName {
		return false
	}
	if d.Life == 0 || d.Life == m.life {
		m.selfAccused(c.now, d.Incarnation)
	}
	return true
}

func (m *Machine) gateSuspectOtherLife(c *suspectClaim) bool {
	if c.s != nil && otherLife(m.lifeOf(c.s), c.d.Life) {
		m.stats.DeltasStale++
		return true
	}
	return false
}

func (m *Machine) gateSuspectEcho(c *suspectClaim) bool { return c.d.From == m.selfName }

func (m *Machine) gateSuspectOlder(c *suspectClaim) bool {
	if s := c.s; s != nil && s.state() == StateAlive && c.d.Incarnation < s.inc() {
		m.answerStale(s)
		return true
	}
	return false
}

func (m *Machine) gateSuspectUnknown(c *suspectClaim) bool {
	if c.s != nil {
		return false
	}
	c.unknown = m.tombByName[c.d.Name] == nil
	return true
}

func (m *Machine) gateSuspectStale(c *suspectClaim) bool {
	return m.staleOrImplausibleAccusation(c.s, StateSuspect, c.d.Incarnation)
}

func (m *Machine) gateSuspectRepeat(c *suspectClaim) bool {
	return m.accusationWaits(c.now, c.d.Name, c.d.From)
}

func (m *Machine) gateSuspectSignature(c *suspectClaim) bool {
	d := c.d
	return !m.sigs.ProveAccusation(c.now, claims.Accusation{Name: d.Name, From: d.From, Inc: d.Incarnation, Life: d.Life}, d.Sig)
}

// deadClaim is a dead or left delta on its way through deadGates.
type deadClaim struct {
	now    time.Time
	d      *wire.Dead
	sender *memberState // the member the packet came from at its address, if any
	s      *memberState // held under d.Name; nil: not held
	st     State        // StateDead or StateLeft, as d says
	// signedLeave is set by "signature": a leave in the member's own
	// name, signed by its key.
	signedLeave bool
}

// handleDead runs a dead or left delta through deadGates and applies it
// if none takes it.
func (m *Machine) handleDead(now time.Time, d *wire.Dead, sender *memberState) {
	c := spare(&m.claimSpares.dead)
	*c = deadClaim{now: now, d: d, sender: sender, st: StateDead}
	defer func() {
		*c = deadClaim{} // keeps nothing of the delta
		m.claimSpares.dead = c
	}()
	if d.Left {
		c.st = StateLeft
	}
	if d.Name != m.selfName {
		c.s = m.lookup(d.Name)
	}
	if passGates(m, deadGates, c) {
		return
	}
	s := c.s
	if !s.live() {
		// Already gone: a newer incarnation only updates the record (the
		// member came back and went again while we were not looking), so
		// that older news about it stays ignored, and passes it on. No
		// event: we reported its departure already.
		s.setInc(d.Incarnation)
		m.setState(now, s, c.st)
		m.version++
		m.queueNews(d.Name, d)
		return
	}
	// A settled death, or the member's own leave ("member's word").
	m.declareDead(now, s, d.Incarnation, d.From, d.Left)
}

func (m *Machine) gateDeadSelf(c *deadClaim) bool {
	d := c.d
	if d.Name != m.selfName {
		return false
	}
	if d.Life == 0 || d.Life == m.life {
		m.selfDeclaredDead(c.now, d.Incarnation)
	}
	return true
}

func (m *Machine) gateDeadOtherLife(c *deadClaim) bool {
	if c.s != nil && otherLife(m.lifeOf(c.s), c.d.Life) {
		m.stats.DeltasStale++
		return true
	}
	return false
}

func (m *Machine) gateDeadEcho(c *deadClaim) bool { return !c.d.Left && c.d.From == m.selfName }

func (m *Machine) gateDeadUnknown(c *deadClaim) bool { return c.s == nil }

func (m *Machine) gateDeadStale(c *deadClaim) bool {
	return m.staleOrImplausibleAccusation(c.s, c.st, c.d.Incarnation)
}

func (m *Machine) gateDeadSignature(c *deadClaim) bool {
	d := c.d
	switch {
	case !m.signing():
		return false
	case d.Left && d.From == d.Name:
		ok, signed := m.leaveProven(d, c.s)
		c.signedLeave = signed
		return !ok
	case d.Left:
		// A leave is the member's own word; another's report of it
		// counts as unsigned.
		return !m.sigs.ProveRelayedLeave(d.Name)
	default:
		return !m.sigs.ProveAccusation(c.now, claims.Accusation{Name: d.Name, From: d.From, Inc: d.Incarnation, Life: d.Life, Dead: true}, d.Sig)
	}
}

func (m *Machine) gateDeadCheck(c *deadClaim) bool {
	s, d := c.s, c.d
	if !s.live() {
		return false // already gone: the record is updated
	}
	if !d.Left && m.deathSettled(c.now, s, d.Incarnation) {
		return false
	}
	if d.Left && d.From == d.Name && (c.sender == s || c.signedLeave) {
		// The member's own word: from its own address (its leave
		// notice, lifecycle.go, or its gossip as it leaves), or signed
		// by its key.
		return false
	}
	// A leave is final for the applications (a Raft layer removes a
	// voter that left at once, while it gives a dead one a grace
	// period), and a death makes the member refute and come back,
	// events for every application; anyone can forge either at the
	// incarnation a push-pull reveals. So ask the member first.
	m.startClaimCheck(c.now, s, d)
	return true
}
