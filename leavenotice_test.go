package swim

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// joinCurrentPeers joins n live peers p001..pn at incarnation 1 that
// announce this release's protocols.
func (h *mt) joinCurrentPeers(n int) {
	h.t.Helper()
	ms := make([]wire.MemberState, 0, n)
	for i := 1; i <= n; i++ {
		mb := mtMember(i, StateAlive, 1)
		mb.Versions = wire.Versions{ProtocolMin: wire.ProtocolMin, ProtocolMax: wire.ProtocolMax}
		ms = append(ms, mb)
	}
	h.join(ms...)
}

// TestForgedLeaveDuringStallIsNoLeave: a leave of a member reported by
// another while the member stalls past the check's timeout is not taken for
// the member's own (which it would have told this member itself): the
// member is suspected, with the usual window to refute when it resumes,
// and dead (not left, which applications act on at once) only if it stays
// silent through it. A member of an older release, which does not tell, is
// still taken to have left.
func TestForgedLeaveDuringStallIsNoLeave(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinCurrentPeers(3)
	h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2), Left: true})
	silent := map[netip.AddrPort]bool{mtPeerAddr(1): true}
	out := h.run(h.now.Add(2*cfg.ProbeTimeout), silent)
	mb, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateSuspect, mb.State, "stalled, not left")
	evs := out.eventsAbout(mtPeer(1))
	require.Len(t, evs, 1)
	require.Equal(t, StateSuspect, evs[0].Member.State)
	require.Equal(t, uint64(1), h.m.Stats().LeaveClaimsUnanswered)
	window, _ := h.m.suspicionBounds()
	out = h.run(h.now.Add(window), silent)
	mb, _ = h.m.Member(mtPeer(1))
	require.Equal(t, StateDead, mb.State, "silent through its window: dead, not left")

	old := newMT(t, cfg)
	old.joinPeers(3, 1)
	old.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2), Left: true})
	old.run(old.now.Add(2*cfg.ProbeTimeout), map[netip.AddrPort]bool{mtPeerAddr(1): true})
	mb, _ = old.m.Member(mtPeer(1))
	require.Equal(t, StateLeft, mb.State, "an older member's unanswered leave is its own")
}

// TestLeaveNoticeBelieved: a member's leave from the member itself, from
// its own address, counts at once: no check.
func TestLeaveNoticeBelieved(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinCurrentPeers(3)
	h.feed(mtPeerAddr(1), &wire.Ping{Seq: 9, Target: mtSelf, From: mtPeer(1)}, &wire.Dead{Name: mtPeer(1), Incarnation: 2, From: mtPeer(1), Left: true})
	mb, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateLeft, mb.State)
	require.Zero(t, h.m.Stats().LeaveChecks)
	out := h.ready()
	var acked bool
	for _, p := range out.Packets {
		if a, ok := p.Msgs[0].(*wire.Ack); ok && a.Seq == 9 && p.To == mtPeerAddr(1) {
			acked = true
		}
	}
	require.True(t, acked, "the notice is acknowledged")

	// The same leave from another address is someone else's word: checked.
	h2 := newMT(t, mtConfig())
	h2.joinCurrentPeers(3)
	h2.feed(mtStranger, &wire.Dead{Name: mtPeer(1), Incarnation: 2, From: mtPeer(1), Left: true})
	mb, _ = h2.m.Member(mtPeer(1))
	require.Equal(t, StateAlive, mb.State)
	require.Equal(t, uint64(1), h2.m.Stats().LeaveChecks)
}

// TestLeaveWaitsForNotices: a member leaving tells each member it knows
// with a ping carrying its leave, alone; LeaveDone waits for their acks,
// sending again after each probe timeout, leaveNoticeTries times at most.
func TestLeaveWaitsForNotices(t *testing.T) {
	cfg := mtConfig()
	cfg.RetransmitMult = 1
	h := newMT(t, cfg)
	h.joinCurrentPeers(3)
	require.NoError(t, h.m.Leave(h.now))
	out := h.ready()
	notices := map[netip.AddrPort]uint32{}
	for _, p := range out.Packets {
		ping, ok := p.Msgs[0].(*wire.Ping)
		if !ok {
			continue
		}
		require.Len(t, p.Msgs, 2, "a notice carries the leave and nothing else")
		d := p.Msgs[1].(*wire.Dead)
		require.True(t, d.Left)
		require.Equal(t, mtSelf, d.Name)
		notices[p.To] = ping.Seq
	}
	require.Len(t, notices, 3)
	// Drain the gossip of the leave: only the notices hold LeaveDone.
	for range 20 {
		h.piggyback()
	}
	h.feed(mtPeerAddr(1), &wire.Ack{Seq: notices[mtPeerAddr(1)]})
	h.feed(mtPeerAddr(2), &wire.Ack{Seq: notices[mtPeerAddr(2)]})
	require.False(t, h.m.Status().LeaveDone)
	silent := map[netip.AddrPort]bool{mtPeerAddr(3): true}
	var resent int
	for range leaveNoticeTries {
		for _, p := range h.run(h.now.Add(cfg.ProbeTimeout), silent).Packets {
			if p.To == mtPeerAddr(3) {
				resent++
			}
		}
	}
	require.Equal(t, leaveNoticeTries-1, resent, "sent again until the last try")
	require.True(t, h.m.Status().LeaveDone)
	require.Equal(t, uint64(1), h.m.Stats().LeaveNoticesUnanswered)
}
