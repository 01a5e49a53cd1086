package swim

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Epidemic broadcast trees: the applications' broadcasts among members of
// wire.ProtocolTree (Plumtree: Leitão, Pereira and Rodrigues, "Epidemic
// Broadcast Trees", SRDS 2007). Gossip sends each broadcast to every member
// about RetransmitMult·log N times; a tree sends it to each member once.
//
// The overlay. Plumtree runs over a peer sampling service whose views are
// small and symmetric (HyParView). Here the member view is that service:
// each member's neighbors are its predecessor and successor, among the
// alive members of ProtocolTree, on each of treeRings hash rings of the
// names (a member's place on ring j is a mix of its probe-ring key and j).
// Two members with the same view agree on who neighbors whom, so the
// relation is symmetric without a message, each member has at most
// 2·treeRings neighbors, and the union of a few random Hamiltonian cycles
// has a diameter of O(log N). When a member fails, is suspected, or
// leaves, the members beside it on each ring become neighbors at once:
// SWIM's failure detector is the overlay's repair (Plumtree §3.3 relies on
// the overlay's NeighborDown). A member that pushes or announces to this
// one without being its neighbor in this view (the views differ for a
// moment) is taken as an extra neighbor, bounded, until it goes quiet.
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
// announced a broadcast it has not received within TreeGraftTimeout grafts
// the announcer (§3.2): the link joins the broadcast's origin's tree and
// the broadcast is sent; the graft of an origin's first broadcast mends
// the shared tree too. So a tree broken by a failure or a lost packet
// mends from the announcements, and a graft that is itself lost is sent
// again, to the next announcer. A failure needs no broadcast to show it:
// when a neighbor is suspected, the trees it carried here are asked of
// the other neighbors at once (treeNeighborDown).
//
// Batching. Pushes and announcements wait per link until the next flush
// (TreeFlushInterval for pushes, treeAnnounceEvery flushes for
// announcements, which also ride on any packet that goes to the neighbor
// meanwhile), and go in as few packets as hold them.
//
// Bounds, as for everything a peer sends: tree messages count only from
// live members of ProtocolTree at their address; announcements remembered
// are bounded (treeMaxMissing), and so are a graft's identifiers
// (wire.MaxTreeIDs), the neighbors (treeMaxPeers), each link's queue
// (treeLinkBytes) and the broadcasts retained for grafts
// (BroadcastRetainBytes, treeRetainFor). A graft for a broadcast no longer
// retained gets nothing; pushes go only to the addresses of members.

const (
	treeRings = 3
	// treeMaxPeers bounds the neighbors: the 2·treeRings of the rings and
	// the extras a moment's difference in views brings.
	treeMaxPeers = 16
	// treeExtraIdle is how long an extra neighbor stays without a word.
	treeExtraIdle = 30 * time.Second
	// treeMaxMissing bounds the broadcasts announced and not received
	// that a member remembers, and treeMaxAnnouncers the announcers it
	// remembers of each (the members it may graft, in turn).
	treeMaxMissing    = 4096
	treeMaxAnnouncers = 4
	// treeGraftTries bounds the grafts for one broadcast.
	treeGraftTries = 8
	// treeRetainFor is how long a broadcast is retained for grafts: far
	// past the last graft for it (treeGraftTries·TreeGraftTimeout).
	treeRetainFor = 30 * time.Second
	// treeLinkBytes bounds the pushes queued on one link; past it, the
	// origin with the most bytes queued there loses its newest (fairness:
	// one noisy origin cannot crowd the others out of a relay).
	treeLinkBytes = 1 << 20
	// treeFlushPackets bounds the packets of pushes one link gets per
	// flush; past it, the origins take turns.
	treeFlushPackets = 64
	// treeAnnounceEvery: announcements go out every this many flushes
	// (unless a packet to the neighbor carried them first).
	treeAnnounceEvery = 10
	// treeMaxKeys bounds the keys whose newest value is remembered.
	treeMaxKeys = 1 << 16
	// treeMaxJoins bounds the trees one link is asked to join at once
	// (treeNeighborDown).
	treeMaxJoins = 4096
)

// TreeID is the identifier of a broadcast in announcements and grafts: the
// first 8 bytes of the SHA-256 of its origin, epoch and sequence number.
func TreeID(origin string, epoch uint64, seq uint32) uint64 {
	var b [wire.MaxNameLen + 12]byte
	n := copy(b[:], origin)
	binary.BigEndian.PutUint64(b[n:], epoch)
	binary.BigEndian.PutUint32(b[n+8:], seq)
	sum := sha256.Sum256(b[:n+12])
	return binary.BigEndian.Uint64(sum[:8])
}

