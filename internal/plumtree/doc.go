// Package plumtree is one member's part of the epidemic broadcast trees
// that carry the applications' broadcasts among members of
// wire.ProtocolTree (Plumtree: Leitão, Pereira and Rodrigues, "Epidemic
// Broadcast Trees", SRDS 2007), and the receive rule of broadcasts. Gossip
// sends each broadcast to every member about RetransmitMult·log N times; a
// tree sends it to each member once.
//
// The overlay. Plumtree runs over a peer sampling service whose views are
// small and symmetric (HyParView). Here the member view is that service:
// each member's neighbors are its predecessor and successor, among the
// alive members of ProtocolTree, on each of Rings hash rings of the names
// (a member's place on ring j is a mix of its probe-ring key and j,
// RingKey). Two members with the same view agree on who neighbors whom,
// so the relation is symmetric without a message, each member has at most
// 2·Rings neighbors, and the union of a few random Hamiltonian cycles has
// a diameter of O(log N). When a member fails, is suspected, or leaves,
// the members beside it on each ring become neighbors at once: SWIM's
// failure detector is the overlay's repair (Plumtree §3.3 relies on the
// overlay's NeighborDown). A member that pushes or announces to this one
// without being its neighbor in this view (the views differ for a moment)
// is taken as an extra neighbor, bounded, until it goes quiet.
//
// The trees (§3.1). Every link starts eager: a broadcast received for the
// first time is delivered, then pushed to the eager neighbors and
// announced (IHave, by identifier) to the lazy ones. A copy that arrives
// again prunes the link it came over: both ends take it out of the tree
// the copy travelled along (Prune). There are two kinds of tree.
//
// The shared tree carries each origin's first broadcast. Each member
// prunes it with the redundant copies of the first broadcast it received,
// whatever its origin: when the cluster's first broadcast has spread, what
// remains is a spanning tree, and an undirected spanning tree carries a
// broadcast from any member to every other exactly once, so an origin's
// first broadcast costs one copy per member, not one per overlay link.
// Pruning it with every origin's first broadcast would let concurrent
// ones prune one another's links until it spanned nothing (Plumtree's one
// tree has that fault under concurrent senders).
//
// Each origin then has a tree of its own: the shared tree as its first
// broadcast found it, link by link, changed afterwards by its own
// redundant copies (prunes) and its own grafts alone, so concurrent
// broadcasts of several origins never prune one another's paths. A member
// announced a broadcast it has not received within GraftTimeout grafts
// the announcer (§3.2): the link joins the broadcast's origin's tree and
// the broadcast is sent; the graft of an origin's first broadcast mends
// the shared tree too. So a tree broken by a failure or a lost packet
// mends from the announcements, and a graft that is itself lost is sent
// again, to the next announcer. A failure needs no broadcast to show it:
// when a neighbor is suspected, the trees it carried here are asked of
// the other neighbors at once (NeighborDown).
//
// Batching. Pushes and announcements wait per link until the next flush
// (FlushInterval for pushes, announceEvery flushes for announcements,
// which also ride on any packet that goes to the neighbor meanwhile,
// Piggyback), and go in as few packets as hold them.
//
// The receive rule. An origin's epochs start at its process's start (the
// View's Epoch): one before it, or over an hour past this member's clock,
// is Implausible. Each origin's delivered broadcasts are remembered in two
// windows: its first epoch's, kept for good once known, and its latest
// other (unknown, its two latest), so that broadcasts forged at far-later
// epochs cannot silence its real ones; past a window, the broadcasts
// retained tell. A
// keyed broadcast older than the value of its key delivered is stale: no
// member delivers an older value of a key after a newer one.
//
// Bounds, as for everything a peer sends: tree messages count only from
// live members of ProtocolTree at their address (the Machine judges, From);
// announcements remembered are bounded (MaxMissing), and so are a graft's
// identifiers (wire.MaxTreeIDs), the neighbors (maxPeers), each link's
// queue (LinkBytes, the noisiest origin losing its newest), the broadcasts
// retained for grafts (RetainBytes, retainFor), the origins remembered
// (MaxOrigins) and the keys (maxKeys). A graft for a broadcast past its
// retention gets nothing.
//
// # What the Machine feeds it and gets back
//
// The Tree does no I/O, reads no clock and holds no random source (which
// invented origin makes room in the full windows is left to map order): the
// Machine drives it as Memberlist drives the Machine. Members are the ids
// the Machine assigns; the View is the Machine's member table (who is live
// or alive, each member's probe-ring key, the members that may be
// neighbors, in ring order); From is the Machine's judgement of the member
// a message came from. The inputs, each carrying now where time matters:
//
//   - the member table's changes: MemberChanged (a member's state, protocol
//     or existence changed), NeighborDown (a member alive until now is
//     suspected, dead or gone), ForgetOrigin (a member is forgotten);
//   - the messages, decoded: Receive and then, for a Fresh broadcast the
//     Machine delivered, Forward; IHave, Graft, Prune;
//   - this member's own broadcasts: Originate;
//   - the timers' deadlines: Flush, and GraftDue while GraftPending;
//   - a packet going to a neighbor anyway: Piggyback.
//
// The outputs are data: TakeOutput returns the packets' frames per neighbor,
// the time the next Flush is due and the graft timers to arm (the Machine
// keeps them in its one timer queue, with the tokens that tell whether
// each still stands); Piggyback returns a frame; Stats the counters and
// gauges; BackedUp whether this member's own broadcasts must wait.
package plumtree
