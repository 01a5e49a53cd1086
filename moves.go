package swim

import (
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Address changes. A live member's address moves when news of a newer
// incarnation of it names another address: a member restarted elsewhere
// (a rescheduled pod) announces itself so. But anyone can announce it, in
// one packet or one push-pull entry, and a member moved to an attacker's
// address is probed there, answered for by the attacker, and its own
// packets from its real address count as a stranger's. So a move is
// applied only once it is checked: the old address is pinged in the
// member's name, carrying the claim, and the new one is pinged too. A
// member still answering at its old address did not move: the claim is
// dropped at once, and the member, told of it, refutes it above its
// incarnation. A move is applied once the new address answered and the
// old one stayed silent for a probe timeout (a restarted member's old
// process is gone). Each check costs one small packet to each address;
// at most maxMoveChecks run at once, and every move refused is counted
// (Stats.MovesRefused).

// maxMoveChecks bounds the move checks in flight.
const maxMoveChecks = 16

// moveCheck is a move being checked: the news that claims it, and the
// sequence numbers of the pings to the old and the new address.
type moveCheck struct {
	alive       wire.Alive
	from, to    netip.AddrPort
	oldSeq      uint32
	newSeq      uint32
	newAnswered bool
}

// checkMove starts the check of a's claim that the member s moved to addr
// (see above), unless one is running for it already or too many are. The
// news is kept (copied: it may alias a packet) and applied at the verdict.
func (m *Machine) checkMove(now time.Time, s *memberState, a *wire.Alive, addr netip.AddrPort) {
	name := m.nameOf(s)
	if mc := m.moves[name]; mc != nil {
		if mc.to == addr && mc.alive.Incarnation >= a.Incarnation {
			return
		}
		delete(m.moves, name)
	}
	if len(m.moves) >= maxMoveChecks {
		m.stats.MovesRefused++
		return
	}
	mc := &moveCheck{
		alive: cloneAlive(a),
		from:  m.addrOf(s), to: addr, oldSeq: m.nextSeq(), newSeq: m.nextSeq(),
	}
	m.moves[name] = mc
	m.stats.MovesChecked++
	// The old address hears the claim: a member still there refutes it.
	m.sendWith(mc.from, &wire.Ping{Seq: mc.oldSeq, Target: name, From: m.selfName}, &mc.alive)
	// The new address, not yet known to be the member's, gets the ping
	// alone: no gossip, no more than one small packet per check.
	m.sendPlain(mc.to, &wire.Ping{Seq: mc.newSeq, Target: name, From: m.selfName}, m.packetBudget())
	m.after(now.Add(m.scaled(m.cfg.ProbeTimeout)), timerMoveCheck, uint64(mc.newSeq), 0, name)
}

// moveAnswered handles an ack that answers a move check, and reports
// whether it did.
func (m *Machine) moveAnswered(from netip.AddrPort, seq uint32) bool {
	for name, mc := range m.moves {
		switch {
		case seq == mc.oldSeq && from == mc.from:
			// Still there: it did not move.
			delete(m.moves, name)
			m.stats.MovesRefused++
			return true
		case seq == mc.newSeq && from == mc.to:
			mc.newAnswered = true
			return true
		}
	}
	return false
}

// concludeMove gives a move check its verdict, a probe timeout after it
// started: the move is applied if the new address answered (the old one
// did not, or the check would be over).
func (m *Machine) concludeMove(now time.Time, name string) {
	mc := m.moves[name]
	delete(m.moves, name)
	if !mc.newAnswered {
		m.stats.MovesRefused++
		return
	}
	m.handleAlive(now, &mc.alive, mergeMoveChecked, vouched)
}
