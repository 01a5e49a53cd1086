package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/swim-go/swim"
)

// Metrics measures a run as it happens: the detection of every crash, the
// false suspicions and deaths of members that were running, the spread of
// tracked membership changes, traffic and broadcast drops. It is fed by the
// Cluster (every event, node start and crash) from NewMetrics until Stop,
// keeps no event log, and costs O(1) per event: on a 10,000-member cluster
// its memory is a few words per member plus N bits per crash and per
// tracked change while they are open.
//
// Definitions:
//
//   - A failure is a crash (Cluster.Crash, Restart, or a Churn crash) of a
//     member (a *swim.Machine) that had not left gracefully. Its observers are the members
//     running at that moment that saw it alive or suspect. FirstSuspect is
//     when the first member (anyone) suspected it, FirstDead when the first
//     declared it dead, AllKnow when the last observer still running
//     declared it dead (or left); all from the crash. An observer that
//     crashes first is no longer waited for. A restart ends the tracking:
//     if not everyone knew by then, the failure is marked Restarted.
//   - A suspicion or death is false when its subject was not crashed at the
//     time: a running member, even paused, starved, slow or cut off by a
//     partition, is alive, so a member declared dead during a pause longer
//     than PauseTolerance counts as a false death. Events about a restarted
//     member at an incarnation no newer than the one it crashed with are
//     about its previous life and are not false. One accusation (member
//     and incarnation) counts once however many members report it;
//     FalseSuspicionEvents and FalseDeathEvents count every report.
//   - Rates are per member-hour: the count over the time integral of the
//     number of running nodes, from NewMetrics to now (or Stop).
type Metrics struct {
	c       *Cluster
	start   int64
	end     int64 // when Stop was called
	stopped bool

	// the integral of the number of running nodes over time
	memberNanos float64
	lastUp      int64

	startCounters Counters
	startNode     []NodeCounters
	// startDropped is each running Machine's DeltasDropped when it was
	// first seen (at NewMetrics, or 0 when it started later); goneDropped
	// is what crashed Machines dropped since.
	startDropped []uint64
	goneDropped  uint64

	failures []*failureState
	open     map[int32]*failureState
	// crashInc is the incarnation each node had when it last crashed.
	crashInc map[int32]uint64

	falseSuspicions, falseDeaths           map[accusation]struct{}
	falseSuspicionEvents, falseDeathEvents uint64

	spreads []*Spread // still incomplete

	// final is what Traffic and DeltasDropped return after Stop.
	final struct {
		traffic Traffic
		dropped uint64
	}
}

type accusation struct {
	member int32
	inc    uint64
}

// NewMetrics starts measuring c from now. Several Metrics may watch one
// Cluster. For a steady-state measurement create it after the cluster has
// converged: a cold boot's joins and the false suspicions of a member that
// has not joined yet are then left out.
func NewMetrics(c *Cluster) *Metrics {
	m := &Metrics{
		c:               c,
		start:           c.now,
		lastUp:          c.now,
		startCounters:   c.counters,
		startNode:       make([]NodeCounters, len(c.nodes)),
		startDropped:    make([]uint64, len(c.nodes)),
		open:            make(map[int32]*failureState),
		crashInc:        make(map[int32]uint64),
		falseSuspicions: make(map[accusation]struct{}),
		falseDeaths:     make(map[accusation]struct{}),
	}
	for i, n := range c.nodes {
		m.startNode[i] = n.counters
		if mc := n.Machine(); n.up && mc != nil {
			m.startDropped[i] = mc.Stats().DeltasDropped
		}
	}
	c.metrics = append(c.metrics, m)
	return m
}

// Stop detaches m from the Cluster: it measures nothing after now, and its
// reports cover the time up to now.
func (m *Metrics) Stop() {
	if m.stopped {
		return
	}
	m.accrue()
	m.final.traffic = m.Traffic()
	m.final.dropped = m.DeltasDropped()
	m.end, m.stopped = m.c.now, true
	if i := slices.Index(m.c.metrics, m); i >= 0 {
		m.c.metrics = slices.Delete(m.c.metrics, i, i+1)
	}
}

