package swim

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// newTreeMT is a Machine that knows p001..pn, all on the trees.
func newTreeMT(t *testing.T, n int) *mt {
	t.Helper()
	h := newMT(t, mtConfig())
	ms := make([]wire.MemberState, 0, n)
	for i := 1; i <= n; i++ {
		ms = append(ms, mtMemberV(i, wire.ProtocolTree))
	}
	h.join(ms...)
	require.Equal(t, n+1, h.m.NumMembers())
	return h
}

// treeSettle drives the Machine's timers for d, as a driver would, with
// nobody answering, and returns everything it sent, delivered and reported.
func (h *mt) treeSettle(d time.Duration) mtOut {
	h.t.Helper()
	until := h.now.Add(d)
	all := h.ready()
	for i := 0; ; i++ {
		require.Less(h.t, i, 100000, "NextDeadline does not advance")
		next := h.m.NextDeadline()
		if next.IsZero() || next.After(until) {
			break
		}
		h.tick(laterOf(next, h.now))
		out := h.ready()
		all.Packets = append(all.Packets, out.Packets...)
		all.Messages = append(all.Messages, out.Messages...)
		all.Outcomes = append(all.Outcomes, out.Outcomes...)
		all.Events = append(all.Events, out.Events...)
	}
	h.now = until
	return all
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// treeMsgs returns the messages of type T the packets carried, by address.
func treeMsgs[T wire.Message](pkts []mtPkt) map[netip.AddrPort][]T {
	got := make(map[netip.AddrPort][]T)
	for _, p := range pkts {
		for _, msg := range p.Msgs {
			if m, ok := msg.(T); ok {
				got[p.To] = append(got[p.To], m)
			}
		}
	}
	return got
}

// neighborAddrs are the addresses of the Machine's tree neighbors.
func (h *mt) neighborAddrs() map[netip.AddrPort]bool {
	addrs := make(map[netip.AddrPort]bool)
	for _, p := range h.m.tree.peers {
		addrs[h.m.addrOf(h.m.entry(p.id))] = true
	}
	return addrs
}

// A broadcast goes once to each tree neighbor, as a push, and to nobody
// else; its outcome is reported once it has been sent.
func TestTreePushesToNeighborsOnly(t *testing.T) {
	h := newTreeMT(t, 20)
	nb := h.neighborAddrs()
	require.NotEmpty(t, nb)
	require.LessOrEqual(t, len(nb), 2*treeRings, "the rings' neighbors alone")
	id, err := h.m.Broadcast(h.now, "", []byte("news"))
	require.NoError(t, err)
	out := h.treeSettle(50 * time.Millisecond)
	pushes := treeMsgs[*wire.Broadcast](out.Packets)
	require.Len(t, pushes, len(nb))
	for addr, bs := range pushes {
		require.True(t, nb[addr], "pushed to %v, no neighbor", addr)
		require.Len(t, bs, 1)
		require.Equal(t, []byte("news"), bs[0].Payload)
	}
	require.Equal(t, []Outcome{{ID: id}}, out.Outcomes)
	require.Zero(t, h.m.uq.Len(), "no gossip among members on the trees")
	require.Equal(t, uint64(len(nb)), h.m.Stats().TreePushesSent)
}

// A second copy of a broadcast over another link prunes that link for
// the origin (Plumtree §3.1): the sender is told, and the origin's next
// broadcast reaches it as an announcement, not a push.
func TestTreeDuplicatePrunes(t *testing.T) {
	h := newTreeMT(t, 20)
	var a, b int
	for _, p := range h.m.tree.peers {
		i := peerIndex(t, h.m.nameOf(h.m.entry(p.id)))
		if a == 0 {
			a = i
		} else if b == 0 {
			b = i
		}
	}
	origin := mtPeer(a)
	first := &wire.Broadcast{Origin: origin, Epoch: 7, Seq: 1, Payload: []byte("x")}
	h.feed(mtPeerAddr(a), first)
	h.feed(mtPeerAddr(b), first)
	out := h.treeSettle(50 * time.Millisecond)
	require.Len(t, out.Messages, 1, "delivered once")
	prunes := treeMsgs[*wire.Prune](out.Packets)
	require.Equal(t, []*wire.Prune{{Origin: origin}}, prunes[mtPeerAddr(b)])
	require.Empty(t, prunes[mtPeerAddr(a)], "the first link stays eager")
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.TreeRedundant)
	require.Equal(t, uint64(1), st.TreePrunesSent)

	// b prunes this member's link for origin too: origin's next broadcast
	// is announced to b, pushed to the others.
	h.feed(mtPeerAddr(b), &wire.Prune{Origin: origin})
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: origin, Epoch: 7, Seq: 2, Payload: []byte("y")})
	out = h.treeSettle(time.Second)
	require.Empty(t, treeMsgs[*wire.Broadcast](out.Packets)[mtPeerAddr(b)], "a pruned link carries no push")
	var announced []uint64
	for _, ih := range treeMsgs[*wire.IHave](out.Packets)[mtPeerAddr(b)] {
		announced = append(announced, ih.IDs...)
	}
	require.Contains(t, announced, TreeID(origin, 7, 2))
	require.Empty(t, treeMsgs[*wire.Broadcast](out.Packets)[mtPeerAddr(a)], "not back to where it came from")
}

