package swim

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// TestMemberChangeFansOut follows one member through join, death and
// return, and checks that each mechanism memberChanged tells follows it:
// the ring, the dead list, the name index, the probe order of randomized
// probing and the trees.
func TestMemberChangeFansOut(t *testing.T) {
	cfg := mtConfig()
	cfg.AlignedProbing, cfg.PairedProbing = false, false
	cfg.Broadcasts.Trees = true
	h := newMT(t, cfg)
	h.m.indexNames()
	// A peer on the trees: it speaks their protocol.
	vers := cfg.versions()
	p := mtMember(1, StateAlive, 1)
	p.Versions = vers
	h.join(p)
	s := h.m.lookup(mtPeer(1))
	require.NotNil(t, s)
	inDead := func() bool {
		found := false
		h.m.dead.each(func(d deadEntry) { found = found || d.id == s.id })
		return found
	}
	follows := func(live bool) {
		t.Helper()
		require.Equal(t, live, h.m.ring.index(h.m.ringOrder(), s.id) >= 0, "ring")
		require.Equal(t, live, h.m.byName.index(h.m.nameOrder(), s.id) >= 0, "name index")
		require.Equal(t, !live, inDead(), "dead list")
		require.Equal(t, live, slices.Contains(h.m.tree.Neighbors(), s.id), "trees")
		if live {
			require.True(t, h.m.probeQueued.has(s.id), "probe order")
		}
	}
	follows(true)

	h.feed(mtPeerAddr(1), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(1), Left: true})
	h.confirmLeaves(h.ready())
	require.Equal(t, StateLeft, s.state())
	follows(false)

	h.m.probeQueued.remove(s.id)
	back := mtAlive(1, 2)
	back.Versions = vers
	h.feedAnswered(mtPeerAddr(1), back)
	require.Equal(t, StateAlive, s.state())
	follows(true)
}