func (m *Metrics) now() int64 {
	if m.stopped {
		return m.end
	}
	return m.c.now
}

// accrue adds the running nodes' time since the last change to the
// member-time integral; call it before the number changes.
func (m *Metrics) accrue() {
	if m.stopped {
		return
	}
	m.memberNanos += float64(m.c.up) * float64(m.c.now-m.lastUp)
	m.lastUp = m.c.now
}

// MemberHours is the time integral of the number of running nodes since
// NewMetrics, in hours.
func (m *Metrics) MemberHours() float64 {
	total := m.memberNanos
	if !m.stopped {
		total += float64(m.c.up) * float64(m.c.now-m.lastUp)
	}
	return total / float64(time.Hour)
}

// started is called when n starts (AddNode, Restart), after it is up.
func (c *Cluster) started(n *SimNode) {
	for _, m := range c.metrics {
		m.accrue()
	}
	c.up++
	for _, m := range c.metrics {
		m.started(n)
	}
}

func (m *Metrics) started(n *SimNode) {
	for len(m.startDropped) <= int(n.index) {
		m.startDropped = append(m.startDropped, 0)
	}
	m.startDropped[n.index] = 0 // a new Machine starts from nothing
	if f := m.open[n.index]; f != nil {
		delete(m.open, n.index)
		if !f.AllKnew {
			f.Restarted = true
		}
		f.release()
	}
}

// crashing is called when n is about to crash, while it is still up.
func (m *Metrics) crashing(n *SimNode) {
	m.accrue()
	var v viewer
	if n.node != nil {
		v, _ = n.node.(viewer)
	}
	if mc := n.Machine(); mc != nil {
		d := mc.Stats().DeltasDropped
		if int(n.index) < len(m.startDropped) {
			d -= min(d, m.startDropped[n.index])
			m.startDropped[n.index] = 0
		}
		m.goneDropped += d
	}
	// Who was waiting to learn something no longer needs to.
	for _, f := range m.open {
		if f.need.has(n.index) && !f.learned.has(n.index) {
			f.need.clear(n.index)
			f.pending--
			if f.check(m.c.now) {
				delete(m.open, f.subject)
			}
		}
	}
	for i := 0; i < len(m.spreads); {
		s := m.spreads[i]
		if s.need.has(n.index) && !s.learned.has(n.index) {
			s.need.clear(n.index)
			s.pending--
		}
		if s.pending == 0 {
			m.spreads = slices.Delete(m.spreads, i, i+1)
			continue
		}
		i++
	}
	if v == nil {
		return
	}
	self := v.LocalMember()
	m.crashInc[n.index] = self.Incarnation
	if self.State != swim.StateAlive {
		return // it left gracefully: not a failure
	}
	f := &failureState{Failure: Failure{Member: n.name, At: m.c.nowTime}, subject: n.index}
	f.need = newBitset(len(m.c.nodes))
	f.learned = newBitset(len(m.c.nodes))
	for _, o := range m.c.nodes {
		if !o.up || o == n {
			continue
		}
		ov, ok := o.node.(viewer)
		if !ok {
			continue
		}
		if got, ok := ov.Member(n.name); ok && (got.State == swim.StateAlive || got.State == swim.StateSuspect) {
			f.need.set(o.index)
			f.pending++
		}
	}
	f.Observers = f.pending
	f.check(m.c.now)
	m.failures = append(m.failures, f)
	if !f.AllKnew {
		m.open[n.index] = f
	}
}

