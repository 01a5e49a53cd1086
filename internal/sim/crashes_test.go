package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// TestCrashesInTurn crashes members one after another, each as soon as
// every survivor knows the one before dead, as the chaos suite does. Every
// survivor's ring changes at that moment, and a member changing from
// paired rounds to probing and back must not leave the next victim
// unchecked for rounds: each crash must be first suspected within two
// probe rounds (its first check within one, and the probe's verdict a
// round after it starts; half a ProbeTimeout of margin for a prober's
// health) and known to all within the bound of TestDetectionLatency.
// Before the modes overlapped, a member changing mode mid-round left
// victims unchecked for up to three rounds more (4.4 s to the first
// suspicion, 8.5 s until all knew).
func TestCrashesInTurn(t *testing.T) {
	cfg := swim.DefaultLANConfig()
	const n, crashes, seeds = 32, 4, 12
	var worstSuspect, worstAll time.Duration
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			var (
				victim    string
				crash     time.Time
				suspected time.Duration
			)
			opts := Options{Seed: seed, NodeFactory: MachineFactory(lanConfig), DisableLog: true, CheckInterval: 10 * time.Millisecond,
				OnEvent: func(r Record) {
					if victim != "" && r.Event.Member.Name == victim && !r.At.Before(crash) &&
						r.Event.Kind == swim.EventSuspect && suspected < 0 {
						suspected = r.At.Sub(crash)
					}
				}}
			s := newScenarioWith(t, opts, n, true)
			require.True(t, s.RunUntil(s.converged, time.Minute), "no convergence")
			// Into paired rounds, and to a point in the round that
			// differs by seed.
			s.Run(20*time.Second + time.Duration(seed)*137*time.Millisecond)
			rng := rand.New(rand.NewPCG(seed, 7))
			live := slices.Clone(s.names)
			for i := range crashes {
				k := 1 + rng.IntN(len(live)-1) // never the seed member
				victim, crash, suspected = live[k], s.Now(), -1
				live = slices.Delete(live, k, k+1)
				require.NoError(t, s.Crash(victim))
				require.True(t, s.RunUntil(func() bool { return s.allSee(live, []string{victim}, swim.StateDead) }, time.Minute),
					"crash %d: %s never known dead by all", i+1, victim)
				all := s.Now().Sub(crash)
				t.Logf("crash %d: %s first suspected after %v, known dead by all after %v", i+1, victim, suspected, all)
				worstSuspect, worstAll = max(worstSuspect, suspected), max(worstAll, all)
				require.LessOrEqual(t, suspected, 2*cfg.ProbeInterval+cfg.ProbeTimeout/2, "crash %d: %s suspected late", i+1, victim)
				// The window counts from where two members saw the
				// silence (suspicion.windowStart): the first accuser's
				// ping-req helpers, a probe timeout into its probe, as
				// their confirmations claim up to a gossip interval late
				// (TestDetectionLatency).
				require.LessOrEqual(t, all-suspected, cfg.PauseTolerance+cfg.ProbeTimeout+cfg.GossipInterval, "crash %d: %s known late", i+1, victim)
			}
		})
	}
	t.Logf("over %d seeds of %d crashes in turn at %d members: first suspicion at most %v, known by all at most %v",
		seeds, crashes, n, worstSuspect, worstAll)
}
