package swim

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Lives (wire.ProtocolLife). A name is a member; a process that runs under
// the name runs one life of it, and its life identifier (Member.Life) is
// drawn when its Machine starts. Every claim a member makes about itself
// (its alive, its leave) names its life, and so does every accusation of
// it (suspect, dead): a claim about another life of the name than the one
// held is not about the member held, whatever its incarnation. So
// incarnations count within a life, and the life decides before them:
//
//   - An accusation of another life is stale: a death reported of the
//     process before a restart does not touch the process after it.
//   - An alive claim of another life is a restart, or a second process
//     taking the name, or a forgery. It is checked, as a move is
//     (moves.go): the held life's address is pinged for that life and the
//     claim's address for the claimed one (Ping.TargetLife: any other life
//     stays silent). The new life takes the name once it answered and the
//     held one did not within a probe timeout, or at once when the new
//     life answered at the held life's own address (one socket, one
//     process) or the held life was dead or gone: the restart is reported
//     as EventRestart (EventJoin for a member held dead), routed to the
//     new address from then on, and passed on. While the held life
//     answers it keeps the name, the claim is dropped, and the claimed
//     life's claims are dropped unchecked for refusedLifeFor.
//   - While a restart is being checked, a failed probe of the member
//     accuses no one: the check decides.
//
// The process itself, told of its name at another life, finds out which
// it is: it pings that life at its address. Silence: a previous life of
// its own (the usual case, a restart after a crash), and it overtakes that
// life's incarnation for members of releases that order by incarnation
// alone. An answer: a second live process holds the name (a conflict).
// The newer life (the later start, its life being a start time over random
// bits) yields unless Config.Admission.NameConflict decides otherwise: it leaves
// at its own life, which the members holding the other life ignore, and a
// Join in progress returns ErrNameConflict. As every member keeps the life
// it holds while that life answers, nobody's view flips between the two.
//
// A restarted process (one told of an earlier life of its name) also
// announces itself to every member it learns of at once (restart notices,
// one packet each) instead of waiting for gossip,
// whose every hop would wait for a check of its own.

// ErrNameConflict is returned by Join when another live process holds this
// member's name and this one yields it (see Config.Admission.NameConflict).
var ErrNameConflict = errors.New("swim: another live process holds this member's name")

// newLife makes the life of the Machine of name at addr, started at now:
// the start in milliseconds since the Unix epoch over 16 bits of a hash of
// the start in nanoseconds, the address and the name. The start orders the
// lives of a name (the later one yields a conflict) and tells an operator
// when the process began (Member.Started); the hash tells apart two
// processes started in the same millisecond. It draws nothing from the
// Machine's random source, whose sequence a simulated run replays.
func newLife(now time.Time, addr netip.AddrPort, name string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(now.UnixNano()))
	h.Write(b[:])
	h.Write([]byte(addr.String()))
	h.Write([]byte(name))
	life := uint64(max(now.UnixMilli(), 0))<<16 | h.Sum64()&0xffff
	if life == 0 {
		life = 1 // 0 means "not said"
	}
	return life
}

// Started is when the member's process started, as its life says; the zero
// Time for a member whose release predates lives.
func (mb Member) Started() time.Time {
	if mb.Life == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(mb.Life >> 16))
}

// otherLife reports whether a claim naming life claimed is about another
// life than the one held, both known.
func otherLife(held, claimed uint64) bool { return held != 0 && claimed != 0 && held != claimed }

// maxLifeChecks bounds the restarts checked at once, as maxMoveChecks
// bounds moves: a claim past it waits for the next copy.
const maxLifeChecks = 16

// refusedLifeFor is how long the claims of a life refused (its name's
// held life answered) are dropped without a new check. A second process
// that found the name taken yields within a probe timeout; a forger's
// claims cost one check per name per period.
const refusedLifeFor = 30 * time.Second

