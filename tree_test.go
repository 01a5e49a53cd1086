package swim

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/plumtree"
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

// broadcastGrafts are the Grafts in pkts that ask for broadcasts (the
// test peers never answer probes, so in a long settle they are suspected,
// and the Grafts naming the trees they carried go out too).
func broadcastGrafts(pkts []mtPkt) map[netip.AddrPort][]*wire.Graft {
	got := treeMsgs[*wire.Graft](pkts)
	for to, gs := range got {
		got[to] = slices.DeleteFunc(gs, func(g *wire.Graft) bool { return len(g.IDs) == 0 })
		if len(got[to]) == 0 {
			delete(got, to)
		}
	}
	return got
}

// neighborAddrs are the addresses of the Machine's tree neighbors.
func (h *mt) neighborAddrs() map[netip.AddrPort]bool {
	addrs := make(map[netip.AddrPort]bool)
	for _, id := range h.m.tree.Neighbors() {
		addrs[h.m.addrOf(h.m.entry(id))] = true
	}
	return addrs
}

// A broadcast goes once to each tree neighbor, as a push, and to nobody
// else; its outcome is reported once it has been sent.
func TestTreePushesToNeighborsOnly(t *testing.T) {
	h := newTreeMT(t, 20)
	nb := h.neighborAddrs()
	require.NotEmpty(t, nb)
	require.LessOrEqual(t, len(nb), 2*plumtree.Rings, "the rings' neighbors alone")
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
	require.Equal(t, uint64(len(nb)), h.m.Stats().Trees.PushesSent)
}

// treePeerPair returns two of h's neighbors, by index.
func treePeerPair(t *testing.T, h *mt) (a, b int) {
	t.Helper()
	nb := h.m.tree.Neighbors()
	require.GreaterOrEqual(t, len(nb), 2)
	return peerIndex(t, h.m.nameOf(h.m.entry(nb[0]))),
		peerIndex(t, h.m.nameOf(h.m.entry(nb[1])))
}

// pushedAndAnnounced returns the broadcasts out pushed to addr and the
// identifiers it announced there.
func pushedAndAnnounced(out mtOut, addr netip.AddrPort) (pushed []*wire.Broadcast, announced []uint64) {
	for _, ih := range treeMsgs[*wire.IHave](out.Packets)[addr] {
		announced = append(announced, ih.IDs...)
	}
	return treeMsgs[*wire.Broadcast](out.Packets)[addr], announced
}

