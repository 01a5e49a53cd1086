package swim

import (
	"net/netip"
	"slices"
	"time"

	"github.com/swim-go/swim/internal/plumtree"
	"github.com/swim-go/swim/internal/wire"
)

// The applications' broadcasts travel on epidemic broadcast trees among
// members of wire.ProtocolTree (Plumtree: Leitão, Pereira and Rodrigues,
// "Epidemic Broadcast Trees", SRDS 2007). The protocol is internal/plumtree
// (its package comment tells how the trees are built and mended); this
// file is its adapter. It feeds the package the member table (who may be a
// neighbor, who is live, each member's ring key, every change of a member
// through treeMemberChanged), decodes nothing itself but passes each tree
// message on with the member it came from, arms the package's timers in
// the Machine's queue, turns its frames into packets to members'
// addresses and its announcements into piggyback, and keeps what concerns
// the Machine's API: the Outcomes of this member's own broadcasts, and
// gossip toward members of older releases that read no trees.

// TreeID is the identifier of a broadcast in announcements and grafts: the
// first 8 bytes of the SHA-256 of its origin, epoch and sequence number.
func TreeID(origin string, epoch uint64, seq uint32) uint64 { return plumtree.ID(origin, epoch, seq) }

// treeView is the Machine as the trees see its member table
// (plumtree.View).
type treeView Machine

func (v *treeView) Key(id uint32) uint64 { return v.reg.ringKeys[id] }

func (v *treeView) Live(id uint32) bool {
	s := (*Machine)(v).entry(id)
	return s != nil && s.live()
}

func (v *treeView) Alive(id uint32) bool {
	s := (*Machine)(v).entry(id)
	return s != nil && s.state() == StateAlive
}

func (v *treeView) Member(name string) bool { return (*Machine)(v).lookup(name) != nil }

// Epoch is where the broadcasts of the member called name start: its
// life's start, in milliseconds (newLife, epochOf).
func (v *treeView) Epoch(name string) (uint64, bool) {
	m := (*Machine)(v)
	s := m.lookup(name)
	if s == nil || m.lifeOf(s) == 0 {
		return 0, false
	}
	return m.lifeOf(s) >> 16, true
}

func (v *treeView) Eligible(f func(id uint32)) {
	m := (*Machine)(v)
	m.ring.each(func(id uint32) {
		if s := m.entry(id); s != nil && m.treeEligible(s) {
			f(id)
		}
	})
}

// newTree makes the Machine's part of the trees, once its own entry is
// made.
func (m *Machine) newTree() {
	m.tree = plumtree.New(plumtree.Config{
		Self:          m.selfName,
		On:            m.cfg.Broadcasts.Trees,
		MaxOrigins:    m.cfg.MaxMembers,
		RetainBytes:   m.cfg.broadcastRetainBytes(),
		FlushInterval: m.cfg.treeFlushInterval(),
		GraftTimeout:  m.cfg.treeGraftTimeout(),
	}, (*treeView)(m), m.self.id)
	m.treeOld = make(map[uint32]struct{})
}

// treeOn reports whether this member takes part in trees.
func (m *Machine) treeOn() bool { return m.cfg.Broadcasts.Trees }

// treeCapable reports whether s is a member broadcasts reach by tree.
func (m *Machine) treeCapable(s *memberState) bool {
	return m.versionsOf(s).Effective().ProtocolMax >= wire.ProtocolTree
}

// treeEligible reports whether s may be this member's neighbor: another
// live member (a suspect included: suspicions under loss come and go, and
// a neighbor that really failed is declared dead within the suspicion
// timeout, while the announcements of the other neighbors mend the tree
// meanwhile), on trees.
func (m *Machine) treeEligible(s *memberState) bool {
	return s != m.self && s.live() && m.treeCapable(s)
}

// treeFrom is s as the sender of a tree message: one that may send them
// is a live member on the trees, not this one.
func (m *Machine) treeFrom(s *memberState) plumtree.From {
	if s == nil || s == m.self || !s.live() || !m.treeCapable(s) {
		return plumtree.From{}
	}
	return plumtree.From{ID: s.id, OK: true}
}