// event is called with every event a node reports.
func (m *Metrics) event(n *SimNode, r *Record) {
	e := &r.Event
	if e.Kind == swim.EventSuspect || e.Kind == swim.EventLeave {
		m.accusation(n, e)
	}
	for i := 0; i < len(m.spreads); {
		s := m.spreads[i]
		if e.Kind == s.Kind && e.Member.Name == s.Member && s.need.has(n.index) && !s.learned.has(n.index) {
			s.learned.set(n.index)
			s.pending--
			s.arrivals = append(s.arrivals, time.Duration(m.c.now-s.start))
			if s.pending == 0 {
				m.spreads = slices.Delete(m.spreads, i, i+1)
				continue
			}
		}
		i++
	}
}

func (m *Metrics) accusation(observer *SimNode, e *swim.Event) {
	subject := m.c.byName[e.Member.Name]
	if subject == nil {
		return
	}
	if !subject.up {
		f := m.open[subject.index]
		if f == nil {
			return
		}
		since := time.Duration(m.c.now) - f.At.Sub(Epoch)
		switch e.Kind {
		case swim.EventSuspect:
			if !f.Suspected {
				f.Suspected, f.FirstSuspect = true, since
			}
		case swim.EventLeave:
			if !f.Declared && e.Member.State == swim.StateDead {
				f.Declared, f.FirstDead = true, since
			}
			if f.need.has(observer.index) && !f.learned.has(observer.index) {
				f.learned.set(observer.index)
				f.pending--
				f.Learned++
				if f.check(m.c.now) {
					delete(m.open, subject.index)
				}
			}
		}
		return
	}
	if inc, ok := m.crashInc[subject.index]; ok && e.Member.Incarnation <= inc {
		return // about its previous life
	}
	a := accusation{subject.index, e.Member.Incarnation}
	switch {
	case e.Kind == swim.EventSuspect:
		m.falseSuspicionEvents++
		m.falseSuspicions[a] = struct{}{}
	case e.Member.State == swim.StateDead:
		m.falseDeathEvents++
		m.falseDeaths[a] = struct{}{}
	}
}

// Failure is the detection timeline of one crash; see Metrics for the
// definitions. Durations are from the crash and valid when the matching
// flag is set.
type Failure struct {
	Member string
	At     time.Time // the crash
	// Observers is how many running members saw it alive or suspect at the
	// crash; Learned how many of them have declared it dead (or left).
	Observers, Learned int

	Suspected, Declared, AllKnew bool
	FirstSuspect                 time.Duration // first suspicion by anyone
	FirstDead                    time.Duration // first declared dead by anyone
	AllKnow                      time.Duration // the last observer still running declared it dead
	// Restarted: the member restarted before every observer knew.
	Restarted bool
}

type failureState struct {
	Failure
	subject       int32
	need, learned bitset
	pending       int
}

// check marks f known by all when nobody is left to learn; it reports
// whether f is complete.
func (f *failureState) check(now int64) bool {
	if f.pending > 0 || f.AllKnew {
		return f.AllKnew
	}
	f.AllKnew = true
	f.AllKnow = time.Duration(now) - f.At.Sub(Epoch)
	f.release()
	return true
}

func (f *failureState) release() { f.need, f.learned = nil, nil }

// Failures returns the crashes seen so far, in order, as they stand now.
func (m *Metrics) Failures() []Failure {
	out := make([]Failure, len(m.failures))
	for i, f := range m.failures {
		out[i] = f.Failure
	}
	return out
}

// Spread follows one membership change (a kind of event about one member)
// through the cluster: when each member that was running at TrackSpread
// reported it. It is updated as the run goes on.
type Spread struct {
	Member string
	Kind   swim.EventKind
	Start  time.Time

	start         int64
	need, learned bitset
	targets       int
	pending       int
	arrivals      []time.Duration
}

