package swim

import (
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// What a member leaves behind (SWIM §4.2 leaves it to the
// implementation how long a death is remembered). A member declared dead
// or left stays in the table, in the dead list (deadlist.go), for
// GossipToDeadTime, so that its death keeps spreading and is reported;
// reap then forgets it, and a tombstone remembers its name, address and
// last incarnation for ReconnectTimeout more: a dead member can be
// contacted again when a partition heals (pushpull.go), news older than
// its death is recognised as such, and a member that missed its own death
// is nudged to refute it.

// tombstone remembers a member after it left the table (declared dead or
// left, and forgotten after GossipToDeadTime), for ReconnectTimeout: a dead
// one can be contacted again when a partition heals, and for both the last
// incarnation tells old news about them (a replayed packet) from new.
type tombstone struct {
	name   string
	addr   netip.AddrPort
	inc    uint64
	life   uint64 // the life that died or left (lives.go)
	left   bool
	since  time.Time // when it died
	nudged time.Time // when it was last told (nudge)
	gone   bool      // superseded: the member is back in the table
}

// appendDead adds s to the dead list, which is in order of death: every
// entry lives GossipToDeadTime, so the reap timer is armed for the head.
func (m *Machine) appendDead(s *memberState, now time.Time) {
	m.dead.push(s.id, now, s.state() == StateDead)
	m.armReap()
}

// removeDead takes s out of the dead list: it came back, or its death
// became a leave.
func (m *Machine) removeDead(s *memberState) { m.dead.remove(s.id) }

// armReap arms the reap timer for the oldest entry of the dead list.
func (m *Machine) armReap() {
	if d, ok := m.dead.oldest(); ok {
		m.armAt(timerReap, d.since.Add(m.cfg.GossipToDeadTime))
	}
}

// reap forgets members dead or left for GossipToDeadTime. Each is still
// remembered by a tombstone for ReconnectTimeout: a failed member as a
// reconnect target, and both so that news older than their death is
// recognised as such.
func (m *Machine) reap(now time.Time) {
	for {
		d, ok := m.dead.oldest()
		if !ok || now.Before(d.since.Add(m.cfg.GossipToDeadTime)) {
			break
		}
		m.dead.popOldest()
		s := m.entry(d.id)
		if m.cfg.ReconnectTimeout > 0 {
			m.addTomb(&tombstone{name: m.nameOf(s), addr: m.addrOf(s), inc: s.inc(), life: m.lifeOf(s), left: s.state() == StateLeft, since: d.since})
		}
		m.removeEntry(now, s)
		m.version++
	}
	m.armReap()
}

// expireTombs forgets the tombstones older than ReconnectTimeout. They are
// in order of death, so the timer is armed for the oldest.
func (m *Machine) expireTombs(now time.Time) {
	for len(m.tombs) > 0 && !now.Before(m.tombs[0].since.Add(m.cfg.ReconnectTimeout)) {
		m.popTomb()
	}
	if len(m.tombs) > 0 {
		m.armAt(timerTombs, m.tombs[0].since.Add(m.cfg.ReconnectTimeout))
	}
}

// addTomb adds t, first dropping the oldest tombstones while MaxMembers
// are kept: bounded like the table they come from, so that invented
// members that die do not pile up for ReconnectTimeout.
func (m *Machine) addTomb(t *tombstone) {
	for len(m.tombByName) >= m.cfg.MaxMembers && len(m.tombs) > 0 {
		m.popTomb()
	}
	m.dropTomb(t.name)
	m.tombs = append(m.tombs, t)
	m.armAt(timerTombs, m.tombs[0].since.Add(m.cfg.ReconnectTimeout))
	m.tombByName[t.name] = t
	if !t.left {
		m.deadTombs++
	}
}

// nudge tells the member of tombstone t, at the address it had, that it
// was declared dead (or left) at t.inc, when stale news about it arrives: a
// live member that missed its death (the far side of a healed partition)
// refutes at once, and its refutation is newer than every tombstone that
// holds its news back; a member that is gone does not answer, and a replay
// costs one small packet to a member's old address. At most once per
// ProbeInterval per member.
func (m *Machine) nudge(now time.Time, t *tombstone) {
	if !t.nudged.IsZero() && now.Sub(t.nudged) < m.cfg.ProbeInterval {
		return
	}
	t.nudged = now
	m.stats.TombstoneNudges++
	m.send(t.addr, &wire.Dead{Name: t.name, Incarnation: t.inc, From: m.selfName, Left: t.left, Life: t.life})
}

// popTomb forgets the oldest tombstone, and with it the key the name was
// bound to (signed claims: a name stays with its key as long as it is
// remembered).
func (m *Machine) popTomb() {
	t := m.tombs[0]
	m.tombs[0] = nil
	m.tombs = m.tombs[1:]
	if !t.gone {
		m.dropTomb(t.name)
		m.sigs.Forget(t.name)
	}
}

// dropTomb forgets the tombstone of name, if any (the member is back).
func (m *Machine) dropTomb(name string) {
	t := m.tombByName[name]
	if t == nil {
		return
	}
	t.gone = true
	delete(m.tombByName, name)
	if !t.left {
		m.deadTombs--
	}
}
