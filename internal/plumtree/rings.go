package plumtree

import "slices"

// ring is this member's place on one ring: its neighbors there.
type ring struct {
	pred, succ uint32
	ok         bool // pred and succ are set (some other member is eligible)
}

// RingKey is the place on ring j of a member whose probe-ring key is key:
// a splitmix64 of the key and j, so that each ring orders the members
// anew.
func RingKey(key uint64, j int) uint64 {
	z := key + uint64(j+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (t *Tree) ringKey(id uint32, j int) uint64 { return RingKey(t.view.Key(id), j) }

// MemberChanged re-places a member on the rings after its state, protocol
// or existence changed; eligible says whether it may be a neighbor now.
func (t *Tree) MemberChanged(id uint32, eligible bool) {
	changed := false
	for j := range t.rings {
		r := &t.rings[j]
		switch {
		case eligible && !r.ok:
			r.pred, r.succ, r.ok = id, id, true
			changed = true
		case eligible:
			self, k := t.ringKey(t.self, j), t.ringKey(id, j)
			if id != r.succ && k-self < t.ringKey(r.succ, j)-self {
				r.succ, changed = id, true
			}
			if id != r.pred && self-k < self-t.ringKey(r.pred, j) {
				r.pred, changed = id, true
			}
		case r.ok && (r.pred == id || r.succ == id):
			t.rescan(j)
			changed = true
		}
	}
	if changed {
		t.syncPeers()
	}
}

// rescan finds this member's neighbors on ring j among all members.
func (t *Tree) rescan(j int) {
	r := &t.rings[j]
	*r = ring{}
	self := t.ringKey(t.self, j)
	var bestSucc, bestPred uint64
	t.view.Eligible(func(id uint32) {
		k := t.ringKey(id, j)
		if !r.ok || k-self < bestSucc {
			r.succ, bestSucc = id, k-self
		}
		if !r.ok || self-k < bestPred {
			r.pred, bestPred = id, self-k
		}
		r.ok = true
	})
}

// syncPeers makes the peers' ring bits match the rings: new neighbors join
// eager (Plumtree starts every link eager), former ones are dropped
// (Plumtree's NeighborDown; if the far end still counts this member as its
// neighbor, its next message makes it an extra).
func (t *Tree) syncPeers() {
	was := make(map[uint32]bool, len(t.peers))
	for _, p := range t.peers {
		was[p.id] = p.rings != 0
		p.rings = 0
	}
	for j, r := range t.rings {
		if !r.ok {
			continue
		}
		for _, id := range [2]uint32{r.pred, r.succ} {
			p := t.peerOf(id)
			if p == nil {
				p = t.addPeer(id)
			}
			if p != nil {
				p.rings |= 1 << j
			}
		}
	}
	t.peers = slices.DeleteFunc(t.peers, func(p *peer) bool { return p.rings == 0 && was[p.id] })
}

// Beside returns the members beside target on each ring, among those each
// yields (target not among them), key giving each member's probe-ring key;
// ok is false when each yields none.
func Beside(key func(uint32) uint64, target uint32, each func(f func(uint32))) (pred, succ [Rings]uint32, ok bool) {
	var bestPred, bestSucc [Rings]uint64
	var keys [Rings]uint64
	for j := range keys {
		keys[j] = RingKey(key(target), j)
	}
	each(func(id uint32) {
		for j, k := range keys {
			kj := RingKey(key(id), j)
			if !ok || kj-k < bestSucc[j] {
				succ[j], bestSucc[j] = id, kj-k
			}
			if !ok || k-kj < bestPred[j] {
				pred[j], bestPred[j] = id, k-kj
			}
		}
		ok = true
	})
	return pred, succ, ok
}