// treeMsg is a broadcast this member holds: retained for grafts, queued on
// links.
type treeMsg struct {
	id     uint64
	origin string
	key    string // origin-qualified (broadcastKey) when keyed, else ""
	epoch  uint64
	seq    uint32
	frame  []byte
	at     time.Time
	gone   bool // replaced by a newer value of its key, or expired: not sent
}

// treePeer is one neighbor.
type treePeer struct {
	id    uint32
	rings uint8     // bit j: a neighbor on ring j; 0: an extra
	heard time.Time // the last tree message from it (extras expire)
	// sharedLazy and own say which broadcasts the link pushes and which
	// it only announces: own[origin] whether the link is in origin's tree
	// (eager) or not (lazy); for an origin not in own, whose first
	// broadcast has not come by yet, whether it is in the shared tree.
	// See the file comment.
	sharedLazy bool
	own        map[string]bool
	// settled: the link's place in the shared tree was decided, by the
	// first broadcast this member received (the links it had then) or,
	// for a link added later, by a first broadcast of some origin that
	// came over it (see treeDuplicate).
	settled bool
	// queued for the next flush
	push      []*treeMsg
	pushBytes int
	announce  []uint64
	grafts    []uint64
	joins     []string // origins whose trees the link is asked to join
	prunes    []string // origins
}

func (p *treePeer) eagerFor(origin string) bool {
	if eager, ok := p.own[origin]; ok {
		return eager
	}
	return !p.sharedLazy
}

// ownBound is the bound on the origins a link keeps trees of, and the
// counter of the times it was reached (Stats.TreeStateForgotten).
type ownBound struct {
	limit  int
	forgot *uint64
}

func (m *Machine) ownBound() ownBound {
	return ownBound{limit: m.cfg.MaxMembers, forgot: &m.stats.TreeStateForgotten}
}

// setOwn gives origin a tree of its own on the link, eager or not. The
// origins with a tree of their own are bounded by limit (an origin
// invented by a forger costs an entry): past it they are all forgotten and
// follow the shared tree again, which the redundant copies or the grafts
// correct.
func (p *treePeer) setOwn(origin string, eager bool, b ownBound) {
	if p.own == nil {
		p.own = make(map[string]bool)
	}
	if _, ok := p.own[origin]; !ok && len(p.own) >= b.limit {
		clear(p.own)
		*b.forgot++
	}
	p.own[origin] = eager
}

// join puts the link in origin's tree, because one of its broadcasts
// came over it first or the far end grafted it (Plumtree §3.1-3.2). When
// that broadcast was origin's first, the shared tree failed to carry it
// and is mended too.
func (p *treePeer) join(origin string, first bool, b ownBound) {
	if first {
		p.sharedLazy, p.settled = false, true
	}
	p.setOwn(origin, true, b)
}

// carry puts the link in origin's tree ("": the shared tree) without a
// broadcast to show for it: a neighbor suspected, the trees it carried
// go by this link too (treeNeighborDown). The shared tree's link is left
// unsettled, so that the redundant copies of the next first broadcast
// that comes over it prune it again if the suspect was alive after all.
func (p *treePeer) carry(origin string, b ownBound) {
	if origin == "" {
		p.sharedLazy, p.settled = false, false
		return
	}
	p.setOwn(origin, true, b)
}

// lazyTrees counts the trees the link is pruned from.
func (p *treePeer) lazyTrees() int {
	n := 0
	if p.sharedLazy {
		n++
	}
	for _, eager := range p.own {
		if !eager {
			n++
		}
	}
	return n
}

// treeRing is this member's place on one ring: its neighbors there.
type treeRing struct {
	pred, succ uint32
	ok         bool // pred and succ are set (some other member is eligible)
}

// missingBcast is a broadcast announced and not received.
type missingBcast struct {
	announcers [treeMaxAnnouncers]uint32
	n          int // announcers known
	next       int // the next to graft
	tries      uint64
}

// keyMark is the newest value of a key delivered.
type keyMark struct {
	epoch uint64
	seq   uint32
}

func (k keyMark) before(epoch uint64, seq uint32) bool {
	return k.epoch < epoch || k.epoch == epoch && k.seq < seq
}

