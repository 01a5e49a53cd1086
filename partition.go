package swim

import "time"

// The partition alarm (Apache Geode's quorum-loss check): this member
// raises EventPartitioned when the live members it sees fall, within
// Partition.Window, below Partition.Share of the most it saw in that window,
// and EventPartitionHealed when they are back to that share of the count
// before the fall. A member on the minority side of a network partition
// sees most of its peers die within a few suspicion timeouts, and can stop
// serving; a cluster that shrinks slowly, or by graceful leaves, raises
// nothing.

// liveSample is the live count at a moment.
type liveSample struct {
	at time.Time
	// count is the live count then plus the leaves noted before it
	// (partitionAlarm.leaves): a leave lowers every count in the window
	// by one, which subtracting the leaves since does without touching
	// the samples.
	count int
}

// partitionAlarm is the alarm's state.
type partitionAlarm struct {
	// samples are the candidates for the window's peak: counts within
	// the window, oldest first, each greater than every later one (a
	// later, greater count makes the earlier ones irrelevant), so the
	// peak is the first and each change costs O(1) amortized. After a
	// mass failure they are as many as the deaths in the window.
	samples []liveSample
	leaves  int // graceful leaves noted
	raised  bool
	before  int // the window's peak when the alarm was raised, plus the leaves then
}

// countOf is what a count recorded as c (with the leaves before it added)
// is now that leaves have been noted: it went down by one with each leave
// since, to no less than zero.
func (pa *partitionAlarm) countOf(c int) int { return max(c-pa.leaves, 0) }

// notePartition records the live count after a change, and raises or
// clears the alarm. left says the change was a graceful leave, which is
// not a loss: it lowers the counts of the window too.
func (m *Machine) notePartition(now time.Time, left bool) {
	share := m.cfg.Partition.Share
	if share <= 0 {
		return
	}
	switch m.partition.note(now, m.NumMembers(), left, share, m.cfg.Partition.Window) {
	case alarmRaised:
		m.event(EventPartitioned, m.self)
	case alarmCleared:
		m.event(EventPartitionHealed, m.self)
	}
}

type alarmChange uint8

const (
	alarmSame alarmChange = iota
	alarmRaised
	alarmCleared
)

// note records the live count at now (after a graceful leave if left) and
// says whether the alarm was raised or cleared.
func (pa *partitionAlarm) note(now time.Time, count int, left bool, share float64, window time.Duration) alarmChange {
	if left {
		pa.leaves++
	}
	cut := 0
	for cut < len(pa.samples) && now.Sub(pa.samples[cut].at) > window {
		cut++
	}
	keep := pa.samples[cut:]
	for len(keep) > 0 && pa.countOf(keep[len(keep)-1].count) <= count {
		keep = keep[:len(keep)-1]
	}
	pa.samples = append(keep, liveSample{at: now, count: count + pa.leaves})
	peak := pa.countOf(pa.samples[0].count)
	threshold := func(of int) float64 { return share * float64(of) }
	switch {
	case !pa.raised && float64(count) < threshold(peak):
		pa.raised, pa.before = true, peak+pa.leaves
		return alarmRaised
	case pa.raised && float64(count) >= threshold(pa.countOf(pa.before)):
		pa.raised = false
		return alarmCleared
	}
	return alarmSame
}