func peerIndex(t *testing.T, name string) int {
	t.Helper()
	for i := 1; i < 1000; i++ {
		if mtPeer(i) == name {
			return i
		}
	}
	t.Fatalf("%q is no test peer", name)
	return 0
}

// An announced broadcast that does not come within TreeGraftTimeout is
// grafted from its announcer (Plumtree §3.2); once it comes it is
// delivered, and the announcement is forgotten.
func TestTreeGraftsWhatIsAnnounced(t *testing.T) {
	h := newTreeMT(t, 8)
	id := TreeID(mtPeer(5), 9, 1)
	h.feed(mtPeerAddr(3), &wire.IHave{IDs: []uint64{id}})
	require.Equal(t, 1, h.m.Stats().TreeMissing)
	out := h.treeSettle(h.cfg.treeGraftTimeout() + 50*time.Millisecond)
	require.Equal(t, []*wire.Graft{{IDs: []uint64{id}}}, treeMsgs[*wire.Graft](out.Packets)[mtPeerAddr(3)])
	h.feed(mtPeerAddr(3), &wire.Broadcast{Origin: mtPeer(5), Epoch: 9, Seq: 1, Payload: []byte("late")})
	out = h.treeSettle(10 * time.Second)
	require.Equal(t, []Message{{Kind: MessageBroadcast, From: mtPeer(5), Payload: []byte("late")}}, out.Messages)
	require.Empty(t, treeMsgs[*wire.Graft](out.Packets), "no graft once it came")
	st := h.m.Stats()
	require.Zero(t, st.TreeMissing)
	require.Equal(t, uint64(1), st.TreeGraftsSent)
}

// A broadcast announced and never sent is grafted a bounded number of
// times, then given up and counted.
func TestTreeGraftsGiveUp(t *testing.T) {
	h := newTreeMT(t, 8)
	id := TreeID(mtPeer(5), 9, 1)
	h.feed(mtPeerAddr(3), &wire.IHave{IDs: []uint64{id}})
	out := h.treeSettle(time.Minute)
	require.Len(t, treeMsgs[*wire.Graft](out.Packets)[mtPeerAddr(3)], treeGraftTries)
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.TreeGraftsAbandoned)
	require.Zero(t, st.TreeMissing)
}

// Hostile input: tree messages from an address that is no member are
// refused and counted, and get nothing; a graft for a broadcast not
// retained gets nothing; announcements are bounded.
func TestTreeRefusesStrangersAndBounds(t *testing.T) {
	h := newTreeMT(t, 8)
	_, err := h.m.Broadcast(h.now, "", []byte("mine"))
	require.NoError(t, err)
	h.treeSettle(50 * time.Millisecond)
	mine := TreeID(mtSelf, h.m.bcastEpoch, 1)

	// A stranger grafting a retained broadcast: nothing goes to it.
	h.feed(mtStranger, &wire.Graft{IDs: []uint64{mine}}, &wire.IHave{IDs: []uint64{42}}, &wire.Prune{Origin: mtSelf})
	out := h.treeSettle(5 * time.Second)
	for _, p := range out.Packets {
		require.NotEqual(t, mtStranger, p.To, "sent to a stranger")
	}
	st := h.m.Stats()
	require.Equal(t, uint64(3), st.TreeRefused)
	require.Zero(t, st.TreeMissing)
	require.Zero(t, st.TreeGraftsReceived)

	// A member grafting what is not retained here gets no broadcast.
	h.feed(mtPeerAddr(2), &wire.Graft{IDs: []uint64{1, 2, 3}})
	out = h.treeSettle(time.Second)
	require.Empty(t, treeMsgs[*wire.Broadcast](out.Packets))
	require.Equal(t, uint64(3), h.m.Stats().TreeGraftsUnknown)

	// Announcements without end: at most treeMaxMissing remembered.
	for i := range treeMaxMissing/wire.MaxTreeIDs + 2 {
		ids := make([]uint64, wire.MaxTreeIDs)
		for j := range ids {
			ids[j] = uint64(i*wire.MaxTreeIDs+j) + 1000
		}
		h.feed(mtPeerAddr(4), &wire.IHave{IDs: ids})
	}
	st = h.m.Stats()
	require.Equal(t, treeMaxMissing, st.TreeMissing)
	require.Equal(t, uint64(3+2*wire.MaxTreeIDs), st.TreeRefused)
}

