package swim

import (
	"slices"
	"strings"
	"time"
)

// The probe ring (SWIM §4.3, made deterministic by aligned probing): every
// member places the live members by a hash of their names (ringKeyOf), so
// all members that agree on the view agree on the ring, and each round
// probes a fixed offset on it (probe.go).

// ringList is the probe ring: the live members' name ids in ring order (by
// ring key, then name). The same structure, ordered by name, is the name
// index of the live members (table.go). A plain sorted slice costs O(N) per
// insert, and a member learns of N members as a cluster forms, so building
// the view of a 10,000-member cluster would move 200 MB per member; here
// the ids are kept in blocks of at most ringBlockMax, so an insert or
// removal moves at most one block, and positional access walks the block
// lengths (N/ringBlockMax of them at most twice that).
type ringList struct {
	blocks [][]uint32
	n      int
	mods   uint64 // counts inserts and removals, to validate cached positions
}

const ringBlockMax = 512

// ringOrder compares two name ids in ring order (by key, then name), or by
// name alone when keys is nil (the name index, table.go).
type ringOrder struct {
	keys  []uint64
	names nameSource
}

// nameSource gives the name of an id (a Registry).
type nameSource interface{ name(id uint32) string }

func (o ringOrder) cmp(a, b uint32) int {
	if o.keys != nil {
		switch ka, kb := o.keys[a], o.keys[b]; {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
	}
	return strings.Compare(o.names.name(a), o.names.name(b))
}

func (r *ringList) len() int { return r.n }

// find returns the block and offset where id is or belongs.
func (r *ringList) find(o ringOrder, id uint32) (blk, off int, found bool) {
	if len(r.blocks) == 0 {
		return 0, 0, false
	}
	// The first block whose last id is not before id.
	blk, _ = slices.BinarySearchFunc(r.blocks, id, func(b []uint32, id uint32) int {
		return o.cmp(b[len(b)-1], id)
	})
	if blk == len(r.blocks) {
		blk--
		return blk, len(r.blocks[blk]), false
	}
	off, found = slices.BinarySearchFunc(r.blocks[blk], id, o.cmp)
	return blk, off, found
}

// insert adds id; it reports false if it was there already.
func (r *ringList) insert(o ringOrder, id uint32) bool {
	if len(r.blocks) == 0 {
		r.blocks = append(r.blocks, []uint32{id})
		r.n = 1
		r.mods++
		return true
	}
	blk, off, found := r.find(o, id)
	if found {
		return false
	}
	b := slices.Insert(r.blocks[blk], off, id)
	if len(b) > ringBlockMax {
		// Split in two fresh blocks, so neither keeps spare capacity
		// for the whole: the ring is 4 bytes per member per member.
		half := len(b) / 2
		r.blocks = slices.Insert(r.blocks, blk+1, slices.Clone(b[half:]))
		b = slices.Clone(b[:half])
	}
	r.blocks[blk] = b
	r.n++
	r.mods++
	return true
}

// remove deletes id; it reports false if it was not there.
func (r *ringList) remove(o ringOrder, id uint32) bool {
	blk, off, found := r.find(o, id)
	if !found {
		return false
	}
	r.blocks[blk] = slices.Delete(r.blocks[blk], off, off+1)
	if len(r.blocks[blk]) == 0 {
		r.blocks = slices.Delete(r.blocks, blk, blk+1)
	}
	r.n--
	r.mods++
	return true
}

// index returns the position of id, -1 if it is not there.
func (r *ringList) index(o ringOrder, id uint32) int {
	blk, off, found := r.find(o, id)
	if !found {
		return -1
	}
	for _, b := range r.blocks[:blk] {
		off += len(b)
	}
	return off
}

// at returns the id at position i (0 <= i < len).
func (r *ringList) at(i int) uint32 {
	for _, b := range r.blocks {
		if i < len(b) {
			return b[i]
		}
		i -= len(b)
	}
	// Every caller passes an index it computed below len (modulo it, or
	// drawn from IntN(len)); nothing a peer sends reaches i.
	panic("swim: ring index out of range")
}

// each calls f with every id in ring order.
func (r *ringList) each(f func(id uint32)) {
	for _, b := range r.blocks {
		for _, id := range b {
			f(id)
		}
	}
}

// ringKeyOf places a member on the probe ring (FNV-1a of its name).
func ringKeyOf(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}

func (m *Machine) ringOrder() ringOrder { return ringOrder{keys: m.reg.ringKeys, names: m.reg} }

func (m *Machine) ringInsert(now time.Time, s *memberState) {
	if m.ring.insert(m.ringOrder(), s.id) {
		m.ringXor ^= uint32(m.reg.ringKeys[s.id])
		m.ringMoved(now)
	}
	m.notePairing(now, s)
	if m.byName != nil {
		m.byName.insert(m.nameOrder(), s.id)
	}
}

func (m *Machine) ringRemove(now time.Time, s *memberState) {
	if m.ring.remove(m.ringOrder(), s.id) {
		m.ringXor ^= uint32(m.reg.ringKeys[s.id])
		m.ringMoved(now)
	}
	delete(m.unpaired, s.id)
	if m.byName != nil {
		m.byName.remove(m.nameOrder(), s.id)
	}
}
