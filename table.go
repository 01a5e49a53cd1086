package swim

import (
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// The member table. Every member keeps an entry for every other member, so a
// cluster of N members holds N² entries: at 10,000 members in one simulator
// process that is 10⁸ entries, and the bytes per entry decide whether it fits
// in memory at all. So the table is split in two:
//
//   - A Registry interns what members agree on: names, and the (address,
//     metadata) pairs a name has been seen with (its versions). Each is
//     stored once per process however many Machines hold it, under a small
//     integer id.
//   - Each Machine keeps a dense array of 20-byte entries indexed by name id
//     (memberState): the version it believes, the state, the incarnation,
//     and when it last heard from the member. The entries hold no pointers,
//     so the garbage collector never scans them.
//
// A Machine made by NewMachine has a Registry of its own; a simulator gives
// many Machines one Registry with Registry.NewMachine. The Registry too
// stores no pointer per name or version (registry.go): a process running
// many members with private Registries holds N² identities.

// memberState is one entry of a Machine's member table: 20 bytes, no
// pointers. The zero value means "no entry".
type memberState struct {
	id           uint32 // name id in the Registry
	vs           uint32 // version<<8 | State; 0 when the entry is empty
	incLo, incHi uint32 // Incarnation, split to keep the entry 4-aligned
	// heard is when any packet from the member last arrived (Geode's
	// heartbeat), in milliseconds since the Machine's epoch, modulo 2³².
	// Compared by serial arithmetic; sweepHeard keeps every value within
	// an hour or so of now, far from the 24 days where that breaks.
	heard uint32
}

func (s *memberState) state() State    { return State(s.vs & 0xff) }
func (s *memberState) version() uint32 { return s.vs >> 8 }
func (s *memberState) live() bool {
	st := s.state()
	return st == StateAlive || st == StateSuspect
}
func (s *memberState) setState(st State) { s.vs = s.vs&^0xff | uint32(st) }
func (s *memberState) inc() uint64       { return uint64(s.incHi)<<32 | uint64(s.incLo) }
func (s *memberState) setInc(v uint64)   { s.incLo, s.incHi = uint32(v), uint32(v>>32) }

// The table is stored in fixed chunks, so entries never move and a
// *memberState stays valid while the Machine lives.
const (
	chunkBits = 8
	chunkSize = 1 << chunkBits
)

type chunk [chunkSize]memberState

// entry returns the entry for name id, nil if there is none.
func (m *Machine) entry(id uint32) *memberState {
	c := int(id >> chunkBits)
	if c >= len(m.table) || m.table[c] == nil {
		return nil
	}
	s := &m.table[c][id&(chunkSize-1)]
	if s.vs == 0 {
		return nil
	}
	return s
}

// lookup returns the entry for name, nil if there is none.
func (m *Machine) lookup(name string) *memberState {
	id, ok := m.reg.lookup(name)
	if !ok {
		return nil
	}
	return m.entry(id)
}

// lookupBytes is lookup for a name still in a packet, without copying it.
func (m *Machine) lookupBytes(name []byte) *memberState {
	id, ok := m.reg.lookupBytes(name)
	if !ok {
		return nil
	}
	return m.entry(id)
}

// addEntry creates the entry of a member this Machine did not know.
func (m *Machine) addEntry(name string, addr netip.AddrPort, meta []byte, vers wire.Versions, life uint64, st State, inc uint64, now time.Time) *memberState {
	id := m.reg.acquireName(name)
	c := int(id >> chunkBits)
	for c >= len(m.table) {
		m.table = append(m.table, nil)
	}
	if m.table[c] == nil {
		m.table[c] = new(chunk)
	}
	s := &m.table[c][id&(chunkSize-1)]
	*s = memberState{id: id, vs: m.reg.acquireVersion(id, addr, meta, vers, life)<<8 | uint32(st)}
	s.setInc(inc)
	// Never heard from: as long ago as the sweep allows.
	s.heard = m.ms(now) - uint32(heardFloor/time.Millisecond)
	return s
}

// removeEntry forgets a member.
func (m *Machine) removeEntry(now time.Time, s *memberState) {
	m.memberChanged(now, s, memberForgotten, s.state())
	m.reg.releaseVersion(s.version())
	m.reg.releaseName(s.id)
	*s = memberState{}
}

// tableSize counts the entries: the ring (this member always in it) and
// the dead not yet forgotten.
func (m *Machine) tableSize() int { return m.ring.len() + m.dead.len() }

// setIdentity moves the entry to the version at (addr, meta, vers, life).
func (m *Machine) setIdentity(now time.Time, s *memberState, addr netip.AddrPort, meta []byte, vers wire.Versions, life uint64) {
	old := s.version()
	if m.reg.sameVersion(old, addr, meta, vers, life) {
		return
	}
	oldVers := m.reg.verVers[old]
	v := m.reg.acquireVersion(s.id, addr, meta, vers, life)
	m.reg.releaseVersion(old)
	s.vs = v<<8 | s.vs&0xff
	if oldVers != vers {
		m.memberChanged(now, s, memberVersionsChanged, s.state())
	}
}

func (m *Machine) nameOf(s *memberState) string         { return m.reg.name(s.id) }
func (m *Machine) addrOf(s *memberState) netip.AddrPort { return m.reg.addr(s.version()) }
func (m *Machine) metaOf(s *memberState) []byte         { return m.reg.meta(s.version()) }

// versionsOf is what the member announced it speaks, zero if not known.
func (m *Machine) versionsOf(s *memberState) wire.Versions { return m.reg.verVers[s.version()] }

// lifeOf is the life held of s (lives.go), zero if not known.
func (m *Machine) lifeOf(s *memberState) uint64 { return m.reg.verLife[s.version()] }

// byAddr returns the entry of the member at addr, nil if none.
func (m *Machine) byAddr(addr netip.AddrPort) *memberState {
	id, ok := m.reg.idAt(addr)
	if !ok {
		return nil
	}
	s := m.entry(id)
	if s == nil || !m.reg.sameAddr(s.version(), addr) {
		return nil
	}
	return s
}

func (m *Machine) nameOrder() ringOrder { return ringOrder{names: m.reg} }

// indexNames starts keeping the name index Members walks, so that a
// reader never has to build it (a simulator, which never reads the table
// in name order, does not pay for it).
func (m *Machine) indexNames() {
	if m.byName != nil {
		return
	}
	m.byName = &ringList{}
	o := m.nameOrder()
	m.ring.each(func(id uint32) { m.byName.insert(o, id) })
}

// Members returns the live (alive or suspect) members, this one included
// while it has not left, in name order: the view an application acts on
// (Memberlist.Members). Snapshot adds the dead and left ones not yet
// forgotten. With the IndexNames option it walks an index kept up by every
// input, and neither sorts nor copies the table.
func (m *Machine) Members() []Member {
	dst := make([]Member, 0, m.NumMembers())
	m.indexNames()
	m.byName.each(func(id uint32) {
		if s := m.entry(id); s.live() { // not this member after it left
			dst = append(dst, m.export(s))
		}
	})
	return dst
}

// export copies an entry out as a Member.
func (m *Machine) export(s *memberState) Member {
	return Member{
		Name:        m.nameOf(s),
		Addr:        m.addrOf(s),
		Meta:        cloneBytes(m.metaOf(s)),
		State:       s.state(),
		Incarnation: s.inc(),
		Versions:    Versions(m.versionsOf(s).Effective()),
		Life:        m.lifeOf(s),
	}
}

// Heard times. heardFloor is the oldest a heard time is kept: far longer
// than any probe or suspicion lasts, far shorter than the 24 days after
// which serial arithmetic on 32-bit milliseconds wraps.
const (
	heardFloor      = time.Hour
	heardSweepEvery = 10 * time.Minute
)

// ms is now in milliseconds since the Machine's epoch, modulo 2³².
func (m *Machine) ms(now time.Time) uint32 { return uint32(now.Sub(m.epoch) / time.Millisecond) }

func (m *Machine) markHeard(s *memberState, now time.Time) { s.heard = m.ms(now) }

// heardSince reports whether the member was heard from at or after t.
func (m *Machine) heardSince(s *memberState, t time.Time) bool {
	return int32(s.heard-m.ms(t)) >= 0
}

// lastHeard is when the member was last heard from, as seen at now.
func (m *Machine) lastHeard(s *memberState, now time.Time) time.Time {
	age := time.Duration(int32(m.ms(now)-s.heard)) * time.Millisecond
	return now.Add(-age)
}

// sweepHeard clamps heard times older than heardFloor, so that none drifts
// toward the wrap; it runs every heardSweepEvery (timerHeardSweep).
func (m *Machine) sweepHeard(now time.Time) {
	m.armAt(timerHeardSweep, now.Add(heardSweepEvery))
	floor := m.ms(now) - uint32(heardFloor/time.Millisecond)
	for _, c := range m.table {
		if c == nil {
			continue
		}
		for i := range c {
			if s := &c[i]; s.vs != 0 && int32(s.heard-floor) < 0 {
				s.heard = floor
			}
		}
	}
}

// idSet is a set of name ids, a bit each.
type idSet []uint64

// add puts id in the set; it reports false if it was there already.
func (b *idSet) add(id uint32) bool {
	w, bit := int(id/64), uint64(1)<<(id%64)
	for len(*b) <= w {
		*b = append(*b, 0)
	}
	if (*b)[w]&bit != 0 {
		return false
	}
	(*b)[w] |= bit
	return true
}

func (b idSet) remove(id uint32) {
	if w := int(id / 64); w < len(b) {
		b[w] &^= uint64(1) << (id % 64)
	}
}

func (b idSet) has(id uint32) bool {
	w := int(id / 64)
	return w < len(b) && b[w]&(uint64(1)<<(id%64)) != 0
}