// A second copy of a broadcast over another link prunes that link from
// the broadcast's tree (Plumtree §3.1), and, when it is the first
// broadcast this member received, from the shared tree as well: the
// sender is told of both, and the first broadcast of any other origin
// reaches it as an announcement, not a push. Later redundant copies prune
// their origin's tree alone.
func TestTreeDuplicatePrunes(t *testing.T) {
	h := newTreeMT(t, 20)
	a, b := treePeerPair(t, h)
	origin := mtPeer(a)
	first := &wire.Broadcast{Origin: origin, Epoch: 7, Seq: 1, Payload: []byte("x")}
	h.feed(mtPeerAddr(a), first)
	h.feed(mtPeerAddr(b), first)
	out := h.treeSettle(50 * time.Millisecond)
	require.Len(t, out.Messages, 1, "delivered once")
	prunes := treeMsgs[*wire.Prune](out.Packets)
	require.ElementsMatch(t, []*wire.Prune{{Origin: ""}, {Origin: origin}}, prunes[mtPeerAddr(b)], "the shared tree and origin's")
	require.Empty(t, prunes[mtPeerAddr(a)], "the first link stays eager")
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.Trees.Redundant)
	require.Equal(t, uint64(2), st.Trees.PrunesSent)
	require.Equal(t, 2, st.Trees.LazyLinks)

	// b prunes the shared tree's link too: the first broadcast of another
	// origin is announced to b, pushed to the others.
	h.feed(mtPeerAddr(b), &wire.Prune{Origin: ""})
	other := mtPeer(19)
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: other, Epoch: 3, Seq: 1, Payload: []byte("y")})
	out = h.treeSettle(time.Second)
	pushed, announced := pushedAndAnnounced(out, mtPeerAddr(b))
	require.Empty(t, pushed, "a pruned link carries no push")
	require.Contains(t, announced, TreeID(other, 3, 1))
	require.Empty(t, treeMsgs[*wire.Broadcast](out.Packets)[mtPeerAddr(a)], "not back to where it came from")
	nb := h.m.tree.Neighbors()
	c := nb[2]
	for _, id := range nb[2:] {
		pushed, _ := pushedAndAnnounced(out, h.m.addrOf(h.m.entry(id)))
		require.Len(t, pushed, 1, "the other links are still in the shared tree")
	}

	// A redundant copy of other's broadcast, not this member's first,
	// prunes other's tree alone: c stays in the shared tree.
	cAddr := h.m.addrOf(h.m.entry(c))
	h.feed(cAddr, &wire.Broadcast{Origin: other, Epoch: 3, Seq: 1, Payload: []byte("y")})
	out = h.treeSettle(time.Second)
	require.Equal(t, []*wire.Prune{{Origin: other}}, treeMsgs[*wire.Prune](out.Packets)[cAddr])
	third := mtPeer(17)
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: third, Epoch: 1, Seq: 1, Payload: []byte("z")})
	out = h.treeSettle(time.Second)
	pushed, _ = pushedAndAnnounced(out, cAddr)
	require.Len(t, pushed, 1, "c is still in the shared tree")
}

// A link added after the first broadcast (here an extra neighbor: a
// member pushing to this one without being its neighbor on the rings) is
// settled in the shared tree by the first broadcast of any origin that
// comes over it: a redundant one prunes it from the shared tree, while a
// link settled already loses only the origin's tree.
func TestTreeNewLinksSettle(t *testing.T) {
	h := newTreeMT(t, 20)
	a, b := treePeerPair(t, h)
	x := 0
	for i := 1; i <= 20 && x == 0; i++ {
		if s := h.m.lookup(mtPeer(i)); s != nil && s != h.m.self && !slices.Contains(h.m.tree.Neighbors(), s.id) {
			x = i
		}
	}
	require.NotZero(t, x, "a member that is not a neighbor")
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: mtPeer(a), Epoch: 1, Seq: 1, Payload: []byte("first")})
	h.treeSettle(time.Second)

	origin := mtPeer(19)
	bc := &wire.Broadcast{Origin: origin, Epoch: 1, Seq: 1, Payload: []byte("x")}
	h.feed(mtPeerAddr(a), bc)
	h.feed(mtPeerAddr(x), bc)
	h.feed(mtPeerAddr(b), bc)
	out := h.treeSettle(time.Second)
	prunes := treeMsgs[*wire.Prune](out.Packets)
	require.ElementsMatch(t, []*wire.Prune{{Origin: ""}, {Origin: origin}}, prunes[mtPeerAddr(x)], "the new link leaves the shared tree")
	require.Equal(t, []*wire.Prune{{Origin: origin}}, prunes[mtPeerAddr(b)], "a settled link leaves origin's tree alone")
}