// treeState is the Machine's part of the trees.
type treeState struct {
	rings    [treeRings]treeRing
	peers    []*treePeer
	retained map[uint64]*treeMsg
	fifo     []*treeMsg // retained, oldest first, from fifoHead
	fifoHead int
	bytes    int // retained frames' bytes
	missing  map[uint64]*missingBcast
	keys     map[string]keyMark
	byKey    map[string]*treeMsg // the retained value of each key
	// firstOf is the identifier of the first broadcast of each origin
	// this member received or made: the one that travelled the shared
	// tree (bounded by treeMaxKeys).
	firstOf   map[string]uint64
	firstEver uint64 // the first broadcast this member received or made
	// via is the neighbor each origin's latest broadcast first came from
	// (bounded by treeMaxKeys): the origins whose trees a suspected
	// neighbor carried to this member (treeNeighborDown).
	via map[string]uint32
	// own broadcasts pushed since the last flush, whose Outcome is due
	notify  []uint64
	flushes uint64 // flushes so far (announcements go every treeAnnounceEvery)
	scratch []*treeMsg
	idsBuf  []uint64
	// live members below ProtocolTree, by name id: while there are any,
	// broadcasts also go by gossip, to them alone
	oldPeers map[uint32]struct{}
}

func (t *treeState) init() {
	t.retained = make(map[uint64]*treeMsg)
	t.missing = make(map[uint64]*missingBcast)
	t.keys = make(map[string]keyMark)
	t.byKey = make(map[string]*treeMsg)
	t.firstOf = make(map[string]uint64)
	t.via = make(map[string]uint32)
	t.oldPeers = make(map[uint32]struct{})
}

// treeOn reports whether this member takes part in trees.
func (m *Machine) treeOn() bool { return m.cfg.BroadcastTree }

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

