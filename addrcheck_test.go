package swim

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// addrCheckCase is one kind of address check: how a test starts one
// through its mechanism, and what its mechanism made of it so far.
type addrCheckCase struct {
	name string
	kind addrCheckKind
	// start starts a check of kind (and of its partner, for a check of two
	// addresses) at addrCheckTarget.
	start func(h *mt)
	// outcome says what the check came to: "pending" while it runs.
	outcome func(h *mt) string
	// answered and silent are the outcomes of an answer from the address
	// pinged and of silence until the deadline.
	answered, silent string
	// waits: the answer's outcome comes at the deadline (a new address,
	// whose old one has until then to answer).
	waits bool
}

// addrCheckTarget is the address the checks of the test ping: no member's.
var addrCheckTarget = netip.MustParseAddrPort("10.9.9.9:7946")

func addrCheckCases() []addrCheckCase {
	startMove := func(h *mt) {
		h.joinPeers(1, 1)
		a := mtAlive(1, 2)
		a.Addr = wire.EncodeAddr(addrCheckTarget)
		h.m.checkMove(h.now, h.m.lookup(mtPeer(1)), a, addrCheckTarget)
	}
	moveOutcome := func(h *mt) string {
		if len(h.m.moves) > 0 {
			return "pending"
		}
		if mb, _ := h.m.Member(mtPeer(1)); mb.Addr == addrCheckTarget {
			return "moved"
		}
		return fmt.Sprintf("refused %d", h.m.Stats().Moves.Refused)
	}
	startLife := func(h *mt) {
		h.joinLivePeers(1)
		a := lifeAlive(1, mtLife(1, 1), addrCheckTarget, 2)
		h.m.checkLife(h.now, h.m.lookup(mtPeer(1)), a, addrCheckTarget)
	}
	lifeOutcome := func(h *mt) string {
		st := h.m.Stats()
		switch {
		case len(h.m.lives.pending) > 0:
			return "pending"
		case st.Lives.Restarts > 0:
			return fmt.Sprintf("restarted %d", st.Lives.Restarts)
		}
		return fmt.Sprintf("refused %d", st.Lives.Refused)
	}
	// The other life is later than this member's: an answer is a
	// conflict this member does not yield.
	otherLife := func(h *mt) *wire.Alive {
		return &wire.Alive{Name: mtSelf, Addr: wire.EncodeAddr(addrCheckTarget), Incarnation: 5, Life: h.m.life + 1}
	}
	return []addrCheckCase{
		{
			name: "conflict", kind: addrCheckConflict,
			start: func(h *mt) { h.joinPeers(1, 1); h.m.checkConflict(h.now, addrCheckTarget) },
			outcome: func(h *mt) string {
				if len(h.m.conflictPings) > 0 {
					return "pending"
				}
				return fmt.Sprintf("conflicts %d", h.m.Stats().Lives.NameConflicts)
			},
			answered: "conflicts 1", silent: "conflicts 0",
		},
		{name: "move_from", kind: addrCheckMoveFrom, start: startMove, outcome: moveOutcome, answered: "refused 1", silent: "refused 1"},
		{name: "move_to", kind: addrCheckMoveTo, start: startMove, outcome: moveOutcome, answered: "moved", silent: "refused 1", waits: true},
		{
			name: "newcomer", kind: addrCheckNewcomer,
			start: func(h *mt) {
				h.joinPeers(1, 1)
				a := mtAlive(9, 1)
				a.Addr = wire.EncodeAddr(addrCheckTarget)
				h.m.checkNewcomer(h.now, a, addrCheckTarget, teller{from: addrCheckTarget})
			},
			outcome: func(h *mt) string {
				if len(h.m.newcomers.byAddr) > 0 {
					return "pending"
				}
				if _, ok := h.m.Member(mtPeer(9)); ok {
					return "admitted"
				}
				return fmt.Sprintf("refused %d", h.m.Stats().Admission.NewcomersRefused)
			},
			answered: "admitted", silent: "refused 1",
		},
		{name: "life_from", kind: addrCheckLifeFrom, start: startLife, outcome: lifeOutcome, answered: "refused 1", silent: "refused 1"},
		{name: "life_to", kind: addrCheckLifeTo, start: startLife, outcome: lifeOutcome, answered: "restarted 1", silent: "refused 1", waits: true},
		{
			name: "own_life", kind: addrCheckOwnLife,
			start: func(h *mt) { h.joinPeers(1, 1); h.m.ownLife(h.now, otherLife(h), addrCheckTarget) },
			outcome: func(h *mt) string {
				switch {
				case len(h.m.lives.own) > 0:
					return "pending"
				case h.m.self.inc() > 5:
					return "overtaken"
				}
				return fmt.Sprintf("conflicts %d", h.m.Stats().Lives.NameConflicts)
			},
			answered: "conflicts 1", silent: "overtaken",
		},
	}
}

// addrCheckOf returns the sequence number and address of the one address
// check of kind in flight.
func addrCheckOf(t *testing.T, h *mt, kind addrCheckKind) (uint32, netip.AddrPort) {
	t.Helper()
	var seqs []uint32
	var addr netip.AddrPort
	for seq, c := range h.m.addrChecks {
		if c.kind == kind {
			seqs = append(seqs, seq)
			addr = c.addr
		}
	}
	require.Len(t, seqs, 1, "address checks of kind %d", kind)
	return seqs[0], addr
}

// The table of address checks: every kind dispatches an answer from the
// address pinged, and silence until the deadline, to its own outcome; an
// answer from another address is refused and changes nothing; silence
// concludes once, and an answer after it is ignored.
func TestAddrCheckTable(t *testing.T) {
	cases := addrCheckCases()
	require.Len(t, cases, int(addrCheckKinds), "a case for every kind")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("answer", func(t *testing.T) {
				h := newMT(t, mtConfig())
				tc.start(h)
				seq, addr := addrCheckOf(t, h, tc.kind)
				require.Equal(t, "pending", tc.outcome(h))
				deadline := h.now.Add(h.cfg.ProbeInterval)

				h.feed(mtStranger, &wire.Ack{Seq: seq})
				require.Equal(t, uint64(1), h.m.Stats().AcksRefused, "an answer from another address is counted")
				require.Equal(t, "pending", tc.outcome(h), "an answer from another address is refused")

				h.feed(addr, &wire.Ack{Seq: seq})
				if !tc.waits {
					require.Equal(t, tc.answered, tc.outcome(h), "the answer concludes at once")
				} else {
					require.Equal(t, "pending", tc.outcome(h), "the verdict waits for the deadline")
				}
				h.tick(deadline)
				require.Equal(t, tc.answered, tc.outcome(h))
				require.Empty(t, h.m.addrChecks)
				require.Equal(t, uint64(1), h.m.Stats().AcksRefused)
			})
			t.Run("silence", func(t *testing.T) {
				h := newMT(t, mtConfig())
				tc.start(h)
				seq, addr := addrCheckOf(t, h, tc.kind)
				h.tick(h.now.Add(h.cfg.ProbeInterval))
				require.Equal(t, tc.silent, tc.outcome(h))
				require.Empty(t, h.m.addrChecks)

				h.feed(addr, &wire.Ack{Seq: seq})
				require.Equal(t, tc.silent, tc.outcome(h), "an answer after the deadline is ignored")
				require.Zero(t, h.m.Stats().AcksRefused)
				h.tick(h.now.Add(10 * h.cfg.ProbeInterval))
				require.Equal(t, tc.silent, tc.outcome(h), "silence concludes once")
			})
		})
	}
}