// treeOutput does what the trees asked for: their packets go to the
// members' addresses, their timers into the Machine's queue.
func (m *Machine) treeOutput() {
	out := m.tree.TakeOutput()
	for _, p := range out.Packets {
		m.emit(m.addrOf(m.entry(p.To)), p.Frames)
	}
	if !out.FlushAt.IsZero() {
		m.armAt(timerTreeFlush, out.FlushAt)
	}
	for _, g := range out.Grafts {
		m.after(g.At, timerTreeGraft, g.ID, g.Try, "")
	}
}

// treeMemberChanged re-places s on the rings after its state, protocol
// or existence changed (memberChanged calls it).
func (m *Machine) treeMemberChanged(s *memberState) {
	if !m.treeOn() || s == m.self || m.tree == nil {
		return
	}
	m.countOldPeer(s)
	m.tree.MemberChanged(s.id, m.treeEligible(s))
}

// countOldPeer keeps the set of live members below ProtocolTree, to whom
// broadcasts still go by gossip, up to date with s.
func (m *Machine) countOldPeer(s *memberState) {
	old := s.live() && !m.treeCapable(s)
	if _, was := m.treeOld[s.id]; was == old {
		return
	}
	if old {
		m.treeOld[s.id] = struct{}{}
		return
	}
	delete(m.treeOld, s.id)
	if len(m.treeOld) == 0 {
		// The last member that reads only gossip is gone: what waits
		// for it would wait for good.
		m.uq.finishAll()
	}
}

// treeNeighborDown: s, until now alive, is suspected, dead or gone; the
// trees it carried to this member are asked of the other neighbors
// (plumtree's NeighborDown).
func (m *Machine) treeNeighborDown(now time.Time, s *memberState) {
	if !m.treeOn() || m.tree == nil {
		return
	}
	m.tree.NeighborDown(now, s.id)
	m.treeOutput()
}

// treeTellNeighbors sends the suspicion this member just raised of s to
// s's neighbors on the rings, as this member's view places them, so that
// they mend the trees s carried (NeighborDown) one hop after the failed
// probe instead of when gossip brings the news, which takes O(log N)
// gossip rounds more. Six small packets at most, per suspicion raised
// first-hand.
func (m *Machine) treeTellNeighbors(now time.Time, s *memberState) {
	if !m.treeOn() || !m.treeCapable(s) || s.state() != StateSuspect {
		return
	}
	sp, ok := m.suspicions[m.nameOf(s)]
	if !ok {
		return
	}
	key := func(id uint32) uint64 { return m.reg.ringKeys[id] }
	pred, succ, found := plumtree.Beside(key, s.id, func(f func(uint32)) {
		m.ring.each(func(id uint32) {
			if e := m.entry(id); id != s.id && e != nil && (id == m.self.id || m.treeEligible(e)) {
				f(id)
			}
		})
	})
	if !found {
		return
	}
	msg := m.proveSuspect(&wire.Suspect{Name: m.nameOf(s), Incarnation: s.inc(), From: m.selfName, Life: m.lifeOf(s),
		Silence: uint32(max(now.Sub(sp.anchorOf(m.selfName, sp.start)), 0) / time.Millisecond)})
	var told [2 * plumtree.Rings]uint32
	n := 0
	for j := range plumtree.Rings {
		for _, id := range [2]uint32{pred[j], succ[j]} {
			if id == m.self.id || slices.Contains(told[:n], id) {
				continue // this member knows
			}
			told[n] = id
			n++
			m.send(m.addrOf(m.entry(id)), msg)
			m.stats.Trees.SuspicionsTold++
		}
	}
}

