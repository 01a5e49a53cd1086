package plumtree

import (
	"slices"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// missingBcast is a broadcast announced and not received.
type missingBcast struct {
	first      uint32 // the neighbor whose announcement made the entry (missingBy)
	announcers [maxAnnouncers]uint32
	n          int // announcers known
	next       int // the next to graft
	tries      uint64
}

func (mb *missingBcast) has(id uint32) bool {
	for _, a := range mb.announcers[:mb.n] {
		if a == id {
			return true
		}
	}
	return false
}

// IHave notes the broadcasts a neighbor announced that this member has not
// received, and asks for their graft timers (Plumtree §3.2).
func (t *Tree) IHave(now time.Time, from From, ids []uint64) {
	p := t.sender(now, from)
	if p == nil || !t.cfg.On {
		t.stats.Refused++
		return
	}
	t.stats.AnnouncementsReceived += uint64(len(ids))
	for _, id := range ids {
		if _, ok := t.retained[id]; ok {
			continue
		}
		mb := t.missing[id]
		if mb == nil {
			if len(t.missing) >= MaxMissing || t.missingBy[p.id] >= MaxMissingPerPeer {
				t.stats.Refused++
				continue
			}
			mb = &missingBcast{first: p.id}
			t.missing[id] = mb
			t.missingBy[p.id]++
			t.out.Grafts = append(t.out.Grafts, GraftTimer{At: now.Add(t.cfg.GraftTimeout), ID: id})
		}
		if mb.n < maxAnnouncers && !mb.has(p.id) {
			mb.announcers[mb.n] = p.id
			mb.n++
		}
	}
}

// MaxMissingPerPeer bounds the missing broadcasts one neighbor's
// announcements may have this member track at once: a neighbor (or a
// forger in its name) announcing ids nobody sent (8,192 a second) filled
// the MaxMissing entries, so that broadcasts really missing were not
// grafted and 46% reached someone short. An honest neighbor's
// announcements are of broadcasts it has, most of which arrive on the
// eager path within a graft timeout.
const MaxMissingPerPeer = MaxMissing / 16

// forgetMissing drops the missing broadcast id, mb.
func (t *Tree) forgetMissing(id uint64, mb *missingBcast) {
	delete(t.missing, id)
	if t.missingBy[mb.first]--; t.missingBy[mb.first] <= 0 {
		delete(t.missingBy, mb.first)
	}
}

// GraftPending reports whether the graft timer of broadcast id after try
// grafts still stands: the broadcast is missing and no graft was sent
// since.
func (t *Tree) GraftPending(id, try uint64) bool {
	mb := t.missing[id]
	return mb != nil && mb.tries == try
}

// GraftDue grafts the next announcer of a broadcast still missing, and
// asks for the next try's timer (Plumtree §3.2: the timer runs again for
// the next announcer). Past GraftTries the broadcast is given up.
func (t *Tree) GraftDue(now time.Time, id uint64) {
	mb := t.missing[id]
	if mb.tries >= GraftTries {
		t.forgetMissing(id, mb)
		t.stats.GraftsAbandoned++
		return
	}
	for range mb.n {
		a := mb.announcers[mb.next%mb.n]
		mb.next++
		if !t.view.Live(a) {
			continue
		}
		p := t.peerOf(a)
		if p == nil {
			if p = t.addPeer(a); p == nil {
				continue
			}
		}
		// The link turns eager for the broadcast's origin once the
		// broadcast arrives over it (Forward).
		p.grafts = append(p.grafts, id)
		t.stats.GraftsSent++
		t.armFlush(now)
		break
	}
	mb.tries++
	t.out.Grafts = append(t.out.Grafts, GraftTimer{At: now.Add(t.cfg.GraftTimeout / 2), ID: id, Try: mb.tries})
}

// NeighborDown: a neighbor until now alive is suspected, dead or gone.
// Plumtree mends a tree when a broadcast fails to come (§3.2), so an origin
// that broadcasts rarely would find its tree broken at its next broadcast,
// seconds after the failure; and Plumtree's NeighborDown (§3.3) comes only
// when the overlay drops the neighbor, here at its death. So at the
// suspicion, the trees it carried to this member (the origins whose latest
// broadcast came from it first, and the shared tree when the link was in
// it) are asked of every other alive neighbor at once (a Graft naming the
// origins); the copies those links then bring twice are pruned as usual,
// and if it was alive after all, so are its own.
func (t *Tree) NeighborDown(now time.Time, id uint32) {
	p := t.peerOf(id)
	if p == nil {
		return
	}
	var origins []string
	if !p.sharedLazy {
		origins = append(origins, "")
	}
	for origin, via := range t.via {
		if via == id {
			origins = append(origins, origin)
			delete(t.via, origin)
		}
	}
	if len(origins) == 0 {
		return
	}
	slices.Sort(origins) // map order is random; a simulated run must repeat
	limit := t.ownBound()
	for _, q := range t.peers {
		if q == p {
			continue
		}
		if !t.view.Alive(q.id) {
			continue
		}
		for _, origin := range origins {
			if len(q.joins) >= maxJoins {
				// The trees not asked for mend by grafts at their
				// origins' next broadcasts.
				t.stats.StateForgotten++
				break
			}
			q.carry(origin, limit)
			q.joins = append(q.joins, origin)
			t.stats.JoinsSent++
		}
	}
	t.armFlush(now)
}

// Graft queues the broadcasts a neighbor asked for that this member
// retains, and puts the link in their origins' trees (Plumtree §3.2), and
// in the trees the Graft names.
func (t *Tree) Graft(now time.Time, from From, msg *wire.Graft) {
	p := t.sender(now, from)
	if p == nil || !t.cfg.On {
		t.stats.Refused++
		return
	}
	t.stats.GraftsReceived += uint64(len(msg.IDs))
	t.stats.JoinsReceived += uint64(len(msg.Origins))
	for _, origin := range msg.Origins {
		p.carry(origin, t.ownBound())
	}
	for _, id := range msg.IDs {
		if b := t.retained[id]; b != nil && !b.gone {
			if !p.eagerFor(b.origin) {
				p.join(b.origin, t.first(b.origin, b.id), t.ownBound())
			}
			t.queuePush(p, b)
		} else {
			t.stats.GraftsUnknown++
		}
	}
	t.armFlush(now)
}

// Prune takes the link to a neighbor out of a tree: origin's own, or the
// shared one when origin is "" (Plumtree §3.1).
func (t *Tree) Prune(now time.Time, from From, origin string) {
	p := t.sender(now, from)
	if p == nil || !t.cfg.On {
		t.stats.Refused++
		return
	}
	t.stats.PrunesReceived++
	if origin == "" {
		p.sharedLazy, p.settled = true, true
	} else {
		p.setOwn(origin, false, t.ownBound())
	}
	// What was queued for that tree is announced instead.
	p.push = slices.DeleteFunc(p.push, func(b *bcast) bool {
		if p.eagerFor(b.origin) {
			return false
		}
		p.pushBytes -= len(b.frame)
		p.announce = append(p.announce, b.id)
		return true
	})
}
