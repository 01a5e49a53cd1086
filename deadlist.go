package swim

import "time"

// deadList holds the members declared dead or left that are still in the
// table, in the order they died: every entry lives GossipToDeadTime, so
// the oldest is forgotten first (reap). A member also leaves the list from
// anywhere in it, when it comes back or its death becomes a leave; in a
// plain slice that is a search and a shift, O(N) for each such packet
// after a mass failure. Here each member's slot is indexed by its id, a
// removal leaves a hole that the walks skip, and the slots are compacted
// once the holes outnumber the members (or the reaped slots before head
// the rest), so that every operation is O(1) amortised.
type deadList struct {
	slots  []deadEntry
	head   int            // the slots before it were reaped
	slot   map[uint32]int // each member's index in slots; nil while empty
	n      int            // members in the list
	failed int            // of them declared dead, not left: reconnect targets
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
		d.slot = make(map[uint32]int)
	}
	d.slot[id] = len(d.slots)
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
	if !ok {
		return false
	}
	delete(d.slot, id)
	e := &d.slots[i]
	e.hole = true
	d.n--
	if e.failed {
		d.failed--
	}
	if holes := len(d.slots) - d.head - d.n; holes >= compactMin && holes > d.n {
		d.compact()
	}
	if d.n == 0 {
		d.reset()
	}
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
	delete(d.slot, e.id)
	d.head++
	d.n--
	if e.failed {
		d.failed--
	}
	switch {
	case d.n == 0:
		d.reset()
	case d.head >= compactMin && d.head > len(d.slots)/2:
		d.compact()
	}
	return e
}

func (d *deadList) skipHoles() {
	for d.head < len(d.slots) && d.slots[d.head].hole {
		d.head++
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

// compact drops the holes and the reaped slots, into a new array sized for
// the members, so that a list that held a mass failure gives its memory
// back.
func (d *deadList) compact() {
	slots := make([]deadEntry, 0, d.n)
	for _, e := range d.slots[d.head:] {
		if !e.hole {
			d.slot[e.id] = len(slots)
			slots = append(slots, e)
		}
	}
	d.slots, d.head = slots, 0
}

// reset empties the list, and lets go of its slots and index: a map never
// gives back the memory of the entries it once held.
func (d *deadList) reset() {
	*d = deadList{}
}