// An origin's tree is the shared tree as its first broadcast found it,
// and changes by its own prunes and grafts alone: a graft puts the link in
// it (and, for the origin's first broadcast, mends the shared tree), and
// later prunes of the shared tree leave it alone.
func TestTreeOwnTrees(t *testing.T) {
	h := newTreeMT(t, 20)
	a, b := treePeerPair(t, h)
	origin, other := mtPeer(18), mtPeer(19)
	h.feed(mtPeerAddr(b), &wire.Prune{Origin: ""})
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: origin, Epoch: 1, Seq: 1, Payload: []byte("x")})
	out := h.treeSettle(time.Second)
	pushed, announced := pushedAndAnnounced(out, mtPeerAddr(b))
	require.Empty(t, pushed)
	require.Contains(t, announced, TreeID(origin, 1, 1))

	// b grafts it: the broadcast is sent, and origin's link to b is eager
	// from now on; the shared tree mends too (it failed to carry origin's
	// first broadcast to b).
	h.feed(mtPeerAddr(b), &wire.Graft{IDs: []uint64{TreeID(origin, 1, 1)}})
	out = h.treeSettle(time.Second)
	pushed, _ = pushedAndAnnounced(out, mtPeerAddr(b))
	require.Len(t, pushed, 1)
	require.True(t, h.m.tree.Eager(h.m.tree.Neighbors()[1], ""), "a graft of an origin's first broadcast mends the shared tree")

	// The shared tree loses the link again (a redundant copy at b):
	// origin's own tree keeps it.
	h.feed(mtPeerAddr(b), &wire.Prune{Origin: ""})
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: origin, Epoch: 1, Seq: 2, Payload: []byte("y")})
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: other, Epoch: 1, Seq: 1, Payload: []byte("z")})
	out = h.treeSettle(time.Second)
	pushed, announced = pushedAndAnnounced(out, mtPeerAddr(b))
	require.Len(t, pushed, 1)
	require.Equal(t, origin, pushed[0].Origin, "origin's own tree keeps the link")
	require.Contains(t, announced, TreeID(other, 1, 1), "the shared tree does not")

	// A redundant copy of origin's later broadcast from b prunes origin's
	// own tree alone.
	h.feed(mtPeerAddr(b), &wire.Broadcast{Origin: origin, Epoch: 1, Seq: 2, Payload: []byte("y")})
	out = h.treeSettle(time.Second)
	require.Equal(t, []*wire.Prune{{Origin: origin}}, treeMsgs[*wire.Prune](out.Packets)[mtPeerAddr(b)])
	// b's link is out of the shared tree, origin's, and other's (whose
	// first broadcast found it out of the shared tree).
	require.Equal(t, 3, h.m.Stats().Trees.LazyLinks)
}

// A Graft naming origins (sent by a member whose neighbor on those trees
// is suspected) puts the link in those trees without a broadcast to
// fetch: the origin's next broadcast is pushed over it, and "" puts the
// link back in the shared tree, unsettled, so that a redundant copy of a
// first broadcast can prune it again.
func TestTreeJoinsNamedOrigins(t *testing.T) {
	h := newTreeMT(t, 20)
	a, b := treePeerPair(t, h)
	origin := mtPeer(18)
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: origin, Epoch: 1, Seq: 1, Payload: []byte("x")})
	h.treeSettle(time.Second)
	h.feed(mtPeerAddr(b), &wire.Broadcast{Origin: origin, Epoch: 1, Seq: 1, Payload: []byte("x")})
	h.feed(mtPeerAddr(b), &wire.Prune{Origin: origin})
	h.feed(mtPeerAddr(b), &wire.Prune{Origin: ""})
	h.treeSettle(time.Second)
	pb := h.m.byAddr(mtPeerAddr(b)).id
	require.False(t, h.m.tree.Eager(pb, origin))
	require.False(t, h.m.tree.Eager(pb, ""))

	h.feed(mtPeerAddr(b), &wire.Graft{Origins: []string{"", origin}})
	require.True(t, h.m.tree.Eager(pb, origin))
	require.True(t, h.m.tree.Eager(pb, ""))
	require.False(t, h.m.tree.Settled(pb), "a joined shared link can be pruned again")
	require.Equal(t, uint64(2), h.m.Stats().Trees.JoinsReceived)
	h.feed(mtPeerAddr(a), &wire.Broadcast{Origin: origin, Epoch: 1, Seq: 2, Payload: []byte("y")})
	out := h.treeSettle(time.Second)
	pushed, _ := pushedAndAnnounced(out, mtPeerAddr(b))
	require.Len(t, pushed, 1)
	require.Equal(t, uint32(2), pushed[0].Seq)
}

