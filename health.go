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