// A member of an older release gets broadcasts by gossip while the others
// get them on the trees; once it is gone, gossip stops carrying them.
func TestTreeOlderPeersByGossip(t *testing.T) {
	h := newMT(t, mtConfig())
	h.join(mtMemberV(1, wire.ProtocolTree), mtMemberV(2, wire.ProtocolTree), mtMemberV(3, wire.ProtocolTree-1))
	_, err := h.m.Broadcast(h.now, "", []byte("both"))
	require.NoError(t, err)
	require.Equal(t, 1, h.m.uq.Len(), "gossip carries it for p003")
	pkts, _ := gossipAll(h)
	got := treeMsgs[*wire.Broadcast](pkts)
	require.NotEmpty(t, got[mtPeerAddr(3)], "the older member gets it")

	h.feedConfirmed(mtPeerAddr(1), &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: mtPeer(1)})
	_, err = h.m.Broadcast(h.now, "", []byte("trees only"))
	require.NoError(t, err)
	require.Zero(t, h.m.uq.Len(), "no gossip once every live member is on the trees")
}

// Backpressure: while this member's own broadcasts wait unsent beyond
// UserBroadcastLimit, Broadcast refuses with ErrBroadcastQueueFull and
// BroadcastBackedUp says so; a flush makes room.
func TestBroadcastQueueFull(t *testing.T) {
	cfg := mtConfig()
	cfg.UserBroadcastLimit = 4
	h := newMT(t, cfg)
	h.join(mtMemberV(1, wire.ProtocolTree), mtMemberV(2, wire.ProtocolTree))
	for range 4 {
		_, err := h.m.Broadcast(h.now, "", []byte("x"))
		require.NoError(t, err)
	}
	require.True(t, h.m.BroadcastBackedUp())
	_, err := h.m.Broadcast(h.now, "", []byte("x"))
	require.ErrorIs(t, err, ErrBroadcastQueueFull)
	out := h.treeSettle(50 * time.Millisecond)
	require.Len(t, out.Outcomes, 4)
	require.False(t, h.m.BroadcastBackedUp())
	_, err = h.m.Broadcast(h.now, "", []byte("x"))
	require.NoError(t, err)
}

// The broadcasts retained for grafts stay within BroadcastRetainBytes,
// and a graft for one dropped gets nothing.
func TestTreeRetainBounded(t *testing.T) {
	cfg := mtConfig()
	cfg.BroadcastRetainBytes = 4096
	h := newMT(t, cfg)
	h.join(mtMemberV(1, wire.ProtocolTree), mtMemberV(2, wire.ProtocolTree))
	for range 100 {
		_, err := h.m.Broadcast(h.now, "", make([]byte, 200))
		require.NoError(t, err)
		h.treeSettle(10 * time.Millisecond)
		require.LessOrEqual(t, h.m.Stats().TreeRetainedBytes, cfg.BroadcastRetainBytes)
	}
	h.feed(mtPeerAddr(1), &wire.Graft{IDs: []uint64{TreeID(mtSelf, h.m.bcastEpoch, 1), TreeID(mtSelf, h.m.bcastEpoch, 100)}})
	out := h.treeSettle(50 * time.Millisecond)
	require.Len(t, treeMsgs[*wire.Broadcast](out.Packets)[mtPeerAddr(1)], 1, "only the one still retained")
	require.Equal(t, uint64(1), h.m.Stats().TreeGraftsUnknown)
}