// pendingLife is a claim of a new life being checked: the claim, the
// addresses of the held life (invalid when it is not live) and of the
// claimed one, and the sequence numbers of their address checks.
type pendingLife struct {
	alive          wire.Alive
	from, to       netip.AddrPort
	fromSeq, toSeq uint32
	toAnswered     bool
}

// refusedLife is a life of a name whose claims are dropped until until.
type refusedLife struct {
	life  uint64
	until time.Time
}

// lives is the Machine's part of the lives.
type lives struct {
	pending map[string]*pendingLife // by name
	past    map[string]uint64       // the life each restart replaced, by name
	refused map[string]refusedLife
	// own: the other lives of this member's name being checked, each
	// with the incarnation claimed of it
	own map[uint64]uint64
	// noticed: the other life of this member's name its restart notices
	// were last sent for
	noticed uint64
	// yielded: this member gave its name up to another live process
	yielded bool
}

func (l *lives) init() {
	l.pending = make(map[string]*pendingLife)
	l.past = make(map[string]uint64)
	l.refused = make(map[string]refusedLife)
	l.own = make(map[uint64]uint64)
}

// checkLife starts the check of a's claim that the member s, held at
// another life, runs a new one at addr (see the file comment), unless the
// claim is of a life already replaced or refused, or is being checked.
func (m *Machine) checkLife(now time.Time, s *memberState, a *wire.Alive, addr netip.AddrPort) {
	name := m.nameOf(s)
	if m.lives.past[name] == a.Life {
		m.stats.DeltasStale++
		return
	}
	if r, ok := m.lives.refused[name]; ok && r.life == a.Life && now.Before(r.until) {
		m.stats.Lives.Refused++
		return
	}
	if lc := m.lives.pending[name]; lc != nil {
		if lc.alive.Life == a.Life && lc.to == addr {
			if a.Incarnation > lc.alive.Incarnation {
				lc.alive = cloneAlive(a)
			}
			return
		}
		m.endLife(name)
	}
	if len(m.lives.pending) >= maxLifeChecks {
		m.stats.Lives.ChecksDropped++
		return
	}
	lc := &pendingLife{alive: cloneAlive(a), to: addr, toSeq: m.nextSeq()}
	m.lives.pending[name] = lc
	m.stats.Lives.Checks++
	if s.live() {
		lc.from, lc.fromSeq = m.addrOf(s), m.nextSeq()
		// The held life hears the claim: if it is alive it learns of the
		// other process and settles the conflict (ownLife).
		m.startAddrCheck(now, lc.fromSeq, addrCheck{kind: addrCheckLifeFrom, addr: lc.from, name: name, life: m.lifeOf(s)}, &lc.alive)
	}
	m.startAddrCheck(now, lc.toSeq, addrCheck{kind: addrCheckLifeTo, addr: lc.to, name: name, life: a.Life}, nil)
}

// endLife forgets the claim of a new life of name being checked, and its
// address checks.
func (m *Machine) endLife(name string) *pendingLife {
	lc := m.lives.pending[name]
	delete(m.lives.pending, name)
	if lc.from.IsValid() {
		delete(m.addrChecks, lc.fromSeq)
	}
	delete(m.addrChecks, lc.toSeq)
	return lc
}

// lifeRefuted ends the check of the new life claimed of name, whose held
// life answered: it did not end.
func (m *Machine) lifeRefuted(now time.Time, name string) {
	lc := m.endLife(name)
	m.refuseLife(now, name, lc.alive.Life)
}

// lifeAnswered notes that the new life claimed of name answered at its
// address.
func (m *Machine) lifeAnswered(now time.Time, name string) {
	lc := m.lives.pending[name]
	lc.toAnswered = true
	if !lc.from.IsValid() || lc.from == lc.to {
		// Nothing live to wait for, or the new life answered at the held
		// life's own address: that one is gone.
		m.concludeLife(now, name)
	}
}

