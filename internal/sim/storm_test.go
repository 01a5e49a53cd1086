package sim

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var stormScenario = flag.Bool("storm", false, "run TestScenarioSuspicionsInAJoinStorm (make test runs it without the race detector, under which it takes five minutes)")

// stormRun boots n members through one seed, the joins spread evenly over
// join; at pauseAt (if not zero) five members that joined stop for 3 s (a
// GC pause), long enough to be suspected, and refute when they resume. It
// returns the scenario 30 s after the last join, the paused members, and
// the packets the cluster sent in the 10 s from pauseAt.
func stormRun(t *testing.T, n int, join, pauseAt time.Duration, pause bool) (s *scenario, paused []string, packets uint64) {
	opts := Options{Seed: 7, NodeFactory: MachineFactory(lanConfig), DisableLog: true}
	s = newScenarioWith(t, opts, n, false)
	sent := func() uint64 { return s.sumStats(s.names, func(st swim.Stats) uint64 { return st.PacketsSent }) }
	var from uint64
	for i, name := range s.names[1:] {
		s.Run(join*time.Duration(i+1)/time.Duration(n-1) - s.Elapsed())
		s.join(name, s.Addr(s.names[0]))
		switch {
		case s.Elapsed() >= pauseAt && from == 0:
			from = sent()
			for k := range 5 {
				victim := s.names[100+100*k]
				if pause {
					require.NoError(t, s.Pause(victim, 3*time.Second))
				}
				paused = append(paused, victim)
			}
		case s.Elapsed() >= pauseAt+10*time.Second && packets == 0:
			packets = sent() - from
		}
	}
	s.Run(30 * time.Second)
	return s, paused, packets
}

// TestScenarioSuspicionsInAJoinStorm: 1,536 members boot through one seed,
// 17 joins a second; past 1,024 members (where a storm spaces its rounds,
// joinstorm.go), five members stop for 3 s, are suspected, and refute.
// The suspicions and refutations are relayed at the storm's pace: the 10 s
// they are in flight cost the cluster few packets more than the same 10 s
// of the same boot without the pauses (every member relaying them at one
// round per GossipInterval sent 8% more), and no one is declared dead.
func TestScenarioSuspicionsInAJoinStorm(t *testing.T) {
	if !*stormScenario {
		t.Skip("1,536 members booting twice, 35 s (5 min under -race): make test runs it with -storm")
	}
	const n, join, at = 1536, 90 * time.Second, 65 * time.Second
	_, _, quiet := stormRun(t, n, join, at, false)
	s, paused, loud := stormRun(t, n, join, at, true)
	sum := func(names []string, counter func(swim.Stats) uint64) uint64 { return s.sumStats(names, counter) }

	raised := sum(s.names, func(st swim.Stats) uint64 { return st.SuspicionsRaised })
	refuted := sum(paused, func(st swim.Stats) uint64 { return st.Refutations })
	deaths := sum(s.names, func(st swim.Stats) uint64 { return st.DeathsDeclared })
	extra := float64(loud)/float64(quiet) - 1
	t.Logf("packets in the 10 s from the pauses: %d, without them %d (%+.1f%%); suspicions raised %d, refutations by the paused %d, deaths declared %d",
		loud, quiet, 100*extra, raised, refuted, deaths)
	require.GreaterOrEqual(t, refuted, uint64(len(paused)), "a paused member did not refute: the test tests nothing")
	require.Zero(t, deaths, "members declared dead in a storm (paused: %v)", paused)
	require.Less(t, extra, 0.1, "the suspicions cost the cluster more than a tenth more packets")

	// And the storm itself: each member opens a round of GossipNodes
	// packets once per joinStormGap (400 ms: the window is between 1,024
	// and 1,536 members), and sends about two packets a second more
	// probing and answering. Relaying other news, the newcomers' first
	// alives among it, at one round per GossipInterval came to 13.9 a
	// second each.
	cfg := swim.DefaultLANConfig()
	members := float64(n) * float64(at+5*time.Second) / float64(join) // at mid-window
	perMember := float64(quiet) / members / 10
	bound := float64(cfg.GossipNodes)/(2*cfg.GossipInterval).Seconds() + 3
	t.Logf("%.1f packets per member per second in the storm (bound %.1f)", perMember, bound)
	require.Less(t, perMember, bound, "the storm's rounds are not paced")
}
