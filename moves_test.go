package swim

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// TestAddressHijackRefused: one alive claiming that a live member moved to
// an attacker's address (the hijack: one 24-byte push-pull moved a member
// at every observer for up to 42 s) moves nothing: the member answers at
// its old address, which also hears the claim, to refute it; the
// attacker's address gets one small ping and nothing after it.
func TestAddressHijackRefused(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	attacker := netip.MustParseAddrPort("192.0.2.66:7946")
	h.feed(mtStranger, &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(attacker), Incarnation: 2})
	out := h.ready()
	var toAttacker, claimToMember int
	for _, p := range out.Packets {
		if p.To == attacker {
			toAttacker++
			require.Len(t, p.Msgs, 1, "the check's ping alone")
		}
		if p.To == mtPeerAddr(1) {
			for _, msg := range p.Msgs {
				if a, ok := msg.(*wire.Alive); ok && a.Name == mtPeer(1) && a.Incarnation == 2 {
					claimToMember++
				}
			}
		}
	}
	require.Equal(t, 1, toAttacker)
	require.Equal(t, 1, claimToMember, "the member hears the claim, to refute it")

	// The member answers at its old address; the attacker answers too.
	all := h.respond(nil)
	all = mergeOut(all, h.run(h.now.Add(3*h.cfg.ProbeInterval), nil))
	got, _ := h.m.Member(mtPeer(1))
	require.Equal(t, mtPeerAddr(1), got.Addr)
	require.Equal(t, uint64(1), got.Incarnation)
	require.Empty(t, all.eventsAbout(mtPeer(1)))
	for _, p := range all.Packets {
		require.NotEqual(t, attacker, p.To, "a packet routed to the attacker after the check")
	}
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.Moves.Checked)
	require.Equal(t, uint64(1), st.Moves.Refused)
}

// mergeOut appends b's outputs to a's.
func mergeOut(a, b mtOut) mtOut {
	a.Packets = append(a.Packets, b.Packets...)
	a.Streams = append(a.Streams, b.Streams...)
	a.Events = append(a.Events, b.Events...)
	return a
}