// concludeLife gives a life check its verdict: the new life takes the name
// if it answered (the held one did not, or the check would be over).
func (m *Machine) concludeLife(now time.Time, name string) {
	lc := m.endLife(name)
	if !lc.toAnswered {
		m.refuseLife(now, name, lc.alive.Life)
		return
	}
	s := m.lookup(name)
	if s == nil || !otherLife(m.lifeOf(s), lc.alive.Life) {
		return // forgotten meanwhile, or the same life after all
	}
	m.applyLife(now, s, &lc.alive, lc.to)
}

// refuseLife drops the claims of life for name for refusedLifeFor.
func (m *Machine) refuseLife(now time.Time, name string, life uint64) {
	m.stats.Lives.Refused++
	if _, ok := m.lives.refused[name]; !ok && len(m.lives.refused) >= m.cfg.MaxMembers {
		clear(m.lives.refused)
	}
	m.lives.refused[name] = refusedLife{life: life, until: now.Add(refusedLifeFor)}
}

// applyLife gives the name of s to the life a claims, at addr: a restart.
func (m *Machine) applyLife(now time.Time, s *memberState, a *wire.Alive, addr netip.AddrPort) {
	name := m.nameOf(s)
	if _, ok := m.lives.past[name]; !ok && len(m.lives.past) >= m.cfg.MaxMembers {
		clear(m.lives.past)
	}
	if !m.admitsChange(s, a, addr, true) {
		m.refuseChange(now, s)
		return
	}
	m.lives.past[name] = m.lifeOf(s)
	delete(m.lives.refused, name)
	prev := s.state()
	s.setInc(a.Incarnation)
	m.setIdentity(now, s, addr, a.Meta, a.Versions, a.Life)
	m.sigs.KeepAlive(a)
	m.version++
	m.stats.Lives.Restarts++
	switch prev {
	case StateAlive:
		m.event(EventRestart, s)
	case StateSuspect:
		m.cancelSuspicion(name)
		m.setState(now, s, StateAlive)
		m.event(EventRestart, s)
	default:
		m.setState(now, s, StateAlive)
		m.event(EventJoin, s)
	}
	m.queueNews(name, a)
}

// restartPending reports whether a new life of s is being checked: a
// failed probe of s then accuses no one.
func (m *Machine) restartPending(s *memberState) bool {
	_, ok := m.lives.pending[m.nameOf(s)]
	return ok
}

// ownLife handles news of this member's name at another life, at addr
// (see the file comment).
func (m *Machine) ownLife(now time.Time, a *wire.Alive, addr netip.AddrPort) {
	if m.lives.yielded || m.self.state() != StateAlive {
		return
	}
	if a.Life < m.life && m.lives.noticed != a.Life {
		// An earlier life: this process is a restart (or a second
		// process, which the members' checks refuse). Told once the view
		// this news came in is merged whole: a join's answer names every
		// member to tell.
		m.lives.noticed = a.Life
		m.armAt(timerRestartNotices, now)
	}
	if addr == m.addrOf(m.self) {
		// This process holds that address: the other life was here
		// before it, and is gone.
		m.overtake(now, a.Incarnation)
		return
	}
	if _, ok := m.lives.own[a.Life]; ok {
		return
	}
	if len(m.lives.own) >= maxConflictChecks {
		m.stats.Lives.ChecksDropped++
		return
	}
	m.lives.own[a.Life] = a.Incarnation
	m.startAddrCheck(now, m.nextSeq(), addrCheck{kind: addrCheckOwnLife, addr: addr, name: m.selfName, life: a.Life}, nil)
}

// overtake raises this member's incarnation above inc, a previous life's,
// for the members that order by incarnation alone (releases before
// lives); members of ProtocolLife take the new life at any incarnation.
func (m *Machine) overtake(now time.Time, inc uint64) {
	if inc >= m.self.inc() && m.plausible(m.self, inc) {
		m.refute(now, inc)
	}
}

