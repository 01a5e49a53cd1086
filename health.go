package swim

import "time"

// Local health (Lifeguard §IV-A). A member that cannot keep up (CPU
// starvation, a saturated NIC, a GC pause) misses acks that did arrive and
// would accuse healthy peers. Its own failures are the evidence: failed
// probes, nacks that should have come back, and accusations against itself
// that it had to refute. The score saturates at AwarenessMaxMultiplier-1,
// and the probe interval and timeout scale by score+1, so an unhealthy
// member probes less often and waits longer before accusing anyone.

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

// Late decisions. Lifeguard's evidence (missed acks and nacks) reaches a
// starved member only after the fact; the clock tells it at once. When a
// timer that ends in an accusation is handled well after it was due, this
// member was not running: an ack may be waiting unread in its socket, and
// the peer it waited for had less time to answer than the timeout says. The
// decision is then deferred, not taken: a probe that ends late accuses no
// one, and a final check that expires late is run again. Each late decision
// is also one point of health score, so a member that keeps waking late
// probes less and waits longer, which sheds the very load that starves it.
//
// Lateness is measured against the decision's own deadline, not against
// NextDeadline: some of the machine's times are "not before" marks (the
// next gossip round, say) that lie in the past until there is work.
//
// Only a real-time driver can be late: Memberlist sets WatchClock. The
// simulator and the tests call Tick at times of their choosing, often well
// past a deadline on purpose, and are taken at their word.

// lateSlack is how late a decision may be taken before it counts: a fifth
// of ProbeTimeout, far above the scheduling jitter of a healthy process.
func (m *Machine) lateSlack() time.Duration { return m.cfg.ProbeTimeout / 5 }

// lateFor reports whether a decision due at due, taken at now, comes too
// late to trust our own silence, and counts it against our health.
func (m *Machine) lateFor(due, now time.Time) bool {
	if !m.watchClock || now.Sub(due) <= m.lateSlack() {
		return false
	}
	m.adjustHealth(1)
	return true
}
