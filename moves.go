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
// applied only once it is checked, by an address check of each address
// (addrcheck.go): the old address is pinged in the member's name,
// carrying the claim, and the new one is pinged too. A member still
// answering at its old address did not move: the claim is dropped at
// once, and the member, told of it, refutes it above its incarnation. A
// move is applied once the new address answered and the old one stayed
// silent for a probe timeout (a restarted member's old process is gone).
// Each check costs one small packet to each address; at most
// maxMoveChecks run at once, and every move refused is counted
// (Stats.Moves.Refused).

// maxMoveChecks bounds the moves checked at once.
const maxMoveChecks = 16

// pendingMove is a move being checked: the news that claims it, its old
// and new addresses, and the sequence numbers of their address checks.
type pendingMove struct {
	alive          wire.Alive
	from, to       netip.AddrPort
	fromSeq, toSeq uint32
	toAnswered     bool
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
		m.endMove(name)
	}
	if len(m.moves) >= maxMoveChecks {
		m.stats.Moves.Refused++
		return
	}
	mc := &pendingMove{
		alive: cloneAlive(a),
		from:  m.addrOf(s), to: addr, fromSeq: m.nextSeq(), toSeq: m.nextSeq(),
	}
	m.moves[name] = mc
	m.stats.Moves.Checked++
	m.startAddrCheck(now, mc.fromSeq, addrCheck{kind: addrCheckMoveFrom, addr: mc.from, name: name}, &mc.alive)
	m.startAddrCheck(now, mc.toSeq, addrCheck{kind: addrCheckMoveTo, addr: mc.to, name: name}, nil)
}

// endMove forgets the move of name being checked, and its address checks.
func (m *Machine) endMove(name string) *pendingMove {
	mc := m.moves[name]
	delete(m.moves, name)
	delete(m.addrChecks, mc.fromSeq)
	delete(m.addrChecks, mc.toSeq)
	return mc
}

// moveRefuted ends the check of the move of name, whose old address
// answered: the member is still there, it did not move.
func (m *Machine) moveRefuted(name string) {
	m.endMove(name)
	m.stats.Moves.Refused++
}

// concludeMove gives a move check its verdict at its deadline: the move is
// applied if the new address answered (the old one did not, or the check
// would be over).
func (m *Machine) concludeMove(now time.Time, name string) {
	mc := m.endMove(name)
	if !mc.toAnswered {
		m.stats.Moves.Refused++
		return
	}
	m.handleAlive(now, &mc.alive, mergeMoveChecked, vouched)
}
