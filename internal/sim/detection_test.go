package sim

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var (
	detectSeeds = flag.Int("detect.seeds", 20, "seeds per cluster size in TestDetectionLatency")
	detectSizes = flag.String("detect.sizes", "64", "comma-separated cluster sizes in TestDetectionLatency")
)

// detection is one crash's timeline, measured from the crash.
type detection struct {
	converge                         time.Duration // all joined through one seed at once
	firstSuspect, firstDead, allKnow time.Duration
}

// measureDetection converges n members, crashes one, and times how long
// until the first member suspects it, the first declares it dead, and the
// last survivor learns it. It keeps no event log (a 1,000-member boot logs
// a million joins), only the events about the victim.
func measureDetection(t testing.TB, seed uint64, n int, config func(string) *swim.Config) (detection, bool) {
	var (
		victim    string
		crash     time.Time
		d         detection
		suspected bool
		declared  bool
	)
	opts := Options{Seed: seed, NodeFactory: MachineFactory(config), DisableLog: true, CheckInterval: 50 * time.Millisecond,
		OnEvent: func(r Record) {
			if victim == "" || r.Event.Member.Name != victim || r.At.Before(crash) {
				return
			}
			switch {
			case r.Event.Kind == swim.EventSuspect && !suspected:
				suspected, d.firstSuspect = true, r.At.Sub(crash)
			case r.Event.Kind == swim.EventLeave && !declared:
				declared, d.firstDead = true, r.At.Sub(crash)
			}
		}}
	s := newScenarioWith(t, opts, n, true)
	c := s.Cluster
	if !s.RunUntil(s.converged, 3*time.Minute) {
		return detection{}, false
	}
	d.converge = s.Elapsed()
	s.Run(5 * time.Second) // let the join gossip settle
	victim = s.names[1+int(seed)%(n-1)]
	crash = s.Now()
	require.NoError(t, s.Crash(victim))
	survivors := without(s.names, victim)
	c.opts.CheckInterval = 10 * time.Millisecond
	if !s.RunUntil(func() bool { return s.allSee(survivors, []string{victim}, swim.StateDead) }, 2*time.Minute) {
		return detection{}, false
	}
	d.allKnow = s.Now().Sub(crash)
	return d, true
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

// TestDetectionLatency measures crash detection with LAN defaults over
// several seeds and checks it against what the protocol promises. With
// aligned probing the crashed member's first probe starts within one
// ProbeInterval of the crash; the suspicion is timed from that probe's
// start and, confirmed by the other probers, lasts PauseTolerance; the final
// check decides ProbeTimeout/5 after the window; every member holding the
// suspicion decides at about that moment, and the death gossip reaches the
// others within a few hundred milliseconds. So every survivor should know
// within ProbeInterval + PauseTolerance + ProbeTimeout/5 (6.1 s at LAN
// defaults) plus the spread.
//
// The bound on the slowest seed allows a whole ProbeTimeout instead of a
// fifth of it (6.5 s), 0.4 s for the spread: the slowest of 50 seeds at 64
// members took 6.17 s (the death reaching everyone 91 ms after the first
// member declared it), the slowest of 4 at 1,000 members 5.94 s (205 ms).
// A crash lands on average half way through a probe round, so the median
// is held to ProbeInterval + PauseTolerance (6.0 s; measured 5.65 s at 64
// members, 5.92 s at 1,000). Without aligned probing, whose first probe can
// come several rounds late, 8 seeds at 64 members fail both (8.1 s slowest,
// 6.4 s median).
//
// Figures for the README: go test ./internal/sim -run DetectionLatency -v -detect.seeds 50 -detect.sizes 64,1000
func TestDetectionLatency(t *testing.T) {
	cfg := swim.DefaultLANConfig()
	for _, n := range parseSizes(t, *detectSizes) {
		results := make([]detection, *detectSeeds)
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			for i := range results {
				// One subtest per seed, so each cluster is released when
				// it ends; two at a time on two cores.
				t.Run(fmt.Sprintf("seed=%d", i+1), func(t *testing.T) {
					t.Parallel()
					d, ok := measureDetection(t, uint64(i+1), n, lanConfig)
					require.True(t, ok, "n=%d seed=%d: no convergence or no detection", n, i+1)
					results[i] = d
				})
			}
		})
		if t.Failed() {
			return
		}
		var conv, sus, susp, dead, spread, all []time.Duration
		for _, d := range results {
			conv = append(conv, d.converge)
			sus = append(sus, d.firstSuspect)
			susp = append(susp, d.firstDead-d.firstSuspect)
			dead = append(dead, d.firstDead)
			spread = append(spread, d.allKnow-d.firstDead)
			all = append(all, d.allKnow)
		}
		ms := func(ds []time.Duration, p float64) time.Duration { return percentile(ds, p).Round(time.Millisecond) }
		t.Logf("n=%d seeds=%d crash until everyone knows: p50 %v p99 %v max %v", n, len(all), ms(all, .5), ms(all, .99), ms(all, 1))
		t.Logf("n=%d   until first failed probe (first suspect) p50 %v p99 %v; suspicion to first death p50 %v p99 %v; first death to everyone p50 %v p99 %v",
			n, ms(sus, .5), ms(sus, .99), ms(susp, .5), ms(susp, .99), ms(spread, .5), ms(spread, .99))
		t.Logf("n=%d   first death p50 %v p99 %v; convergence of a cold boot (all join one seed at once) p50 %v max %v",
			n, ms(dead, .5), ms(dead, .99), ms(conv, .5), ms(conv, 1))
		bound := cfg.ProbeInterval + cfg.PauseTolerance + cfg.ProbeTimeout
		require.LessOrEqual(t, percentile(all, 1), bound,
			"n=%d: a crash took longer than a probe round, the pause tolerance and a probe timeout to reach everyone", n)
		median := cfg.ProbeInterval + cfg.PauseTolerance
		require.LessOrEqual(t, percentile(all, .5), median,
			"n=%d: the median crash took longer than a probe round and the pause tolerance to reach everyone", n)
	}
}

func parseSizes(t testing.TB, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err, "bad -detect.sizes %q", s)
		out = append(out, n)
	}
	return out
}