// TrackSpread follows, from now, the first event of the given kind about
// member at each node running now (member itself excepted): for a new
// member's join, call it just before the member joins (kind
// swim.EventJoin); for a death, just before the crash (swim.EventLeave).
// Track a change nobody has seen yet: a node that reported it before now
// reports it no more, and would be waited for forever. A node that
// crashes before it learns is not waited for.
func (m *Metrics) TrackSpread(member string, kind swim.EventKind) *Spread {
	c := m.c
	s := &Spread{Member: member, Kind: kind, Start: c.nowTime, start: c.now,
		need: newBitset(len(c.nodes)), learned: newBitset(len(c.nodes))}
	for _, n := range c.nodes {
		if n.up && n.name != member {
			s.need.set(n.index)
			s.targets++
		}
	}
	s.pending = s.targets
	if s.pending > 0 && !m.stopped {
		m.spreads = append(m.spreads, s)
	}
	return s
}

// Targets is how many nodes must learn the change: those running at the
// start, less those that crashed before they learned.
func (s *Spread) Targets() int { return s.pending + len(s.arrivals) }

// Known is how many nodes have learned it.
func (s *Spread) Known() int { return len(s.arrivals) }

// Complete reports whether every target has learned it.
func (s *Spread) Complete() bool { return s.pending == 0 }

// TimeTo is how long after Start a fraction (0, 1] of the targets knew;
// false if that has not happened yet.
func (s *Spread) TimeTo(fraction float64) (time.Duration, bool) {
	need := int(math.Ceil(fraction*float64(s.Targets()) - 1e-9))
	if need <= 0 {
		return 0, true
	}
	if need > len(s.arrivals) {
		return 0, false
	}
	return s.arrivals[need-1], true
}

// Curve is the dissemination curve: element k is the fraction of the
// targets that knew by Start + (k+1)·period. It ends at the first period by
// which all knew, or at the last period with an arrival while incomplete.
func (s *Spread) Curve(period time.Duration) []float64 {
	if period <= 0 || len(s.arrivals) == 0 {
		return nil
	}
	last := s.arrivals[len(s.arrivals)-1]
	periods := int(last/period) + 1
	out := make([]float64, periods)
	total := float64(s.Targets())
	j := 0
	for k := range out {
		end := time.Duration(k+1) * period
		for j < len(s.arrivals) && s.arrivals[j] < end {
			j++
		}
		out[k] = float64(j) / total
	}
	return out
}

// FormatCurve renders a curve as "1:0.12 2:0.45 ...", periods counted
// from 1.
func FormatCurve(curve []float64) string {
	var b strings.Builder
	for k, f := range curve {
		if k > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%.3f", k+1, f)
	}
	return b.String()
}

// Traffic is what the nodes sent over a window, in total and per member and
// second (over the member-time integral, so crashed members do not count).
type Traffic struct {
	Window                                 time.Duration
	PacketsSent, BytesSent                 uint64
	PacketsDelivered, BytesDelivered       uint64
	StreamsStarted                         uint64
	PacketsPerMemberSecond                 float64 // sent
	BytesPerMemberSecond                   float64 // sent
	Busiest                                string  // the node that sent the most bytes
	BusiestBytesPerSecond                  float64 // ... per second of the window
	DroppedLoss, DroppedPartition, Dropped uint64  // packets the network dropped
}

