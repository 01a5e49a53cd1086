package plumtree

import (
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Verdict is what the receive rule makes of a broadcast.
type Verdict uint8

// The verdicts of Receive.
const (
	// Own: this member's own broadcast, back over a link.
	Own Verdict = iota + 1
	// Refused: the windows of delivered broadcasts are full of origins
	// that are all members; nothing of the broadcast is remembered.
	Refused
	// Duplicate: delivered here before.
	Duplicate
	// Stale: a keyed broadcast older than the value of its key
	// delivered here.
	Stale
	// Implausible: an epoch its origin cannot have sent, before its
	// process started or past this member's clock (maxEpochLead).
	Implausible
	// Fresh: to be delivered and passed on (Forward).
	Fresh
)

// keyMark is the newest value of a key delivered.
type keyMark struct {
	epoch uint64
	seq   uint32
}

// maxEpochLead is how far past this member's clock an origin's epoch may
// lie: an origin starts a later epoch only when its sequence numbers run
// out (2^32 broadcasts), at its own clock's millisecond, and clocks agree
// within far less than this.
const maxEpochLead = time.Hour

func (k keyMark) before(epoch uint64, seq uint32) bool {
	return k.epoch < epoch || k.epoch == epoch && k.seq < seq
}

// Receive applies the receive rule to a broadcast that came from a member:
// whether it was delivered before (the origin's windows, or, past them, the
// broadcasts retained) and, keyed, whether a newer value of its key was. A
// copy that came again prunes the link it came over (Plumtree §3.1). A
// Fresh broadcast is the Machine's to deliver; it then passes it on with
// Forward.
func (t *Tree) Receive(now time.Time, from From, msg *wire.Broadcast) Verdict {
	if msg.Origin == t.cfg.Self {
		if from.OK && t.cfg.On {
			t.duplicate(now, from, msg.Origin, ID(msg.Origin, msg.Epoch, msg.Seq))
		}
		return Own
	}
	// An origin's epochs are bounded by what it could have sent: from
	// its process's start, its first epoch, to this member's clock; and
	// the window of that first epoch is kept whatever later epochs come
	// (seenWindows), so that broadcasts forged at far-later epochs take
	// no real one's place.
	home, known := t.view.Epoch(msg.Origin)
	if known && (msg.Epoch < home || msg.Epoch > home && msg.Epoch > uint64(max(now.Add(maxEpochLead).UnixMilli(), 0))) {
		t.stats.Implausible++
		return Implausible
	}
	w := t.seen[msg.Origin]
	if w == nil {
		if len(t.seen) >= t.cfg.MaxOrigins && !t.evictSeen() {
			return Refused
		}
		w = &seenWindows{}
		t.seen[msg.Origin] = w
	}
	if known {
		w.pin(home)
	}
	var fresh bool
	if t.cfg.On && w.behind(msg.Epoch, msg.Seq) {
		// Past the window (a fast origin, a broadcast grafted late): the
		// retained broadcasts tell.
		_, held := t.retained[ID(msg.Origin, msg.Epoch, msg.Seq)]
		fresh = !held
	} else {
		fresh = w.mark(msg.Epoch, msg.Seq)
	}
	if !fresh {
		if from.OK && t.cfg.On {
			t.duplicate(now, from, msg.Origin, ID(msg.Origin, msg.Epoch, msg.Seq))
		}
		return Duplicate
	}
	if msg.Key != "" && !t.newestOfKey(msg) {
		return Stale
	}
	return Fresh
}

// newestOfKey reports whether msg, a keyed broadcast, is newer than the
// value of its key delivered here, and records it if so. The keys
// remembered are bounded (maxKeys): past the bound, a key not remembered
// yet is taken as new.
func (t *Tree) newestOfKey(msg *wire.Broadcast) bool {
	k := Key(msg)
	mark, ok := t.keys[k]
	if ok && !mark.before(msg.Epoch, msg.Seq) {
		return false
	}
	if ok || len(t.keys) < maxKeys {
		t.keys[k] = keyMark{epoch: msg.Epoch, seq: msg.Seq}
	} else {
		t.stats.StateForgotten++
	}
	return true
}

// evictSeen makes room among the windows of delivered broadcasts, full at
// MaxOrigins, by forgetting one whose origin is not a member (ForgetOrigin
// forgets those that are, when they go): origins invented by a forger must
// not keep real ones out for good. It reports false when every origin is a
// member.
func (t *Tree) evictSeen() bool {
	tries := 0
	for origin := range t.seen { // map order is random: a random victim
		if !t.view.Member(origin) {
			delete(t.seen, origin)
			return true
		}
		if tries++; tries == 64 {
			break
		}
	}
	return false
}

// ForgetOrigin forgets the broadcasts delivered of a member the Machine
// forgets: they have long stopped spreading.
func (t *Tree) ForgetOrigin(name string) { delete(t.seen, name) }

// Forward passes on a broadcast Receive found Fresh, framed as frame,
// along the trees: the link it came over is in the tree it travels
// (Plumtree §3.1).
func (t *Tree) Forward(now time.Time, from From, msg *wire.Broadcast, frame []byte) {
	if !t.cfg.On {
		return
	}
	var p *peer
	if p = t.sender(now, from); p != nil && !p.eagerFor(msg.Origin) {
		_, seen := t.firstOf[msg.Origin]
		p.join(msg.Origin, !seen, t.ownBound())
	}
	t.spread(now, p, msg, frame)
}

// Originate passes on this member's own broadcast, framed as frame.
func (t *Tree) Originate(now time.Time, msg *wire.Broadcast, frame []byte) {
	if !t.cfg.On {
		return
	}
	t.spread(now, nil, msg, frame)
}

// spread takes in a broadcast received for the first time (or made
// here): retained for grafts, pushed to the eager neighbors and announced
// to the lazy ones, except from, the neighbor it came from.
func (t *Tree) spread(now time.Time, from *peer, msg *wire.Broadcast, frame []byte) {
	b := &bcast{
		id: ID(msg.Origin, msg.Epoch, msg.Seq), origin: msg.Origin,
		epoch: msg.Epoch, seq: msg.Seq, frame: frame, at: now,
	}
	if msg.Key != "" {
		b.key = Key(msg)
	}
	if mb := t.missing[b.id]; mb != nil {
		t.forgetMissing(b.id, mb)
	}
	t.retain(now, b)
	_, seen := t.firstOf[b.origin]
	if from != nil && !seen {
		from.settled = true
	}
	if !seen {
		if len(t.firstOf) >= maxKeys {
			clear(t.firstOf)
			t.stats.StateForgotten++
		}
		t.firstOf[b.origin] = b.id
	}
	if t.firstEver == 0 {
		t.firstEver = b.id
		for _, p := range t.peers {
			p.settled = true
		}
	}
	limit := t.ownBound()
	if from != nil {
		if _, own := from.own[b.origin]; !own {
			from.setOwn(b.origin, true, limit)
		}
		if _, ok := t.via[b.origin]; !ok && len(t.via) >= maxKeys {
			clear(t.via)
			t.stats.StateForgotten++
		}
		t.via[b.origin] = from.id
	} else {
		delete(t.via, b.origin)
	}
	for _, p := range t.peers {
		if p == from {
			continue
		}
		eager := p.eagerFor(b.origin)
		if _, own := p.own[b.origin]; !own {
			// The origin's tree is the shared tree as its first
			// broadcast found it here.
			p.setOwn(b.origin, eager, limit)
		}
		if eager {
			t.queuePush(p, b)
		} else {
			p.announce = append(p.announce, b.id)
		}
	}
	if len(t.peers) > 0 {
		// With nobody to pass it to, the beat is left alone.
		t.armFlush(now)
	}
}

// retain keeps b for grafts, within the bounds, and replaces the older
// value of its key: only the newest value of a key keeps spreading.
func (t *Tree) retain(now time.Time, b *bcast) {
	if b.key != "" {
		if old := t.byKey[b.key]; old != nil {
			old.gone = true
		}
		t.byKey[b.key] = b
	}
	t.retained[b.id] = b
	t.fifo = append(t.fifo, b)
	t.bytes += len(b.frame)
	t.expire(now)
}

// expire forgets the retained broadcasts past retainFor or over
// RetainBytes, oldest first.
func (t *Tree) expire(now time.Time) {
	for t.fifoHead < len(t.fifo) {
		b := t.fifo[t.fifoHead]
		if t.bytes <= t.cfg.RetainBytes && now.Sub(b.at) < retainFor {
			break
		}
		t.fifo[t.fifoHead] = nil
		t.fifoHead++
		t.bytes -= len(b.frame)
		if t.retained[b.id] == b {
			delete(t.retained, b.id)
		}
		if b.key != "" && t.byKey[b.key] == b {
			delete(t.byKey, b.key)
		}
	}
	if t.fifoHead > 1024 && t.fifoHead*2 > len(t.fifo) {
		n := copy(t.fifo, t.fifo[t.fifoHead:])
		clear(t.fifo[n:])
		t.fifo = t.fifo[:n]
		t.fifoHead = 0
	}
}

// first reports whether id is the first broadcast of origin this member
// received or made: the one that travelled the shared tree.
func (t *Tree) first(origin string, id uint64) bool {
	first, ok := t.firstOf[origin]
	return ok && first == id
}

// duplicate applies the tree's rule to broadcast id of origin that came
// again: a second copy over a link prunes the link from origin's tree
// (Plumtree §3.1), and from the shared tree too when the copy is the first
// broadcast this member received, or, over a link added since and not yet
// settled, the first of its origin: the shared tree is pruned by one
// broadcast per link, never by concurrent ones (see the package comment),
// and links that membership changes add do not leave cycles in it for
// good. Over a link this member holds lazy already, the far end missed the
// Prune (lost): it is sent again.
func (t *Tree) duplicate(now time.Time, from From, origin string, id uint64) {
	p := t.sender(now, from)
	if p == nil {
		return
	}
	t.stats.Redundant++
	if id == t.firstEver || !p.settled && t.first(origin, id) {
		p.sharedLazy, p.settled = true, true
		t.queuePrune(now, p, "")
	}
	p.setOwn(origin, false, t.ownBound())
	t.queuePrune(now, p, origin)
}