// A member that raises a suspicion sends it at once to the suspect's
// neighbors on the rings: each member it tells has the suspect beside it
// on some ring, with no eligible member in between.
func TestTreeTellsSuspectsNeighbors(t *testing.T) {
	h := newTreeMT(t, 20)
	ping, pkt, _ := h.firstProbe()
	target := ping.Target
	silent := map[netip.AddrPort]bool{pkt.To: true}
	var out mtOut
	for h.m.Stats().SuspicionsRaised == 0 {
		out = h.step(h.now.Add(2*h.cfg.ProbeInterval), silent)
	}
	told := map[uint32]bool{}
	for _, p := range out.Packets {
		// A packet of its own, led by the suspicion (gossip rides behind
		// other messages).
		if sp, ok := p.Msgs[0].(*wire.Suspect); ok && sp.Name == target && sp.From == mtSelf {
			told[h.m.byAddr(p.To).id] = true
		}
	}
	require.NotEmpty(t, told)
	require.LessOrEqual(t, len(told), 2*plumtree.Rings)
	require.Equal(t, uint64(len(told)), h.m.Stats().Trees.SuspicionsTold)
	ts := h.m.lookup(target)
	var ring []uint32 // the members a ring may hold: the live ones, this one included
	h.m.ring.each(func(id uint32) {
		if e := h.m.entry(id); e != nil && (e == h.m.self || h.m.treeEligible(e)) {
			ring = append(ring, id)
		}
	})
	// nothingBetween: going round ring j from a, b comes before any other.
	nothingBetween := func(j int, a, b uint32) bool {
		ka, kb := plumtree.RingKey(h.m.reg.ringKeys[a], j), plumtree.RingKey(h.m.reg.ringKeys[b], j)
		for _, id := range ring {
			if id != a && id != b && plumtree.RingKey(h.m.reg.ringKeys[id], j)-ka < kb-ka {
				return false
			}
		}
		return true
	}
	adjacent := func(a, b uint32) bool {
		for j := range plumtree.Rings {
			if nothingBetween(j, a, b) || nothingBetween(j, b, a) {
				return true
			}
		}
		return false
	}
	for id := range told {
		require.True(t, adjacent(id, ts.id), "%s is no ring neighbor of %s", h.m.reg.name(id), target)
	}
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

// An announced broadcast that does not come within Broadcasts.GraftTimeout is
// grafted from its announcer (Plumtree §3.2); once it comes it is
// delivered, and the announcement is forgotten.
func TestTreeGraftsWhatIsAnnounced(t *testing.T) {
	h := newTreeMT(t, 8)
	id := TreeID(mtPeer(5), 9, 1)
	h.feed(mtPeerAddr(3), &wire.IHave{IDs: []uint64{id}})
	require.Equal(t, 1, h.m.Stats().Trees.Missing)
	out := h.treeSettle(h.cfg.treeGraftTimeout() + 50*time.Millisecond)
	require.Equal(t, []*wire.Graft{{IDs: []uint64{id}}}, broadcastGrafts(out.Packets)[mtPeerAddr(3)])
	h.feed(mtPeerAddr(3), &wire.Broadcast{Origin: mtPeer(5), Epoch: 9, Seq: 1, Payload: []byte("late")})
	out = h.treeSettle(10 * time.Second)
	require.Equal(t, []Message{{Kind: MessageBroadcast, From: mtPeer(5), Payload: []byte("late")}}, out.Messages)
	require.Empty(t, broadcastGrafts(out.Packets), "no graft once it came")
	st := h.m.Stats()
	require.Zero(t, st.Trees.Missing)
	require.Equal(t, uint64(1), st.Trees.GraftsSent)
}

// A broadcast announced and never sent is grafted a bounded number of
// times, then given up and counted.
func TestTreeGraftsGiveUp(t *testing.T) {
	h := newTreeMT(t, 8)
	id := TreeID(mtPeer(5), 9, 1)
	h.feed(mtPeerAddr(3), &wire.IHave{IDs: []uint64{id}})
	out := h.treeSettle(time.Minute)
	require.Len(t, broadcastGrafts(out.Packets)[mtPeerAddr(3)], plumtree.GraftTries)
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.Trees.GraftsAbandoned)
	require.Zero(t, st.Trees.Missing)
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
	require.Equal(t, uint64(3), st.Trees.Refused)
	require.Zero(t, st.Trees.Missing)
	require.Zero(t, st.Trees.GraftsReceived)

	// A member grafting what is not retained here gets no broadcast.
	h.feed(mtPeerAddr(2), &wire.Graft{IDs: []uint64{1, 2, 3}})
	out = h.treeSettle(time.Second)
	require.Empty(t, treeMsgs[*wire.Broadcast](out.Packets))
	require.Equal(t, uint64(3), h.m.Stats().Trees.GraftsUnknown)

	// Announcements without end from one member: at most
	// plumtree.MaxMissingPerPeer remembered, the rest refused.
	const rounds = plumtree.MaxMissing/wire.MaxTreeIDs + 2
	for i := range rounds {
		ids := make([]uint64, wire.MaxTreeIDs)
		for j := range ids {
			ids[j] = uint64(i*wire.MaxTreeIDs+j) + 1000
		}
		h.feed(mtPeerAddr(4), &wire.IHave{IDs: ids})
	}
	st = h.m.Stats()
	require.Equal(t, plumtree.MaxMissingPerPeer, st.Trees.Missing)
	require.Equal(t, uint64(3+rounds*wire.MaxTreeIDs-plumtree.MaxMissingPerPeer), st.Trees.Refused)
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
// Broadcasts.QueueLimit, Broadcast refuses with ErrBroadcastQueueFull and
// BroadcastBackedUp says so; a flush makes room.
func TestBroadcastQueueFull(t *testing.T) {
	cfg := mtConfig()
	cfg.Broadcasts.QueueLimit = 4
	h := newMT(t, cfg)
	h.join(mtMemberV(1, wire.ProtocolTree), mtMemberV(2, wire.ProtocolTree))
	for range 4 {
		_, err := h.m.Broadcast(h.now, "", []byte("x"))
		require.NoError(t, err)
	}
	require.True(t, h.m.Status().BroadcastBackedUp)
	_, err := h.m.Broadcast(h.now, "", []byte("x"))
	require.ErrorIs(t, err, ErrBroadcastQueueFull)
	out := h.treeSettle(50 * time.Millisecond)
	require.Len(t, out.Outcomes, 4)
	require.False(t, h.m.Status().BroadcastBackedUp)
	_, err = h.m.Broadcast(h.now, "", []byte("x"))
	require.NoError(t, err)
}

// The broadcasts retained for grafts stay within Broadcasts.RetainBytes,
// and a graft for one dropped gets nothing.
func TestTreeRetainBounded(t *testing.T) {
	cfg := mtConfig()
	cfg.Broadcasts.RetainBytes = 4096
	h := newMT(t, cfg)
	h.join(mtMemberV(1, wire.ProtocolTree), mtMemberV(2, wire.ProtocolTree))
	for range 100 {
		_, err := h.m.Broadcast(h.now, "", make([]byte, 200))
		require.NoError(t, err)
		h.treeSettle(10 * time.Millisecond)
		require.LessOrEqual(t, h.m.Stats().Trees.RetainedBytes, cfg.Broadcasts.RetainBytes)
	}
	h.feed(mtPeerAddr(1), &wire.Graft{IDs: []uint64{TreeID(mtSelf, h.m.bcastEpoch, 1), TreeID(mtSelf, h.m.bcastEpoch, 100)}})
	out := h.treeSettle(50 * time.Millisecond)
	require.Len(t, treeMsgs[*wire.Broadcast](out.Packets)[mtPeerAddr(1)], 1, "only the one still retained")
	require.Equal(t, uint64(1), h.m.Stats().Trees.GraftsUnknown)
}
