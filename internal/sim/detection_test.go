package sim

import (
	"flag"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var (
	detectSeeds = flag.Int("detect.seeds", 8, "seeds per cluster size in TestDetectionLatency")
	detectSizes = flag.String("detect.sizes", "64", "comma-separated cluster sizes in TestDetectionLatency")
)

// detection is one crash's timeline, measured from the crash.
type detection struct {
	converge                         time.Duration // all joined through one seed at once
	firstSuspect, firstDead, allKnow time.Duration
}

// measureDetection converges n members, crashes one, and times how long
// until the first member suspects it, the first declares it dead, and the
// last survivor learns it.
func measureDetection(t testing.TB, seed uint64, n int, config func(string) *swim.Config) (detection, bool) {
	s := newScenario(t, seed, n, config, true)
	s.opts.CheckInterval = 50 * time.Millisecond
	if !s.RunUntil(s.converged, 3*time.Minute) {
		return detection{}, false
	}
	converge := s.Elapsed()
	s.Run(5 * time.Second) // let the join gossip settle
	victim := s.names[1+int(seed)%(n-1)]
	crash := s.Now()
	require.NoError(t, s.Crash(victim))
	survivors := without(s.names, victim)
	s.opts.CheckInterval = 10 * time.Millisecond
	if !s.RunUntil(func() bool { return s.allSee(survivors, []string{victim}, swim.StateDead) }, 2*time.Minute) {
		return detection{}, false
	}
	d := detection{converge: converge, allKnow: s.Now().Sub(crash)}
	about := s.Log().About(victim).Since(crash)
	if r, ok := about.Kind(swim.EventSuspect).First(); ok {
		d.firstSuspect = r.At.Sub(crash)
	}
	if r, ok := about.Kind(swim.EventLeave).First(); ok {
		d.firstDead = r.At.Sub(crash)
	}
	return d, true
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

// TestDetectionLatency measures crash detection with LAN defaults over
// several seeds and checks it against the accuracy target: every survivor
// knows within the pause tolerance plus a few probe periods. Figures for the
// README: go test ./internal/sim -run DetectionLatency -v -detect.seeds 50 -detect.sizes 64,1000
func TestDetectionLatency(t *testing.T) {
	cfg := swim.DefaultLANConfig()
	for _, n := range parseSizes(t, *detectSizes) {
		var conv, sus, dead, all []time.Duration
		for seed := uint64(1); seed <= uint64(*detectSeeds); seed++ {
			d, ok := measureDetection(t, seed, n, lanConfig)
			require.True(t, ok, "n=%d seed=%d: no convergence or no detection", n, seed)
			conv = append(conv, d.converge)
			sus = append(sus, d.firstSuspect)
			dead = append(dead, d.firstDead)
			all = append(all, d.allKnow)
		}
		t.Logf("n=%d seeds=%d  first suspect p50 %v p99 %v | first dead p50 %v p99 %v | everyone knows p50 %v p99 %v",
			n, len(all), percentile(sus, .5).Round(time.Millisecond), percentile(sus, .99).Round(time.Millisecond),
			percentile(dead, .5).Round(time.Millisecond), percentile(dead, .99).Round(time.Millisecond),
			percentile(all, .5).Round(time.Millisecond), percentile(all, .99).Round(time.Millisecond))
		t.Logf("n=%d convergence (all join through one seed at once) p50 %v max %v",
			n, percentile(conv, .5).Round(time.Millisecond), percentile(conv, 1).Round(time.Millisecond))
		bound := cfg.PauseTolerance + 6*cfg.ProbeInterval
		require.LessOrEqual(t, percentile(all, 1), bound, "n=%d: a crash took longer than tolerance + 6 probe periods to reach everyone", n)
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