// ownLifeSilent: the other life of this member's name, life, did not
// answer: a previous life, gone.
func (m *Machine) ownLifeSilent(now time.Time, life uint64) {
	inc := m.lives.own[life]
	delete(m.lives.own, life)
	if m.self.state() == StateAlive {
		m.overtake(now, inc)
	}
}

// ownLifeAnswered: the other life of this member's name, life, answered at
// addr: a second live process holds the name.
func (m *Machine) ownLifeAnswered(now time.Time, addr netip.AddrPort, life uint64) {
	delete(m.lives.own, life)
	m.nameConflict(now, addr, life)
}

// nameConflict settles a conflict with the live process of the name at
// addr, at life: the newer life yields, unless Config.Admission.NameConflict
// decides.
func (m *Machine) nameConflict(now time.Time, addr netip.AddrPort, life uint64) {
	other := m.export(m.self)
	other.Addr, other.Life = addr, life
	if !m.conflictsReported[addr] {
		// Once per address, whichever check found it first (admission.go
		// checks back on a process that pings in this name).
		if len(m.conflictsReported) < m.cfg.MaxMembers {
			m.conflictsReported[addr] = true
		}
		m.stats.Lives.NameConflicts++
		m.emitEvent(Event{Kind: EventConflict, Member: other})
	}
	yield := m.life > life
	if m.cfg.Admission.NameConflict != nil {
		yield = m.cfg.Admission.NameConflict(m.export(m.self), other)
	}
	if !yield || m.self.state() != StateAlive {
		return
	}
	m.lives.yielded = true
	m.stats.Lives.NamesYielded++
	_ = m.Leave(now)
}

// sendRestartNotices sends this member's alive to every live member it
// knows, alone: its restart is checked by each at once, not hop by hop as
// gossip would bring it.
func (m *Machine) sendRestartNotices() {
	alive := m.aliveOf(m.self)
	m.ring.each(func(id uint32) {
		if id == m.self.id {
			return
		}
		if s := m.entry(id); s != nil && s.live() {
			m.sendAlone(m.addrOf(s), alive)
			m.stats.Lives.RestartNoticesSent++
		}
	})
}

// Name conflicts. News that this member is alive at another address is
// either from a previous life under this name (a restart on a new port,
// before the old process was declared dead), which the refutation answers,
// or from a second live process with the same name. A ping in this name
// to that address (an address check, addrcheck.go) tells them apart: only
// a live process answers it.

// maxConflictChecks bounds the conflict pings in flight; an address
// claimed in a flood of forged news waits for the next claim.
const maxConflictChecks = 16

// checkConflict pings addr in this member's name, unless it is this
// member's own address, is being checked, or was reported already.
func (m *Machine) checkConflict(now time.Time, addr netip.AddrPort) {
	if addr == m.addrOf(m.self) || m.conflictsReported[addr] || len(m.conflictPings) >= maxConflictChecks {
		return
	}
	if _, ok := m.conflictPings[addr]; ok {
		return
	}
	m.conflictPings[addr] = struct{}{}
	m.startAddrCheck(now, m.nextSeq(), addrCheck{kind: addrCheckConflict, addr: addr, name: m.selfName}, nil)
}

// conflictAnswered reports the conflict with the process at addr, which
// answered a ping in this member's name.
func (m *Machine) conflictAnswered(addr netip.AddrPort) {
	delete(m.conflictPings, addr)
	if m.conflictsReported[addr] {
		return // found by the check of its life meanwhile (lives.go)
	}
	if len(m.conflictsReported) < m.cfg.MaxMembers {
		m.conflictsReported[addr] = true
	}
	m.stats.Lives.NameConflicts++
	mb := m.export(m.self)
	mb.Addr = addr
	m.emitEvent(Event{Kind: EventConflict, Member: mb})
}
