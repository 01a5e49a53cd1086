package plumtree

import (
	"slices"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// bcast is a broadcast this member holds: retained for grafts, queued on
// links.
type bcast struct {
	id     uint64
	origin string
	key    string // Key when the broadcast has a key, else ""
	epoch  uint64
	seq    uint32
	frame  []byte
	at     time.Time
	gone   bool // replaced by a newer value of its key, or expired: not sent
}

// peer is one neighbor: the link to it.
type peer struct {
	id    uint32
	rings uint8     // bit j: a neighbor on ring j; 0: an extra
	heard time.Time // the last tree message from it (extras expire)
	// sharedLazy and own say which broadcasts the link pushes and which
	// it only announces: own[origin] whether the link is in origin's tree
	// (eager) or not (lazy); for an origin not in own, whose first
	// broadcast has not come by yet, whether it is in the shared tree.
	// See the package comment.
	sharedLazy bool
	own        map[string]bool
	// settled: the link's place in the shared tree was decided, by the
	// first broadcast this member received (the links it had then) or,
	// for a link added later, by a first broadcast of some origin that
	// came over it (see duplicate).
	settled bool
	// queued for the next flush
	push      []*bcast
	pushBytes int
	announce  []uint64
	grafts    []uint64
	joins     []string // origins whose trees the link is asked to join
	prunes    []string // origins
}

func (p *peer) eagerFor(origin string) bool {
	if eager, ok := p.own[origin]; ok {
		return eager
	}
	return !p.sharedLazy
}

// ownBound is the bound on the origins a link keeps trees of, and the
// counter of the times it was reached (Stats.StateForgotten).
type ownBound struct {
	limit  int
	forgot *uint64
}

func (t *Tree) ownBound() ownBound {
	return ownBound{limit: t.cfg.MaxOrigins, forgot: &t.stats.StateForgotten}
}

// setOwn gives origin a tree of its own on the link, eager or not. The
// origins with a tree of their own are bounded by limit (an origin
// invented by a forger costs an entry): past it they are all forgotten and
// follow the shared tree again, which the redundant copies or the grafts
// correct.
func (p *peer) setOwn(origin string, eager bool, b ownBound) {
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
func (p *peer) join(origin string, first bool, b ownBound) {
	if first {
		p.sharedLazy, p.settled = false, true
	}
	p.setOwn(origin, true, b)
}

// carry puts the link in origin's tree ("": the shared tree) without a
// broadcast to show for it: a neighbor suspected, the trees it carried
// go by this link too (NeighborDown). The shared tree's link is left
// unsettled, so that the redundant copies of the next first broadcast
// that comes over it prune it again if the suspect was alive after all.
func (p *peer) carry(origin string, b ownBound) {
	if origin == "" {
		p.sharedLazy, p.settled = false, false
		return
	}
	p.setOwn(origin, true, b)
}

// lazyTrees counts the trees the link is pruned from.
func (p *peer) lazyTrees() int {
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

// peerOf returns the neighbor id, nil if it is none.
func (t *Tree) peerOf(id uint32) *peer {
	for _, p := range t.peers {
		if p.id == id {
			return p
		}
	}
	return nil
}

// addPeer adds a neighbor; nil when there is no room, after dropping the
// extra heard from least lately if need be.
func (t *Tree) addPeer(id uint32) *peer {
	if len(t.peers) >= maxPeers {
		drop := -1
		for i, p := range t.peers {
			if p.rings == 0 && (drop < 0 || p.heard.Before(t.peers[drop].heard)) {
				drop = i
			}
		}
		if drop < 0 {
			return nil
		}
		t.removePeer(drop)
	}
	p := &peer{id: id}
	t.peers = append(t.peers, p)
	return p
}

func (t *Tree) removePeer(i int) {
	t.peers = append(t.peers[:i], t.peers[i+1:]...)
}

// Neighbors returns the neighbors' ids, in the order they became
// neighbors.
func (t *Tree) Neighbors() []uint32 {
	ids := make([]uint32, len(t.peers))
	for i, p := range t.peers {
		ids[i] = p.id
	}
	return ids
}

// Eager reports whether the link to the neighbor id pushes origin's
// broadcasts ("": the shared tree's); false if id is no neighbor.
func (t *Tree) Eager(id uint32, origin string) bool {
	p := t.peerOf(id)
	switch {
	case p == nil:
		return false
	case origin == "":
		return !p.sharedLazy
	}
	return p.eagerFor(origin)
}

// Settled reports whether the neighbor id's place in the shared tree was
// decided by a first broadcast (a redundant copy of a later one does not
// prune it).
func (t *Tree) Settled(id uint32) bool {
	p := t.peerOf(id)
	return p != nil && p.settled
}

// sender returns the neighbor a tree message comes from, adding it as an
// extra neighbor if it is none; nil if it may not send tree messages or
// there is no room.
func (t *Tree) sender(now time.Time, from From) *peer {
	if !from.OK {
		return nil
	}
	p := t.peerOf(from.ID)
	if p == nil {
		p = t.addPeer(from.ID)
	}
	if p != nil {
		p.heard = now
	}
	return p
}

// queuePush queues b on an eager link. Past LinkBytes, the origin with the
// most bytes queued on the link loses its newest broadcast there (the
// link's far end then grafts it from an announcement of another neighbor,
// or does without if its origin is the one flooding).
func (t *Tree) queuePush(p *peer, b *bcast) {
	if b.key != "" {
		// A newer value of the key takes the older one's place in the
		// link's queue.
		for i, q := range p.push {
			if q.key == b.key && !q.gone {
				p.pushBytes += len(b.frame) - len(q.frame)
				p.push[i] = b
				return
			}
		}
	}
	p.push = append(p.push, b)
	p.pushBytes += len(b.frame)
	for p.pushBytes > LinkBytes && len(p.push) > 1 {
		t.dropNoisiest(p)
	}
}

// dropNoisiest drops the newest push of the origin with the most bytes
// queued on p.
func (t *Tree) dropNoisiest(p *peer) {
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
			t.stats.PushesDropped++
			return
		}
	}
}

// queuePrune queues a Prune of tree ("" for the shared one) on p.
func (t *Tree) queuePrune(now time.Time, p *peer, tree string) {
	if slices.Contains(p.prunes, tree) {
		return
	}
	if len(p.prunes) >= wire.MaxCompoundParts {
		// The copies that keep coming prune the link at a later flush.
		t.stats.StateForgotten++
		return
	}
	p.prunes = append(p.prunes, tree)
	t.stats.PrunesSent++
	t.armFlush(now)
}

// BackedUp reports whether a link holds so much that this member's own
// broadcasts must wait: over half LinkBytes.
func (t *Tree) BackedUp() bool {
	for _, p := range t.peers {
		if p.pushBytes > LinkBytes/2 {
			return true
		}
	}
	return false
}

// Flush sends what the links queued, in packets of at most budget bytes of
// frames: pushes, grafts and prunes at every flush, announcements every
// announceEvery flushes. Neighbors that are not live, and extras idle past
// extraIdle with nothing queued, are dropped first.
func (t *Tree) Flush(now time.Time, budget int) {
	t.flushes++
	announce := t.flushes%announceEvery == 0
	pending := false
	for i := 0; i < len(t.peers); i++ {
		p := t.peers[i]
		if !t.view.Live(p.id) || p.rings == 0 && now.Sub(p.heard) > extraIdle && len(p.push) == 0 {
			t.removePeer(i)
			i--
			continue
		}
		t.flushPeer(p, budget, announce)
		if len(p.push) > 0 || len(p.announce) > 0 {
			pending = true
		}
	}
	t.expire(now)
	if pending {
		t.armFlush(now)
	}
}

// flushPeer sends p's queue, budget being a packet's room for frames.
func (t *Tree) flushPeer(p *peer, budget int, announce bool) {
	room := budget
	var frames [][]byte
	emit := func() {
		if len(frames) > 0 {
			t.out.Packets = append(t.out.Packets, Packet{To: p.id, Frames: frames})
			frames = nil
		}
	}
	add := func(f []byte) {
		if cost := len(f) + wire.FrameOverheadMax; cost > room || len(frames) == wire.MaxCompoundParts {
			emit()
			room = budget
		}
		frames = append(frames, f)
		room -= len(f) + wire.FrameOverheadMax
	}
	for _, origin := range p.prunes {
		add(t.frame(&wire.Prune{Origin: origin}))
	}
	clear(p.prunes)
	p.prunes = p.prunes[:0]
	for ids := p.grafts; len(ids) > 0; {
		n := min(len(ids), wire.MaxTreeIDs, (budget-16)/9)
		add(t.frame(&wire.Graft{IDs: ids[:n]}))
		ids = ids[n:]
	}
	p.grafts = p.grafts[:0]
	for origins := p.joins; len(origins) > 0; {
		n, size := 0, 16
		for n < len(origins) && n < wire.MaxGraftOrigins && size+len(origins[n])+2 <= budget {
			size += len(origins[n]) + 2
			n++
		}
		add(t.frame(&wire.Graft{Origins: origins[:n]}))
		origins = origins[n:]
	}
	clear(p.joins)
	p.joins = p.joins[:0]
	if announce && len(p.announce) > 0 {
		t.announceInto(p, add, budget)
	}
	if len(p.push) > 0 {
		packets := 0
		sent := t.takePushes(p, func(f []byte) bool {
			if cost := len(f) + wire.FrameOverheadMax; cost > room || len(frames) == wire.MaxCompoundParts {
				if packets++; packets >= flushPackets {
					return false
				}
			}
			add(f)
			return true
		})
		t.stats.PushesSent += uint64(sent)
	}
	emit()
}

// announceInto adds p's announcements as IHave frames, in pieces that fit
// budget.
func (t *Tree) announceInto(p *peer, add func([]byte), budget int) {
	ids := p.announce
	for len(ids) > 0 {
		n := min(len(ids), wire.MaxTreeIDs, (budget-16)/9)
		add(t.frame(&wire.IHave{IDs: ids[:n]}))
		t.stats.AnnouncementsSent += uint64(n)
		ids = ids[n:]
	}
	p.announce = p.announce[:0]
}

// takePushes hands p's queued pushes to send, the origins taking turns
// once send refuses one (the flush's packets are used up): those left wait
// for the next flush. It returns how many were taken.
func (t *Tree) takePushes(p *peer, send func([]byte) bool) int {
	taken := 0
	i := 0
	for ; i < len(p.push); i++ {
		b := p.push[i]
		if b.gone {
			continue
		}
		if !send(b.frame) {
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
	var firsts, others []*bcast
	seen := make(map[string]bool)
	for _, b := range rest {
		if b.gone {
			continue
		}
		if !seen[b.origin] {
			seen[b.origin] = true
			firsts = append(firsts, b)
		} else {
			others = append(others, b)
		}
	}
	p.push = append(append(p.push[:0:0], firsts...), others...)
	p.pushBytes = 0
	for _, b := range p.push {
		p.pushBytes += len(b.frame)
	}
	return taken
}

// Piggyback returns an IHave frame of the announcements pending for the
// neighbor to, within budget bytes of a packet going there anyway; nil if
// there are none or no room.
func (t *Tree) Piggyback(to uint32, budget int) []byte {
	if !t.cfg.On || len(t.peers) == 0 || budget < 32 {
		return nil
	}
	p := t.peerOf(to)
	if p == nil || len(p.announce) == 0 {
		return nil
	}
	n := min(len(p.announce), wire.MaxTreeIDs, (budget-16)/9)
	if n == 0 {
		return nil
	}
	f := t.frame(&wire.IHave{IDs: p.announce[:n]})
	t.stats.AnnouncementsSent += uint64(n)
	p.announce = append(p.announce[:0], p.announce[n:]...)
	return f
}
