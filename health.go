package swim

import "time"

// Local health (Lifeguard §IV-A). A member that cannot keep up (CPU
// starvation, a saturated NIC, a GC pause) misses acks that did arrive and
// would accuse healthy peers. Its own failures are the evidence: failed
// probes, nacks that should have come back, and accusations against itself
// that it had to refute. The score saturates at AwarenessMaxMultiplier-1,
// and the probe interval and timeout scale by score+1, so an unhealthy
// member probes less often and waits longer before accusing anyone.

// HealthScore is this member's local health: 0 is healthy, higher means it
// has been failing to hear from peers it should hear from.
func (m *Machine) HealthScore() int { return m.health }

// adjustHealth moves the score by delta within its bounds.
func (m *Machine) adjustHealth(delta int) {
	limit := m.cfg.AwarenessMaxMultiplier - 1
	if limit < 0 {
		limit = 0
	}
	m.health = min(max(m.health+delta, 0), limit)
}

// scaled multiplies a protocol duration by the health factor.
func (m *Machine) scaled(d time.Duration) time.Duration {
	return d * time.Duration(m.health+1)
}

// Late timers. Lifeguard's evidence (missed acks and nacks) reaches a
// starved member only after the fact; the clock tells it at once. When the
// machine's timers are handled well after they were due, this member was
// not running: an ack may be waiting unread in its socket, and the peer it
// waited for had less time to answer than the timeout says. Decisions that
// end in an accusation are then deferred, not taken: a probe that ends
// while late accuses no one, and a final check that expires while late is
// run again. Each late tick is also one point of health score, so a member
// that keeps waking late probes less and waits longer, which sheds the very
// load that starves it. A member that never wakes late, as in the
// simulator, is unaffected.
//
// Only a real-time driver can be late: Memberlist sets watchClock. The
// simulator and the tests call Tick at times of their choosing, often well
// past a deadline on purpose, and are taken at their word.

// lateSlack is how late a timer may fire before it counts: a fifth of
// ProbeTimeout, far above the scheduling jitter of a healthy process.
func (m *Machine) lateSlack() time.Duration { return m.cfg.ProbeTimeout / 5 }

// noteLateness records, at the start of Tick, whether the earliest deadline
// was handled late.
func (m *Machine) noteLateness(now time.Time) {
	if !m.watchClock {
		return
	}
	due := m.NextDeadline()
	m.late = !due.IsZero() && now.Sub(due) > m.lateSlack()
	if m.late {
		m.stats.LateTicks++
		m.adjustHealth(1)
	}
}