// Traffic returns the traffic since NewMetrics.
func (m *Metrics) Traffic() Traffic {
	if m.stopped {
		return m.final.traffic
	}
	c := m.c
	now := c.counters
	t := Traffic{
		Window:           time.Duration(c.now - m.start),
		PacketsSent:      now.PacketsSent - m.startCounters.PacketsSent,
		BytesSent:        now.BytesSent - m.startCounters.BytesSent,
		PacketsDelivered: now.PacketsDelivered - m.startCounters.PacketsDelivered,
		BytesDelivered:   now.BytesDelivered - m.startCounters.BytesDelivered,
		StreamsStarted:   now.StreamsStarted - m.startCounters.StreamsStarted,
		DroppedLoss:      now.DroppedLoss - m.startCounters.DroppedLoss,
		DroppedPartition: now.DroppedPartition - m.startCounters.DroppedPartition,
		Dropped:          now.Dropped() - m.startCounters.Dropped(),
	}
	if ms := m.MemberHours() * 3600; ms > 0 {
		t.PacketsPerMemberSecond = float64(t.PacketsSent) / ms
		t.BytesPerMemberSecond = float64(t.BytesSent) / ms
	}
	var most uint64
	for i, n := range c.nodes {
		sent := n.counters.BytesSent
		if i < len(m.startNode) {
			sent -= m.startNode[i].BytesSent
		}
		if sent > most {
			most, t.Busiest = sent, n.name
		}
	}
	if t.Window > 0 {
		t.BusiestBytesPerSecond = float64(most) / t.Window.Seconds()
	}
	return t
}

// DeltasDropped is how many deltas the members' broadcast queues
// dropped (over DeltaQueueLimit) since NewMetrics, crashed members
// included.
func (m *Metrics) DeltasDropped() uint64 {
	if m.stopped {
		return m.final.dropped
	}
	total := m.goneDropped
	for i, n := range m.c.nodes {
		mc := n.Machine()
		if !n.up || mc == nil {
			continue
		}
		d := mc.Stats().DeltasDropped
		if i < len(m.startDropped) {
			d -= min(d, m.startDropped[i])
		}
		total += d
	}
	return total
}

// FalseSuspicions counts the distinct false suspicions so far (member and
// incarnation; see Metrics), and FalseSuspicionEvents every report of one.
func (m *Metrics) FalseSuspicions() int { return len(m.falseSuspicions) }

// FalseDeaths counts the distinct false deaths so far.
func (m *Metrics) FalseDeaths() int { return len(m.falseDeaths) }

// FalseSuspicionEvents counts every member's report of a false suspicion.
func (m *Metrics) FalseSuspicionEvents() uint64 { return m.falseSuspicionEvents }

// FalseDeathEvents counts every member's report of a false death.
func (m *Metrics) FalseDeathEvents() uint64 { return m.falseDeathEvents }

