package sim

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var massFailureN = flag.Int("massfailure", 0, "run TestMassFailureTraffic with this many members (make massfailure: 4,096, about a minute)")

// TestMassFailureTraffic crashes 1% of a converged, paired cluster at once
// and logs what the survivors send in 5 s windows from the crash: packets,
// Heartbeats, probes and fallback probes per member per second, and how
// many declarations of the deaths the survivors made themselves. It is a measurement (the
// figures are in docs/figures.md, "4,096 members in one process"); it
// fails only if a survivor still holds a crashed member alive or suspect, or
// holds a survivor anything but alive, 40 s after the crash.
func TestMassFailureTraffic(t *testing.T) {
	if *massFailureN == 0 {
		t.Skip("a measurement: make massfailure runs it at 4,096 members")
	}
	n := *massFailureN
	require.GreaterOrEqual(t, n, 200, "-massfailure: at least 200 members, so that 1% is two")
	s := newScenarioWith(t, Options{Seed: 3, NodeFactory: MachineFactory(lanConfig), DisableLog: true}, n, false)
	require.NoError(t, s.Converge())
	s.Run(40 * time.Second) // into paired rounds
	var crashed []string
	for k := range n / 100 {
		crashed = append(crashed, s.names[1+k*97%(n-1)]) // never the first member
	}
	live := without(s.names, crashed...)
	counters := []func(swim.Stats) uint64{
		func(st swim.Stats) uint64 { return st.PacketsSent },
		func(st swim.Stats) uint64 { return st.HeartbeatsSent },
		func(st swim.Stats) uint64 { return st.Probes },
		func(st swim.Stats) uint64 { return st.PairFallbacks },
		func(st swim.Stats) uint64 { return st.DeathsDeclared },
		func(st swim.Stats) uint64 { return st.FinalChecks },
		func(st swim.Stats) uint64 { return st.SuspicionsRaised },
		func(st swim.Stats) uint64 { return st.PingReqsSent },
		func(st swim.Stats) uint64 { return st.PushPulls },
		func(st swim.Stats) uint64 { return st.HolePushPulls },
		func(st swim.Stats) uint64 { return st.ViewDigestsDiffering },
	}
	// Summed over the survivors only: a crashed member's counters stop.
	sample := func() []uint64 {
		out := make([]uint64, len(counters))
		for i, c := range counters {
			out[i] = s.sumStats(live, c)
		}
		return out
	}
	const window = 5 * time.Second
	rate := func(from, to []uint64, i int) float64 {
		return float64(to[i]-from[i]) / float64(len(live)) / window.Seconds()
	}
	prev := sample()
	for _, c := range crashed {
		require.NoError(t, s.Crash(c))
	}
	start := prev
	for w := range 8 {
		s.Run(window)
		cur := sample()
		t.Logf("%2d-%2d s after the crash: per member per second %.2f packets, %.2f Heartbeats, %.2f probes, %.2f fallback probes, %.3f final checks, %.3f suspicions raised, %.2f ping-reqs, %.3f push-pulls (%.3f for holes), %.3f differing digests",
			w*5, w*5+5, rate(prev, cur, 0), rate(prev, cur, 1), rate(prev, cur, 2), rate(prev, cur, 3), rate(prev, cur, 5), rate(prev, cur, 6), rate(prev, cur, 7), rate(prev, cur, 8), rate(prev, cur, 9), rate(prev, cur, 10))
		prev = cur
	}
	t.Logf("%d crashed of %d: %d deaths declared by survivors on their own timers", len(crashed), n, prev[4]-start[4])
	// A member declared dead is dropped from Member's answers once
	// reaped: dead or unknown is right, alive or suspect is not.
	held := 0
	for _, o := range live {
		for _, c := range crashed {
			if got, ok := s.view(o, c); ok && got.State != swim.StateDead && got.State != swim.StateLeft {
				held++
			}
		}
	}
	require.Zero(t, held, "(survivor, crashed member) pairs still held alive or suspect")
	require.True(t, s.allSee(live, live, swim.StateAlive), "a survivor holds another survivor suspect or dead")
}