// treeKey is s's place on ring j: a splitmix64 of its probe-ring key.
func (m *Machine) treeKey(id uint32, j int) uint64 {
	z := m.reg.ringKeys[id] + uint64(j+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// treeMemberChanged re-places s on the rings after its state, protocol
// or existence changed (setState, ringInsert, setIdentity call it).
func (m *Machine) treeMemberChanged(s *memberState) {
	if !m.treeOn() || s == m.self {
		return
	}
	if m.tree.retained == nil {
		return // not initialised yet (the Machine's own entry)
	}
	m.countOldPeer(s)
	eligible := m.treeEligible(s)
	changed := false
	for j := range m.tree.rings {
		r := &m.tree.rings[j]
		switch {
		case eligible && !r.ok:
			r.pred, r.succ, r.ok = s.id, s.id, true
			changed = true
		case eligible:
			self, k := m.treeKey(m.self.id, j), m.treeKey(s.id, j)
			if s.id != r.succ && k-self < m.treeKey(r.succ, j)-self {
				r.succ, changed = s.id, true
			}
			if s.id != r.pred && self-k < self-m.treeKey(r.pred, j) {
				r.pred, changed = s.id, true
			}
		case r.ok && (r.pred == s.id || r.succ == s.id):
			m.treeRescan(j)
			changed = true
		}
	}
	if changed {
		m.treeSyncPeers()
	}
}

// countOldPeer keeps the set of live members below ProtocolTree, to whom
// broadcasts still go by gossip, up to date with s.
func (m *Machine) countOldPeer(s *memberState) {
	old := s.live() && !m.treeCapable(s)
	if _, was := m.tree.oldPeers[s.id]; was == old {
		return
	}
	if old {
		m.tree.oldPeers[s.id] = struct{}{}
		return
	}
	delete(m.tree.oldPeers, s.id)
	if len(m.tree.oldPeers) == 0 {
		// The last member that reads only gossip is gone: what waits
		// for it would wait for good.
		m.uq.finishAll()
	}
}

// treeRescan finds this member's neighbors on ring j among all members.
func (m *Machine) treeRescan(j int) {
	r := &m.tree.rings[j]
	*r = treeRing{}
	self := m.treeKey(m.self.id, j)
	var bestSucc, bestPred uint64
	m.ring.each(func(id uint32) {
		s := m.entry(id)
		if s == nil || !m.treeEligible(s) {
			return
		}
		k := m.treeKey(id, j)
		if !r.ok || k-self < bestSucc {
			r.succ, bestSucc = id, k-self
		}
		if !r.ok || self-k < bestPred {
			r.pred, bestPred = id, self-k
		}
		r.ok = true
	})
}

// treeSyncPeers makes the peers' ring bits match the rings: new
// neighbors join eager (Plumtree starts every link eager), former ones
// are dropped (Plumtree's NeighborDown; if the far end still counts this
// member as its neighbor, its next message makes it an extra).
func (m *Machine) treeSyncPeers() {
	was := make(map[uint32]bool, len(m.tree.peers))
	for _, p := range m.tree.peers {
		was[p.id] = p.rings != 0
		p.rings = 0
	}
	for j, r := range m.tree.rings {
		if !r.ok {
			continue
		}
		for _, id := range [2]uint32{r.pred, r.succ} {
			p := m.treePeerOf(id)
			if p == nil {
				p = m.treeAddPeer(id)
			}
			if p != nil {
				p.rings |= 1 << j
			}
		}
	}
	m.tree.peers = slices.DeleteFunc(m.tree.peers, func(p *treePeer) bool { return p.rings == 0 && was[p.id] })
}

// treePeerOf returns the neighbor of id, nil if it is none.
func (m *Machine) treePeerOf(id uint32) *treePeer {
	for _, p := range m.tree.peers {
		if p.id == id {
			return p
		}
	}
	return nil
}

// treeAddPeer adds a neighbor; nil when there is no room, after dropping
// the extra heard from least lately if need be.
func (m *Machine) treeAddPeer(id uint32) *treePeer {
	if len(m.tree.peers) >= treeMaxPeers {
		drop := -1
		for i, p := range m.tree.peers {
			if p.rings == 0 && (drop < 0 || p.heard.Before(m.tree.peers[drop].heard)) {
				drop = i
			}
		}
		if drop < 0 {
			return nil
		}
		m.treeRemovePeer(drop)
	}
	p := &treePeer{id: id}
	m.tree.peers = append(m.tree.peers, p)
	return p
}

func (m *Machine) treeRemovePeer(i int) {
	m.tree.peers = append(m.tree.peers[:i], m.tree.peers[i+1:]...)
}

// treeSender returns the neighbor a tree message from s comes from,
// adding s as an extra neighbor if it is none; nil if s may not send tree
// messages (no live member of ProtocolTree there) or there is no room.
func (m *Machine) treeSender(now time.Time, s *memberState) *treePeer {
	if s == nil || s == m.self || !s.live() || !m.treeCapable(s) {
		return nil
	}
	p := m.treePeerOf(s.id)
	if p == nil {
		p = m.treeAddPeer(s.id)
	}
	if p != nil {
		p.heard = now
	}
	return p
}

// treeNew takes in a broadcast received for the first time (or made
// here): retained for grafts, pushed to the eager neighbors and announced
// to the lazy ones, except from, the neighbor it came from.
func (m *Machine) treeNew(now time.Time, from *treePeer, msg *wire.Broadcast, frame []byte) {
	tm := &treeMsg{
		id: TreeID(msg.Origin, msg.Epoch, msg.Seq), origin: msg.Origin,
		epoch: msg.Epoch, seq: msg.Seq, frame: frame, at: now,
	}
	if msg.Key != "" {
		tm.key = broadcastKey(msg)
	}
	delete(m.tree.missing, tm.id)
	m.treeRetain(now, tm)
	_, seen := m.tree.firstOf[tm.origin]
	if from != nil && !seen {
		from.settled = true
	}
	if !seen {
		if len(m.tree.firstOf) >= treeMaxKeys {
			clear(m.tree.firstOf)
			m.stats.TreeStateForgotten++
		}
		m.tree.firstOf[tm.origin] = tm.id
	}
	if m.tree.firstEver == 0 {
		m.tree.firstEver = tm.id
		for _, p := range m.tree.peers {
			p.settled = true
		}
	}
	limit := m.ownBound()
	if from != nil {
		if _, own := from.own[tm.origin]; !own {
			from.setOwn(tm.origin, true, limit)
		}
		if _, ok := m.tree.via[tm.origin]; !ok && len(m.tree.via) >= treeMaxKeys {
			clear(m.tree.via)
			m.stats.TreeStateForgotten++
		}
		m.tree.via[tm.origin] = from.id
	} else {
		delete(m.tree.via, tm.origin)
	}
	for _, p := range m.tree.peers {
		if p == from {
			continue
		}
		eager := p.eagerFor(tm.origin)
		if _, own := p.own[tm.origin]; !own {
			// The origin's tree is the shared tree as its first
			// broadcast found it here.
			p.setOwn(tm.origin, eager, limit)
		}
		if eager {
			m.treeQueuePush(p, tm)
		} else {
			p.announce = append(p.announce, tm.id)
		}
	}
	if len(m.tree.peers) > 0 || len(m.tree.notify) > 0 {
		// With nobody to pass it to and no outcome to report, the beat
		// is left alone.
		m.treeArmFlush(now)
	}
}

// treeRetain keeps tm for grafts, within the bounds, and replaces the
// older value of its key: only the newest value of a key keeps spreading.
func (m *Machine) treeRetain(now time.Time, tm *treeMsg) {
	t := &m.tree
	if tm.key != "" {
		if old := t.byKey[tm.key]; old != nil {
			old.gone = true
		}
		t.byKey[tm.key] = tm
	}
	t.retained[tm.id] = tm
	t.fifo = append(t.fifo, tm)
	t.bytes += len(tm.frame)
	m.treeExpire(now)
}

// treeExpire forgets the retained broadcasts past treeRetainFor or over
// BroadcastRetainBytes, oldest first.
func (m *Machine) treeExpire(now time.Time) {
	t := &m.tree
	limit := m.cfg.broadcastRetainBytes()
	for t.fifoHead < len(t.fifo) {
		tm := t.fifo[t.fifoHead]
		if t.bytes <= limit && now.Sub(tm.at) < treeRetainFor {
			break
		}
		t.fifo[t.fifoHead] = nil
		t.fifoHead++
		t.bytes -= len(tm.frame)
		if t.retained[tm.id] == tm {
			delete(t.retained, tm.id)
		}
		if tm.key != "" && t.byKey[tm.key] == tm {
			delete(t.byKey, tm.key)
		}
	}
	if t.fifoHead > 1024 && t.fifoHead*2 > len(t.fifo) {
		n := copy(t.fifo, t.fifo[t.fifoHead:])
		clear(t.fifo[n:])
		t.fifo = t.fifo[:n]
		t.fifoHead = 0
	}
}

// treeQueuePush queues tm on an eager link. Past treeLinkBytes, the origin
// with the most bytes queued on the link loses its newest broadcast there
// (the link's far end then grafts it from an announcement of another
// neighbor, or does without if its origin is the one flooding).
func (m *Machine) treeQueuePush(p *treePeer, tm *treeMsg) {
	if tm.key != "" {
		// A newer value of the key takes the older one's place in the
		// link's queue.
		for i, q := range p.push {
			if q.key == tm.key && !q.gone {
				p.pushBytes += len(tm.frame) - len(q.frame)
				p.push[i] = tm
				return
			}
		}
	}
	p.push = append(p.push, tm)
	p.pushBytes += len(tm.frame)
	for p.pushBytes > treeLinkBytes && len(p.push) > 1 {
		m.treeDropNoisiest(p)
	}
}

// treeDropNoisiest drops the newest push of the origin with the most
// bytes queued on p.
func (m *Machine) treeDropNoisiest(p *treePeer) {
	by := make(map[string]int)
	var worst string
	for _, q := range p.push {
		by[q.origin] += len(q.frame)
		if by[q.origin] > by[worst] {
			worst = q.origin
		}
	}
	for i := len(p.push) - 1; i >= 0; i-- {
		if p.push[i].origin == worst {
			p.pushBytes -= len(p.push[i].frame)
			p.push = append(p.push[:i], p.push[i+1:]...)
			m.stats.TreePushesDropped++
			return
		}
	}
}

// treeArmFlush arms the flush of the links' queues.
func (m *Machine) treeArmFlush(now time.Time) {
	m.armAt(timerTreeFlush, now.Add(m.cfg.treeFlushInterval()))
}

// treeFirst reports whether id is the first broadcast of origin this
// member received or made: the one that travelled the shared tree.
func (m *Machine) treeFirst(origin string, id uint64) bool {
	first, ok := m.tree.firstOf[origin]
	return ok && first == id
}

// treeDuplicate applies the tree's rule to broadcast id of origin that
// came again, from s: a second copy over a link prunes the link from
// origin's tree (Plumtree §3.1), and from the shared tree too when the
// copy is the first broadcast this member received, or, over a link added
// since and not yet settled, the first of its origin: the shared tree is
// pruned by one broadcast per link, never by concurrent ones (see the
// file comment), and links that membership changes add do not leave
// cycles in it for good. Over a link this member holds lazy already, the
// far end missed the Prune (lost): it is sent again.
func (m *Machine) treeDuplicate(now time.Time, s *memberState, origin string, id uint64) {
	p := m.treeSender(now, s)
	if p == nil {
		return
	}
	m.stats.TreeRedundant++
	if id == m.tree.firstEver || !p.settled && m.treeFirst(origin, id) {
		p.sharedLazy, p.settled = true, true
		m.treeQueuePrune(now, p, "")
	}
	p.setOwn(origin, false, m.ownBound())
	m.treeQueuePrune(now, p, origin)
}

// treeQueuePrune queues a Prune of tree ("" for the shared one) on p.
func (m *Machine) treeQueuePrune(now time.Time, p *treePeer, tree string) {
	if slices.Contains(p.prunes, tree) {
		return
	}
	if len(p.prunes) >= wire.MaxCompoundParts {
		// The copies that keep coming prune the link at a later flush.
		m.stats.TreeStateForgotten++
		return
	}
	p.prunes = append(p.prunes, tree)
	m.stats.TreePrunesSent++
	m.treeArmFlush(now)
}

// handleIHave notes the broadcasts a neighbor announced that this member
// has not received, and arms their grafts.
func (m *Machine) handleIHave(now time.Time, s *memberState, msg *wire.IHave) {
	p := m.treeSender(now, s)
	if p == nil || !m.treeOn() {
		m.stats.TreeRefused++
		return
	}
	m.stats.TreeAnnouncementsReceived += uint64(len(msg.IDs))
	for _, id := range msg.IDs {
		if _, ok := m.tree.retained[id]; ok {
			continue
		}
		mb := m.tree.missing[id]
		if mb == nil {
			if len(m.tree.missing) >= treeMaxMissing {
				m.stats.TreeRefused++
				continue
			}
			mb = &missingBcast{}
			m.tree.missing[id] = mb
			m.after(now.Add(m.cfg.treeGraftTimeout()), timerTreeGraft, id, 0, "")
		}
		if mb.n < treeMaxAnnouncers && !mb.has(p.id) {
			mb.announcers[mb.n] = p.id
			mb.n++
		}
	}
}

func (mb *missingBcast) has(id uint32) bool {
	for _, a := range mb.announcers[:mb.n] {
		if a == id {
			return true
		}
	}
	return false
}

// treeGraftDue grafts the next announcer of a broadcast still missing,
// and arms the next try (Plumtree §3.2: the timer runs again for the next
// announcer).
func (m *Machine) treeGraftDue(now time.Time, id uint64) {
	mb := m.tree.missing[id]
	if mb.tries >= treeGraftTries {
		delete(m.tree.missing, id)
		m.stats.TreeGraftsAbandoned++
		return
	}
	for range mb.n {
		a := mb.announcers[mb.next%mb.n]
		mb.next++
		s := m.entry(a)
		if s == nil || !s.live() {
			continue
		}
		p := m.treePeerOf(a)
		if p == nil {
			if p = m.treeAddPeer(a); p == nil {
				continue
			}
		}
		// The link turns eager for the broadcast's origin once the
		// broadcast arrives over it (handleBroadcast).
		p.grafts = append(p.grafts, id)
		m.stats.TreeGraftsSent++
		m.treeArmFlush(now)
		break
	}
	mb.tries++
	m.after(now.Add(m.cfg.treeGraftTimeout()/2), timerTreeGraft, id, mb.tries, "")
}

// treeNeighborDown: s, a neighbor until now alive, is suspected, dead or
// gone. Plumtree mends a tree when a broadcast fails to come (§3.2), so an
// origin that broadcasts rarely would find its tree broken at its next
// broadcast, seconds after the failure; and Plumtree's NeighborDown (§3.3)
// comes only when the overlay drops the neighbor, here at its death. So at
// the suspicion, the trees s carried to this member (the origins whose
// latest broadcast came from s first, and the shared tree when the link
// was in it) are asked of every other alive neighbor at once (a Graft
// naming the origins); the copies those links then bring twice are pruned
// as usual, and if s was alive after all, so are its own.
func (m *Machine) treeNeighborDown(now time.Time, s *memberState) {
	if !m.treeOn() || m.tree.retained == nil {
		return
	}
	p := m.treePeerOf(s.id)
	if p == nil {
		return
	}
	var origins []string
	if !p.sharedLazy {
		origins = append(origins, "")
	}
	for origin, via := range m.tree.via {
		if via == s.id {
			origins = append(origins, origin)
			delete(m.tree.via, origin)
		}
	}
	if len(origins) == 0 {
		return
	}
	slices.Sort(origins) // map order is random; a simulated run must repeat
	limit := m.ownBound()
	for _, q := range m.tree.peers {
		if q == p {
			continue
		}
		if qs := m.entry(q.id); qs == nil || qs.state() != StateAlive {
			continue
		}
		for _, origin := range origins {
			if len(q.joins) >= treeMaxJoins {
				// The trees not asked for mend by grafts at their
				// origins' next broadcasts.
				m.stats.TreeStateForgotten++
				break
			}
			q.carry(origin, limit)
			q.joins = append(q.joins, origin)
			m.stats.TreeJoinsSent++
		}
	}
	m.treeArmFlush(now)
}

// treeTellNeighbors sends the suspicion this member just raised of s to
// s's neighbors on the rings, as this member's view places them, so that
// they mend the trees s carried (treeNeighborDown) one hop after the
// failed probe instead of when gossip brings the news, which takes
// O(log N) gossip rounds more. Six small packets at most, per suspicion
// raised first-hand.
func (m *Machine) treeTellNeighbors(now time.Time, s *memberState) {
	if !m.treeOn() || !m.treeCapable(s) || s.state() != StateSuspect {
		return
	}
	sp, ok := m.suspicions[m.nameOf(s)]
	if !ok {
		return
	}
	var pred, succ [treeRings]uint32
	var bestPred, bestSucc [treeRings]uint64
	var keys [treeRings]uint64
	for j := range keys {
		keys[j] = m.treeKey(s.id, j)
	}
	found := false
	m.ring.each(func(id uint32) {
		e := m.entry(id)
		if id == s.id || e == nil || id != m.self.id && !m.treeEligible(e) {
			return
		}
		for j, k := range keys {
			kj := m.treeKey(id, j)
			if !found || kj-k < bestSucc[j] {
				succ[j], bestSucc[j] = id, kj-k
			}
			if !found || k-kj < bestPred[j] {
				pred[j], bestPred[j] = id, k-kj
			}
		}
		found = true
	})
	if !found {
		return
	}
	msg := m.proveSuspect(&wire.Suspect{Name: m.nameOf(s), Incarnation: s.inc(), From: m.selfName, Life: m.lifeOf(s),
		Silence: uint32(max(now.Sub(sp.start), 0) / time.Millisecond)})
	var told [2 * treeRings]uint32
	n := 0
	for j := range keys {
		for _, id := range [2]uint32{pred[j], succ[j]} {
			if id == m.self.id || slices.Contains(told[:n], id) {
				continue // this member knows
			}
			told[n] = id
			n++
			m.send(m.addrOf(m.entry(id)), msg)
			m.stats.TreeSuspicionsTold++
		}
	}
}

// handleGraft queues the broadcasts a neighbor asked for that this
// member retains, and puts the link in their origins' trees.
func (m *Machine) handleGraft(now time.Time, s *memberState, msg *wire.Graft) {
	p := m.treeSender(now, s)
	if p == nil || !m.treeOn() {
		m.stats.TreeRefused++
		return
	}
	m.stats.TreeGraftsReceived += uint64(len(msg.IDs))
	m.stats.TreeJoinsReceived += uint64(len(msg.Origins))
	for _, origin := range msg.Origins {
		p.carry(origin, m.ownBound())
	}
	for _, id := range msg.IDs {
		if tm := m.tree.retained[id]; tm != nil && !tm.gone {
			if !p.eagerFor(tm.origin) {
				p.join(tm.origin, m.treeFirst(tm.origin, tm.id), m.ownBound())
			}
			m.treeQueuePush(p, tm)
		} else {
			m.stats.TreeGraftsUnknown++
		}
	}
	m.treeArmFlush(now)
}

// handlePrune takes the link to a neighbor out of a tree: an origin's
// own, or the shared one when the Prune names no origin.
func (m *Machine) handlePrune(now time.Time, s *memberState, msg *wire.Prune) {
	p := m.treeSender(now, s)
	if p == nil || !m.treeOn() {
		m.stats.TreeRefused++
		return
	}
	m.stats.TreePrunesReceived++
	if msg.Origin == "" {
		p.sharedLazy, p.settled = true, true
	} else {
		p.setOwn(msg.Origin, false, m.ownBound())
	}
	// What was queued for that tree is announced instead.
	p.push = slices.DeleteFunc(p.push, func(tm *treeMsg) bool {
		if p.eagerFor(tm.origin) {
			return false
		}
		p.pushBytes -= len(tm.frame)
		p.announce = append(p.announce, tm.id)
		return true
	})
}

// treeFlush sends what the links queued: pushes, grafts and prunes at
// every flush, announcements every treeAnnounceEvery flushes.
func (m *Machine) treeFlush(now time.Time) {
	t := &m.tree
	t.flushes++
	announce := t.flushes%treeAnnounceEvery == 0
	pending := false
	for i := 0; i < len(t.peers); i++ {
		p := t.peers[i]
		s := m.entry(p.id)
		if s == nil || !s.live() || p.rings == 0 && now.Sub(p.heard) > treeExtraIdle && len(p.push) == 0 {
			m.treeRemovePeer(i)
			i--
			continue
		}
		m.treeFlushPeer(m.addrOf(s), p, announce)
		if len(p.push) > 0 || len(p.announce) > 0 {
			pending = true
		}
	}
	for _, id := range t.notify {
		m.out.Outcomes = append(m.out.Outcomes, Outcome{ID: id})
	}
	t.notify = t.notify[:0]
	m.treeExpire(now)
	if pending {
		m.treeArmFlush(now)
	}
}

// treeFlushPeer sends p's queue to addr.
func (m *Machine) treeFlushPeer(addr netip.AddrPort, p *treePeer, announce bool) {
	budget := m.packetBudget() - wire.CompoundHeaderMax
	room := budget
	m.frames = m.frames[:0]
	add := func(f []byte) {
		if cost := len(f) + wire.FrameOverheadMax; cost > room || len(m.frames) == wire.MaxCompoundParts {
			m.treeEmit(addr)
			room = budget
		}
		m.frames = append(m.frames, f)
		room -= len(f) + wire.FrameOverheadMax
	}
	for _, origin := range p.prunes {
		add(m.treeFrame(&wire.Prune{Origin: origin}))
	}
	clear(p.prunes)
	p.prunes = p.prunes[:0]
	for ids := p.grafts; len(ids) > 0; {
		n := min(len(ids), wire.MaxTreeIDs, (budget-16)/9)
		add(m.treeFrame(&wire.Graft{IDs: ids[:n]}))
		ids = ids[n:]
	}
	p.grafts = p.grafts[:0]
	for origins := p.joins; len(origins) > 0; {
		n, size := 0, 16
		for n < len(origins) && n < wire.MaxGraftOrigins && size+len(origins[n])+2 <= budget {
			size += len(origins[n]) + 2
			n++
		}
		add(m.treeFrame(&wire.Graft{Origins: origins[:n]}))
		origins = origins[n:]
	}
	clear(p.joins)
	p.joins = p.joins[:0]
	if announce && len(p.announce) > 0 {
		m.treeAnnounceInto(p, add, budget)
	}
	if len(p.push) > 0 {
		packets := 0
		sent := m.treeTakePushes(p, func(f []byte) bool {
			if cost := len(f) + wire.FrameOverheadMax; cost > room || len(m.frames) == wire.MaxCompoundParts {
				if packets++; packets >= treeFlushPackets {
					return false
				}
			}
			add(f)
			return true
		})
		m.stats.TreePushesSent += uint64(sent)
	}
	if len(m.frames) > 0 {
		m.treeEmit(addr)
	}
}

// treeAnnounceInto adds p's announcements as IHave frames, in pieces that
// fit budget.
func (m *Machine) treeAnnounceInto(p *treePeer, add func([]byte), budget int) {
	ids := p.announce
	for len(ids) > 0 {
		n := min(len(ids), wire.MaxTreeIDs, (budget-16)/9)
		add(m.treeFrame(&wire.IHave{IDs: ids[:n]}))
		m.stats.TreeAnnouncementsSent += uint64(n)
		ids = ids[n:]
	}
	p.announce = p.announce[:0]
}

// treeTakePushes hands p's queued pushes to send, the origins taking turns
// once send refuses one (the flush's packets are used up): those left wait
// for the next flush. It returns how many were taken.
func (m *Machine) treeTakePushes(p *treePeer, send func([]byte) bool) int {
	taken := 0
	i := 0
	for ; i < len(p.push); i++ {
		tm := p.push[i]
		if tm.gone {
			continue
		}
		if !send(tm.frame) {
			break
		}
		taken++
	}
	if i == len(p.push) {
		clear(p.push)
		p.push, p.pushBytes = p.push[:0], 0
		return taken
	}
	// Out of packets: keep the rest, one broadcast per origin in turn
	// first, so that the next flush starts with every origin's oldest.
	rest := p.push[i:]
	var firsts, others []*treeMsg
	seen := make(map[string]bool)
	for _, tm := range rest {
		if tm.gone {
			continue
		}
		if !seen[tm.origin] {
			seen[tm.origin] = true
			firsts = append(firsts, tm)
		} else {
			others = append(others, tm)
		}
	}
	p.push = append(append(p.push[:0:0], firsts...), others...)
	p.pushBytes = 0
	for _, tm := range p.push {
		p.pushBytes += len(tm.frame)
	}
	return taken
}

func (m *Machine) treeFrame(msg wire.Message) []byte {
	f, err := wire.AppendFrame(nil, msg)
	if err != nil {
		m.stats.EncodeErrors++
	}
	return f
}

func (m *Machine) treeEmit(addr netip.AddrPort) {
	if len(m.frames) == 0 {
		return
	}
	m.emit(addr, m.frames)
	m.frames = m.frames[:0]
}

// treePiggyback adds the announcements pending for the neighbor at to to
// a packet going there anyway, within budget; it returns the frames.
func (m *Machine) treePiggyback(frames [][]byte, budget int, to netip.AddrPort) [][]byte {
	if !m.treeOn() || len(m.tree.peers) == 0 || budget < 32 || len(frames) >= wire.MaxCompoundParts {
		return frames
	}
	s := m.byAddr(to)
	if s == nil {
		return frames
	}
	p := m.treePeerOf(s.id)
	if p == nil || len(p.announce) == 0 {
		return frames
	}
	n := min(len(p.announce), wire.MaxTreeIDs, (budget-16)/9)
	if n == 0 {
		return frames
	}
	f := m.treeFrame(&wire.IHave{IDs: p.announce[:n]})
	m.stats.TreeAnnouncementsSent += uint64(n)
	p.announce = append(p.announce[:0], p.announce[n:]...)
	return append(frames, f)
}
