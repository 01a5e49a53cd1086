package swim

import "time"

// The fan-out of member changes. Every change of an entry of the member
// table (a member added, its state changed, its versions changed, or it
// forgotten) goes through memberChanged, which tells every mechanism that
// follows the table, in one stated order. A mechanism that follows the
// table adds its step here.
//
// This member's own entry is added at start and placed on the ring; its
// leave and rejoin (lifecycle.go) set its state directly and keep it
// there, since it never probes, pairs with or counts itself as a peer.

// memberChange is what changed in a member's entry.
type memberChange uint8

const (
	// memberAdded: a new entry, alive (addEntry).
	memberAdded memberChange = iota
	// memberStateChanged: its state changed (setState), or was set
	// again at a newer incarnation.
	memberStateChanged
	// memberVersionsChanged: the versions it speaks changed
	// (setIdentity), its state did not.
	memberVersionsChanged
	// memberForgotten: the entry is about to be removed (reap).
	memberForgotten
)

// live reports whether st is a live state (alive or suspect).
func (st State) live() bool { return st == StateAlive || st == StateSuspect }

// memberChanged fans the change what of s's entry out, after the entry
// changed (before, for memberForgotten); was is its state before a
// memberStateChanged. The order:
//
//  1. the suspects' count and the Observer's suspicion times;
//  2. the trees, when an alive member stops being alive: the trees it
//     carried to this member are asked of the other neighbors (Plumtree
//     NeighborDown);
//  3. the probe ring and the dead list (a member is in one or the other),
//     with the pairing and the name index that follow the ring;
//  4. the trees: the member placed on or taken off this member's rings;
//  5. the partition alarm, which counts the live members;
//  6. the probe order of randomized round-robin, which a member joining
//     the ring enters (SWIM §4.3);
//  7. for a member forgotten: its broadcasts' state in the trees, its
//     round-trip time, its refused change, and its claims unless a
//     tombstone remembers it (then they go with the tombstone: the key
//     its name is bound to outlives the entry, tombstone.go).
func (m *Machine) memberChanged(now time.Time, s *memberState, what memberChange, was State) {
	if what == memberForgotten {
		name := m.nameOf(s)
		m.tree.ForgetOrigin(name) // its broadcasts have long stopped spreading
		delete(m.rtts, name)
		delete(m.strikes, name)
		if m.cfg.ReconnectTimeout <= 0 {
			// No tombstone remembers the name: neither does its key.
			m.sigs.Forget(name)
		}
		delete(m.refusedChanges, s.id)
		return
	}
	is := s.state()
	stateChanged := what == memberStateChanged
	joined := what == memberAdded || stateChanged && !was.live() && is.live()
	gone := stateChanged && was.live() && !is.live()
	onRing := is.live()
	if what == memberVersionsChanged {
		onRing = m.ring.index(m.ringOrder(), s.id) >= 0
	}

	// 1. Suspects.
	if stateChanged && was != is && (was == StateSuspect || is == StateSuspect) {
		m.suspectChanged(now, s, was, is)
	}
	// 2. Trees: an alive neighbor lost.
	if stateChanged && was == StateAlive && is != StateAlive {
		m.treeNeighborDown(now, s)
	}
	// 3. Ring and dead list.
	switch {
	case joined:
		if stateChanged {
			m.removeDead(s)
		}
		m.ringInsert(now, s)
	case gone:
		m.ringRemove(now, s)
		m.appendDead(s, now)
	case stateChanged && !is.live():
		// Dead to left, or again at a newer incarnation: keep the
		// reaping order fair by moving it to the back, since its
		// time of death moved.
		m.removeDead(s)
		m.appendDead(s, now)
	case what == memberVersionsChanged && onRing:
		m.notePairing(now, s)
	}
	// 4. Trees: the rings.
	if what != memberVersionsChanged || onRing {
		m.treeMemberChanged(s)
	}
	// 5. Partition alarm.
	if s != m.self {
		switch {
		case joined:
			m.notePartition(now, false)
		case gone:
			m.notePartition(now, is == StateLeft)
		}
	}
	// 6. Probe order.
	if joined && s != m.self {
		m.addToProbeOrder(s)
	}
}
