package swim

import "time"

// deadList holds the members declared dead or left that are still in the
// table, in the order they died: every entry lives GossipToDeadTime, so
// the oldest is forgotten first (reap). A member also leaves the list from
// anywhere in it, when it comes back or its death becomes a leave; in a
// plain slice that is a search and a shift, O(N) for each such packet
// after a mass failure. Here each member's slot is indexed by its id, a
// removal leaves a hole that the walks skip, and the slots are compacted
// before the holes and the reaped slots outnumber the members (tidy), so
// that every operation is O(1) amortised.
type deadList struct {
	slots []deadEntry
	head  int // the slots before it were reaped
	// slot is each member's index in slots, -1 once it left the list: a
	// member that dies and comes back again and again updates its entry
	// instead of deleting and adding one, which would make the map
	// rehash; compact rebuilds it without the -1s. Nil while empty.
	slot   map[uint32]int32
	n      int // members in the list
	failed int // of them declared dead, not left: reconnect targets
}

// deadEntry is a member in the dead list and when it died.
type deadEntry struct {
	id    uint32
	since time.Time
	// failed: the member was declared dead, not left, when it entered
	// the list (a reconnect target); deadList.failed counts these.
	failed bool
	hole   bool // the member left the list from here
}

// compactMin is the fewest holes (or reaped slots) worth compacting: below
// it the copy costs more than the holes do.
const compactMin = 32

func (d *deadList) len() int { return d.n }

// push adds member id, which died at since, as the newest entry. The
// member must not be in the list.
func (d *deadList) push(id uint32, since time.Time, failed bool) {
	if d.slot == nil {
		d.slot = make(map[uint32]int32)
	}
	d.slot[id] = int32(len(d.slots))
	d.slots = append(d.slots, deadEntry{id: id, since: since, failed: failed})
	d.n++
	if failed {
		d.failed++
	}
}

// remove takes member id out of the list, wherever it is; it reports
// false if the member was not in it.
func (d *deadList) remove(id uint32) bool {
	i, ok := d.slot[id]
	if !ok || i < 0 {
		return false
	}
	d.slot[id] = -1
	e := &d.slots[i]
	e.hole = true
	d.n--
	if e.failed {
		d.failed--
	}
	d.tidy()
	return true
}

// oldest returns the entry that died first, false if the list is empty.
func (d *deadList) oldest() (deadEntry, bool) {
	d.skipHoles()
	if d.head == len(d.slots) {
		return deadEntry{}, false
	}
	return d.slots[d.head], true
}

// popOldest removes the entry oldest returns; the list must not be empty.
func (d *deadList) popOldest() deadEntry {
	d.skipHoles()
	e := d.slots[d.head]
	d.slot[e.id] = -1
	d.head++
	d.n--
	if e.failed {
		d.failed--
	}
	d.tidy()
	return e
}

// skipHoles moves head past the holes at the front, so that the oldest
// entry is at head.
func (d *deadList) skipHoles() {
	moved := false
	for d.head < len(d.slots) && d.slots[d.head].hole {
		d.head++
		moved = true
	}
	if moved {
		d.tidy()
	}
}

// tidy compacts the slots once the holes after head outnumber the members,
// or the slots before head (reaped, or holes skipped) are more than half
// the array, and empties an empty list: so the array never holds more
// than about four slots per member.
func (d *deadList) tidy() {
	holes := len(d.slots) - d.head - d.n
	switch {
	case d.n == 0:
		d.reset()
	case holes >= compactMin && holes > d.n,
		d.head >= compactMin && d.head > len(d.slots)/2:
		d.compact()
	}
}

// each calls f with every entry, oldest first.
func (d *deadList) each(f func(e deadEntry)) {
	for _, e := range d.slots[d.head:] {
		if !e.hole {
			f(e)
		}
	}
}

// slotCount is the number of slots a random pick draws from: the members
// and the holes between them, at most about twice the members.
func (d *deadList) slotCount() int { return len(d.slots) - d.head }

// at returns the entry in slot i (0 <= i < slotCount), false for a hole.
func (d *deadList) at(i int) (deadEntry, bool) {
	e := d.slots[d.head+i]
	return e, !e.hole
}

// compact drops the holes and the reaped slots, moving the entries to the
// front of the array, and rebuilds the index. Between two compactions the
// array holds up to about twice the entries; one eight times larger (a
// mass failure being reaped) is replaced by one of twice their size, so
// the list gives its memory back without growing again at once.
func (d *deadList) compact() {
	slots := d.slots[:0]
	if cap(d.slots) > 8*max(d.n, compactMin) {
		slots = make([]deadEntry, 0, 2*d.n)
	}
	d.slot = make(map[uint32]int32, d.n)
	for _, e := range d.slots[d.head:] {
		if !e.hole {
			d.slot[e.id] = int32(len(slots))
			slots = append(slots, e)
		}
	}
	clear(d.slots[len(slots):])
	d.slots, d.head = slots, 0
}

// reset empties the list, and lets go of its slots and index: a map never
// gives back the memory of the entries it once held.
func (d *deadList) reset() {
	*d = deadList{}
}