// treeInput hands a tree message (an announcement, a graft or a prune) to
// the trees with the member it came from: the rules that answer it are
// internal/plumtree's.
func (m *Machine) treeInput(now time.Time, sender *memberState, msg wire.Message) {
	from := m.treeFrom(sender)
	switch msg := msg.(type) {
	case *wire.IHave:
		m.tree.IHave(now, from, msg.IDs)
	case *wire.Graft:
		m.tree.Graft(now, from, msg)
	case *wire.Prune:
		m.tree.Prune(now, from, msg.Origin)
	}
	m.treeOutput()
}

// treeFlush sends what the links queued, then reports the Outcomes of
// this member's broadcasts pushed since the last flush.
func (m *Machine) treeFlush(now time.Time) {
	m.tree.Flush(now, m.packetBudget()-wire.CompoundHeaderMax)
	m.treeOutput()
	for _, id := range m.treeNotify {
		m.out.Outcomes = append(m.out.Outcomes, Outcome{ID: id})
	}
	m.treeNotify = m.treeNotify[:0]
}

// treeGraftDue grafts a broadcast still missing (its timer fired).
func (m *Machine) treeGraftDue(now time.Time, id uint64) {
	m.tree.GraftDue(now, id)
	m.treeOutput()
}

// treeOriginate puts this member's own broadcast on the trees; notify,
// when not zero, is the ID whose Outcome the next flush reports.
func (m *Machine) treeOriginate(now time.Time, msg *wire.Broadcast, frame []byte, notify uint64) {
	if notify != 0 {
		m.treeNotify = append(m.treeNotify, notify)
	}
	m.tree.Originate(now, msg, frame)
	m.treeOutput()
	if len(m.treeNotify) > 0 {
		// With nobody to pass it to, the flush still reports it.
		m.armAt(timerTreeFlush, now.Add(m.cfg.treeFlushInterval()))
	}
}

// treeBackedUp reports whether this member's tree links hold so much
// that its own broadcasts must wait: half a link's bound on one link, or
// Broadcasts.QueueLimit of its own not yet flushed.
func (m *Machine) treeBackedUp() bool {
	if !m.treeOn() {
		return false
	}
	return len(m.treeNotify) >= m.cfg.Broadcasts.QueueLimit || m.tree.BackedUp()
}

// treePiggyback adds the announcements pending for the neighbor at to to
// a packet going there anyway, within budget; it returns the frames.
func (m *Machine) treePiggyback(frames [][]byte, budget int, to netip.AddrPort) [][]byte {
	if !m.treeOn() || len(frames) >= wire.MaxCompoundParts {
		return frames
	}
	s := m.byAddr(to)
	if s == nil {
		return frames
	}
	if f := m.tree.Piggyback(s.id, budget); f != nil {
		frames = append(frames, f)
	}
	return frames
}

// treeStats puts the trees' counters and gauges in s.
func (m *Machine) treeStats(s *Stats) {
	ts := m.tree.Stats()
	s.Trees.PushesSent = ts.PushesSent
	s.Trees.PushesDropped = ts.PushesDropped
	s.Trees.Redundant = ts.Redundant
	s.Trees.PrunesSent = ts.PrunesSent
	s.Trees.PrunesReceived = ts.PrunesReceived
	s.Trees.AnnouncementsSent = ts.AnnouncementsSent
	s.Trees.AnnouncementsReceived = ts.AnnouncementsReceived
	s.Trees.GraftsSent = ts.GraftsSent
	s.Trees.GraftsReceived = ts.GraftsReceived
	s.Trees.JoinsSent = ts.JoinsSent
	s.Trees.JoinsReceived = ts.JoinsReceived
	s.Trees.GraftsUnknown = ts.GraftsUnknown
	s.Trees.GraftsAbandoned = ts.GraftsAbandoned
	s.Trees.Refused = ts.Refused
	s.Trees.StateForgotten = ts.StateForgotten
	s.EncodeErrors += ts.EncodeErrors
	s.Trees.Peers = ts.Peers
	s.Trees.LazyLinks = ts.LazyLinks
	s.Trees.QueueBytes = ts.QueueBytes
	s.Trees.RetainedBytes = ts.RetainedBytes
	s.Trees.Missing = ts.Missing
}