// FalselyDead returns the names of the members falsely declared dead, each
// once, sorted.
func (m *Metrics) FalselyDead() []string {
	var out []string
	for a := range m.falseDeaths {
		out = append(out, m.c.nodes[a.member].name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DurationStats summarizes a sample of durations. Percentiles are nearest-
// rank: P99 of 10 values is the largest.
type DurationStats struct {
	N                       int
	Min, P50, P90, P99, Max time.Duration
	Mean                    time.Duration
}

// Summarize computes the DurationStats of ds (the zero value if empty).
func Summarize(ds []time.Duration) DurationStats {
	if len(ds) == 0 {
		return DurationStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum float64
	for _, d := range s {
		sum += float64(d)
	}
	return DurationStats{
		N: len(s), Min: s[0], Max: s[len(s)-1],
		P50: Percentile(s, 0.50), P90: Percentile(s, 0.90), P99: Percentile(s, 0.99),
		Mean: time.Duration(sum / float64(len(s))),
	}
}

// Percentile is the nearest-rank p-quantile, p in [0, 1], of sorted
// durations (0 if empty).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (d DurationStats) String() string {
	if d.N == 0 {
		return "n=0"
	}
	r := func(x time.Duration) time.Duration { return x.Round(time.Millisecond) }
	return fmt.Sprintf("n=%d p50 %v p90 %v p99 %v max %v", d.N, r(d.P50), r(d.P90), r(d.P99), r(d.Max))
}

// Detection summarizes the failures: how many there were, how many were
// suspected, declared dead, known by all, and the latencies of those that
// were.
type Detection struct {
	Crashes, Suspected, Declared, AllKnew, Restarted int
	FirstSuspect, FirstDead, AllKnow                 DurationStats
}

// Detection summarizes the failures so far.
func (m *Metrics) Detection() Detection {
	var d Detection
	var sus, dead, all []time.Duration
	for _, f := range m.failures {
		d.Crashes++
		if f.Suspected {
			d.Suspected++
			sus = append(sus, f.FirstSuspect)
		}
		if f.Declared {
			d.Declared++
			dead = append(dead, f.FirstDead)
		}
		if f.AllKnew {
			d.AllKnew++
			all = append(all, f.AllKnow)
		}
		if f.Restarted {
			d.Restarted++
		}
	}
	d.FirstSuspect, d.FirstDead, d.AllKnow = Summarize(sus), Summarize(dead), Summarize(all)
	return d
}

// Report is everything Metrics measured, at one point of the run.
type Report struct {
	Start       time.Time
	Window      time.Duration
	MemberHours float64
	Detection   Detection

	FalseSuspicions, FalseDeaths                           int // distinct accusations
	FalseSuspicionEvents, FalseDeathEvents                 uint64
	FalseSuspicionsPerMemberHour, FalseDeathsPerMemberHour float64

	Traffic       Traffic
	DeltasDropped uint64
}

// Report returns what was measured so far.
func (m *Metrics) Report() Report {
	r := Report{
		Start:                Epoch.Add(time.Duration(m.start)),
		Window:               time.Duration(m.now() - m.start),
		MemberHours:          m.MemberHours(),
		Detection:            m.Detection(),
		FalseSuspicions:      len(m.falseSuspicions),
		FalseDeaths:          len(m.falseDeaths),
		FalseSuspicionEvents: m.falseSuspicionEvents,
		FalseDeathEvents:     m.falseDeathEvents,
		Traffic:              m.Traffic(),
		DeltasDropped:        m.DeltasDropped(),
	}
	if r.MemberHours > 0 {
		r.FalseSuspicionsPerMemberHour = float64(r.FalseSuspicions) / r.MemberHours
		r.FalseDeathsPerMemberHour = float64(r.FalseDeaths) / r.MemberHours
	}
	return r
}

func (r Report) String() string {
	var b strings.Builder
	d := r.Detection
	fmt.Fprintf(&b, "window %v, %.3g member-hours\n", r.Window, r.MemberHours)
	fmt.Fprintf(&b, "crashes %d: suspected %d, declared dead %d, known by all %d, restarted first %d\n",
		d.Crashes, d.Suspected, d.Declared, d.AllKnew, d.Restarted)
	fmt.Fprintf(&b, "  first suspect %v\n  first dead    %v\n  all know      %v\n", d.FirstSuspect, d.FirstDead, d.AllKnow)
	fmt.Fprintf(&b, "false suspicions %d (%d reports, %.3g per member-hour); false deaths %d (%d reports, %.3g per member-hour)\n",
		r.FalseSuspicions, r.FalseSuspicionEvents, r.FalseSuspicionsPerMemberHour,
		r.FalseDeaths, r.FalseDeathEvents, r.FalseDeathsPerMemberHour)
	t := r.Traffic
	fmt.Fprintf(&b, "traffic: %.1f packets and %.0f bytes sent per member-second (busiest %s: %.0f B/s); %d dropped by the network\n",
		t.PacketsPerMemberSecond, t.BytesPerMemberSecond, t.Busiest, t.BusiestBytesPerSecond, t.Dropped)
	fmt.Fprintf(&b, "broadcasts dropped by full queues: %d", r.DeltasDropped)
	return b.String()
}

// bitset is a set of node indexes.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int32) bool {
	w := int(i) / 64
	return w < len(b) && b[w]&(1<<(uint(i)%64)) != 0
}

func (b bitset) set(i int32) { b[int(i)/64] |= 1 << (uint(i) % 64) }

func (b bitset) clear(i int32) {
	if w := int(i) / 64; w < len(b) {
		b[w] &^= 1 << (uint(i) % 64)
	}
}
