package swim

import (
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Address checks. Several mechanisms believe news of an address only once
// that address answers for it: a ping in a member's name, and for one life
// of it (Ping.TargetLife; a ping with a Target is answered only by the
// member of that name and life, probe.go), goes to the address with a
// fresh sequence number, and only an ack from that very address counts: a
// stranger would have had to see the ping to know the number, and could
// still not answer from there. The answer, or the silence until the
// check's deadline, decides:
//
//   - a name conflict (admission.go): a process pinged in this member's
//     name; its answer says a second live process holds the name.
//   - a move (moves.go): the member's old address, whose answer refutes
//     the move, and the new one, which must answer before the deadline.
//   - a newcomer (newcomers.go): a member not known is admitted when its
//     announced address answers, refused when it stays silent.
//   - a life (lives.go): the held life's address, whose answer refutes the
//     restart, and the claimed life's, which must answer.
//   - this member's own name at another life (lives.go): an answer is a
//     second live process, silence a previous life, gone.
//
// Every check in flight is one entry of Machine.addrChecks, by sequence
// number: handleAck looks every ack up there, and one timer kind
// (timerAddrCheck) is every check's deadline. What a check is about (which
// moves are pending, the newcomers' held push-pulls) stays with its
// mechanism, keyed by name or address.

// addrCheckKind is what an address check is for.
type addrCheckKind uint8

const (
	addrCheckConflict addrCheckKind = iota // a process that pinged in this member's name (admission.go)
	addrCheckMoveFrom                      // a move's old address: an answer refutes the move (moves.go)
	addrCheckMoveTo                        // a move's new address: it must answer (moves.go)
	addrCheckNewcomer                      // a member not known, at its announced address (newcomers.go)
	addrCheckLifeFrom                      // the held life's address: an answer refutes the restart (lives.go)
	addrCheckLifeTo                        // the claimed life's address: it must answer (lives.go)
	addrCheckOwnLife                       // this member's name at another life (lives.go)
	addrCheckKinds
)

// addrCheck is one address check in flight: the address pinged, and the
// name and life (0: any) it must answer for.
type addrCheck struct {
	kind addrCheckKind
	addr netip.AddrPort
	name string
	life uint64
}

// addrCheckWait is how long an address check of kind waits for its answer
// before its deadline concludes it: a probe timeout, scaled by local
// health as a probe's is (health.go). A name conflict's silence decides
// nothing (it only frees the check's place), so it waits a probe interval.
// The old address of a move or a life has no deadline of its own: its
// silence is what the new address's deadline finds.
func (m *Machine) addrCheckWait(kind addrCheckKind) time.Duration {
	switch kind {
	case addrCheckConflict:
		return m.cfg.ProbeInterval
	case addrCheckMoveFrom, addrCheckLifeFrom:
		return 0
	}
	return m.scaled(m.cfg.ProbeTimeout)
}

// startAddrCheck records c under seq, pings its address, and arms its
// deadline. The caller draws seq (nextSeq): a check of two addresses draws
// both numbers before it pings either. The old address of a move or a
// life, the member's known one, hears the claim (a member still there
// refutes it), with gossip as any ping to a member; the process that
// pinged in this member's name gets a ping with gossip too. A new address,
// not yet known to be the member's, gets the ping alone: no gossip, no
// more than one small packet per check.
func (m *Machine) startAddrCheck(now time.Time, seq uint32, c addrCheck, claim wire.Message) {
	m.addrChecks[seq] = c
	ping := &wire.Ping{Seq: seq, Target: c.name, From: m.selfName, TargetLife: c.life}
	switch c.kind {
	case addrCheckMoveFrom, addrCheckLifeFrom:
		m.sendWith(c.addr, ping, claim)
	case addrCheckConflict:
		m.send(c.addr, ping)
	default:
		m.sendPlain(c.addr, ping, m.packetBudget())
	}
	if wait := m.addrCheckWait(c.kind); wait > 0 {
		m.after(now.Add(wait), timerAddrCheck, uint64(seq), uint64(c.kind), "")
	}
}

// addrCheckPending reports whether the deadline of the address check seq,
// of kind, still stands for a check in flight (timerAddrCheck).
func (m *Machine) addrCheckPending(seq uint32, kind addrCheckKind) bool {
	c, ok := m.addrChecks[seq]
	return ok && c.kind == kind
}

// addrCheckAnswered handles an ack that answers an address check, and
// reports whether it did. An ack from another address than the one pinged
// is refused, counted in Stats.AcksRefused. An answer ends the check, but
// for a new address of a move or a life, whose verdict waits for the old
// address's silence until the deadline.
func (m *Machine) addrCheckAnswered(now time.Time, from netip.AddrPort, seq uint32) bool {
	c, ok := m.addrChecks[seq]
	if !ok {
		return false
	}
	if from != c.addr {
		m.stats.AcksRefused++
		return true
	}
	if c.kind != addrCheckMoveTo && c.kind != addrCheckLifeTo {
		delete(m.addrChecks, seq)
	}
	switch c.kind {
	case addrCheckConflict:
		m.conflictAnswered(c.addr)
	case addrCheckMoveFrom:
		m.moveRefuted(c.name)
	case addrCheckMoveTo:
		m.moves[c.name].toAnswered = true
	case addrCheckNewcomer:
		m.newcomerAnswered(now, c.addr)
	case addrCheckLifeFrom:
		m.lifeRefuted(now, c.name)
	case addrCheckLifeTo:
		m.lifeAnswered(now, c.name)
	case addrCheckOwnLife:
		m.ownLifeAnswered(now, c.addr, c.life)
	}
	return true
}

// addrCheckSilent concludes the address check seq at its deadline
// (timerAddrCheck): its address did not answer, or, for a new address of
// a move or a life, the old one stayed silent meanwhile.
func (m *Machine) addrCheckSilent(now time.Time, seq uint32) {
	c := m.addrChecks[seq]
	delete(m.addrChecks, seq)
	switch c.kind {
	case addrCheckConflict:
		delete(m.conflictPings, c.addr)
	case addrCheckMoveTo:
		m.concludeMove(now, c.name)
	case addrCheckNewcomer:
		m.newcomerSilent(now, c.addr)
	case addrCheckLifeTo:
		m.concludeLife(now, c.name)
	case addrCheckOwnLife:
		m.ownLifeSilent(now, c.life)
	}
}
