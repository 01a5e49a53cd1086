package swim

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Tests of the indexes that keep the work of a packet independent of the
// table's size: each checks the index against the structure it indexes
// after every step of cycles that remove, re-add and forget members.

// requireLeaveIndex fails unless leaveChecks holds exactly the leave
// checks in finalChecks, one per member.
func (h *mt) requireLeaveIndex() {
	h.t.Helper()
	want := map[string]uint32{}
	for seq, fc := range h.m.finalChecks {
		if fc.leave {
			require.NotContains(h.t, want, fc.name, "two leave checks of one member")
			want[fc.name] = seq
		}
	}
	require.Equal(h.t, want, h.m.leaveChecks, "the index of leave checks went stale")
}

// checkPingTo returns the sequence number of the ping out sent to peer i
// carrying a leave claim about it.
func checkPingTo(t *testing.T, out mtOut, i int) uint32 {
	t.Helper()
	for _, p := range out.Packets {
		if p.To != mtPeerAddr(i) {
			continue
		}
		var ping *wire.Ping
		for _, msg := range p.Msgs {
			switch msg := msg.(type) {
			case *wire.Ping:
				ping = msg
			case *wire.Dead:
				if ping != nil && msg.Left && msg.Name == mtPeer(i) {
					return ping.Seq
				}
			}
		}
	}
	t.Fatalf("no leave check of %s", mtPeer(i))
	return 0
}

func TestLeaveCheckIndex(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(6, 1)
	h.m.Ready()
	reportLeft := func(i int, inc uint64) mtOut {
		h.feed(mtPeerAddr(6), &wire.Dead{Name: mtPeer(i), Incarnation: inc, From: mtPeer(6), Left: true})
		out := h.ready()
		h.requireLeaveIndex()
		return out
	}
	seqs := map[int]uint32{}
	for i := 1; i <= 3; i++ {
		seqs[i] = checkPingTo(t, reportLeft(i, 2), i)
	}
	require.Len(t, h.m.leaveChecks, 3)

	// The same report again starts no second check; a newer one replaces
	// the check in flight.
	require.Empty(t, reportLeft(1, 2).Packets)
	seqs[1] = checkPingTo(t, reportLeft(1, 3), 1)
	require.Len(t, h.m.leaveChecks, 3)

	// p2 answers without refuting: it left, and its check is over.
	h.feed(mtPeerAddr(2), &wire.Ack{Seq: seqs[2]})
	h.requireLeaveIndex()
	require.NotContains(t, h.m.leaveChecks, mtPeer(2))
	got, _ := h.m.Member(mtPeer(2))
	require.Equal(t, StateLeft, got.State)

	// It comes back and is reported left again: a new check, under its
	// name again.
	h.feed(mtPeerAddr(2), mtAlive(2, 4))
	h.requireLeaveIndex()
	seqs[2] = checkPingTo(t, reportLeft(2, 5), 2)
	require.Contains(t, h.m.leaveChecks, mtPeer(2))

	// p1 refutes its leave (alive above it); the checks of p1 and p2 end
	// on their timers, p3's with a verdict of left. Nothing is left in
	// flight nor in the index.
	h.feed(mtPeerAddr(1), mtAlive(1, 4))
	h.run(h.now.Add(2*h.cfg.ProbeTimeout), map[netip.AddrPort]bool{mtPeerAddr(1): true, mtPeerAddr(2): true, mtPeerAddr(3): true})
	h.requireLeaveIndex()
	require.Empty(t, h.m.leaveChecks)
	for i, want := range map[int]State{1: StateAlive, 2: StateLeft, 3: StateLeft} {
		got, _ := h.m.Member(mtPeer(i))
		require.Equal(t, want, got.State, mtPeer(i))
	}

	// And p3 again, after all that: reported left above its leave, it is
	// a member gone already (no check); back alive, reported left, a check.
	h.feed(mtPeerAddr(3), mtAlive(3, 6))
	seqs[3] = checkPingTo(t, reportLeft(3, 7), 3)
	h.feed(mtPeerAddr(3), &wire.Ack{Seq: seqs[3]})
	h.requireLeaveIndex()
	require.Empty(t, h.m.leaveChecks)
}
