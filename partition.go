package swim

import "time"

// The partition alarm (Apache Geode's quorum-loss check): this member
// raises EventPartitioned when the live members it sees fall, within
// PartitionWindow, below PartitionShare of the most it saw in that window,
// and EventPartitionHealed when they are back to that share of the count
// before the fall. A member on the minority side of a network partition
// sees most of its peers die within a few suspicion timeouts, and can stop
// serving; a cluster that shrinks slowly, or by graceful leaves, raises
// nothing.

// liveSample is the live count at a moment.
type liveSample struct {
	at    time.Time
	count int
}

// partitionAlarm is the alarm's state.
type partitionAlarm struct {
	// samples are the candidates for the window's peak: counts within
	// the window, oldest first, each greater than every later one (a
	// later, greater count makes the earlier ones irrelevant), so the
	// peak is the first and each change costs O(1) amortized.
	samples []liveSample
	raised  bool
	before  int // the window's peak when the alarm was raised
}

// notePartition records the live count after a change, and raises or
// clears the alarm. left says the change was a graceful leave, which is
// not a loss: it lowers the counts of the window too.
func (m *Machine) notePartition(now time.Time, left bool) {
	share := m.cfg.PartitionShare
	if share <= 0 {
		return
	}
	pa := &m.partition
	if left {
		for i := range pa.samples {
			pa.samples[i].count = max(pa.samples[i].count-1, 0)
		}
		if pa.raised {
			pa.before = max(pa.before-1, 0)
		}
	}
	count := m.NumMembers()
	cut := 0
	for cut < len(pa.samples) && now.Sub(pa.samples[cut].at) > m.cfg.PartitionWindow {
		cut++
	}
	keep := pa.samples[cut:]
	for len(keep) > 0 && keep[len(keep)-1].count <= count {
		keep = keep[:len(keep)-1]
	}
	pa.samples = append(keep, liveSample{at: now, count: count})
	peak := pa.samples[0].count
	threshold := func(of int) float64 { return share * float64(of) }
	switch {
	case !pa.raised && float64(count) < threshold(peak):
		pa.raised, pa.before = true, peak
		m.event(EventPartitioned, m.self)
	case pa.raised && float64(count) >= threshold(pa.before):
		pa.raised = false
		m.event(EventPartitionHealed, m.self)
	}
}

// Partitioned reports whether the partition alarm is raised.
func (m *Machine) Partitioned() bool { return m.partition.raised }
