package sim

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var (
	pairingAB    = flag.Bool("pairing.ab", false, "run TestPairingAB (make pairing)")
	pairingSeeds = flag.Int("pairing.seeds", 8, "seeds per cluster size and mode in TestPairingAB")
	pairingSizes = flag.String("pairing.sizes", "64,1000", "comma-separated cluster sizes in TestPairingAB")
)

// abRun is what one seed of one mode measured.
type abRun struct {
	packets, bytes   float64       // sent per member per second, steady state
	leaveSpread      time.Duration // a graceful leave, until every member knows
	suspect, allDead time.Duration // a crash, until the first suspicion and until every survivor knows
}

// measureAB converges n members, measures 30 s of steady traffic from 40 s
// after the join on, has one
// member leave and another crash, and times both.
func measureAB(t *testing.T, seed uint64, n int, config func(string) *swim.Config) abRun {
	var (
		victim   string
		crash    time.Time
		run      abRun
		suspects bool
	)
	opts := Options{Seed: seed, NodeFactory: MachineFactory(config), DisableLog: true, CheckInterval: 50 * time.Millisecond,
		OnEvent: func(r Record) {
			if victim != "" && r.Event.Member.Name == victim && !r.At.Before(crash) && r.Event.Kind == swim.EventSuspect && !suspects {
				suspects, run.suspect = true, r.At.Sub(crash)
			}
		}}
	s := newScenarioWith(t, opts, n, true)
	require.True(t, s.RunUntil(s.converged, 3*time.Minute), "n=%d seed=%d: no convergence", n, seed)
	// Steady state: 40 s after the join, when the boot's news is spread.
	s.Run(40 * time.Second)
	before := s.Counters()
	const window = 30 * time.Second
	s.Run(window)
	after := s.Counters()
	per := float64(n) * window.Seconds()
	run.packets = float64(after.PacketsSent-before.PacketsSent) / per
	run.bytes = float64(after.BytesSent-before.BytesSent) / per

	leaver := s.names[1+int(seed)%(n-1)]
	rest := without(s.names, leaver)
	require.NoError(t, s.DoMachine(leaver, func(m *swim.Machine, now time.Time) { require.NoError(t, m.Leave(now)) }))
	left := s.Now()
	s.SetCheckInterval(10 * time.Millisecond)
	require.True(t, s.RunUntil(func() bool { return s.allSee(rest, []string{leaver}, swim.StateLeft) }, time.Minute),
		"n=%d seed=%d: the leave did not spread", n, seed)
	run.leaveSpread = s.Now().Sub(left)
	s.SetCheckInterval(50 * time.Millisecond)
	s.Run(10 * time.Second)

	victim = rest[1+int(seed*7)%(len(rest)-1)]
	crash = s.Now()
	require.NoError(t, s.Crash(victim))
	survivors := without(rest, victim)
	s.SetCheckInterval(10 * time.Millisecond)
	require.True(t, s.RunUntil(func() bool { return s.allSee(survivors, []string{victim}, swim.StateDead) }, 2*time.Minute),
		"n=%d seed=%d: the crash was not detected", n, seed)
	run.allDead = s.Now().Sub(crash)
	return run
}

// abAccuracy is one fault's false suspicions (distinct accusations of live
// members) and deaths, summed over seeds.
type abAccuracy struct{ accusations, deaths int }

// accuracyFaults are the accuracy scenarios of the A/B comparison: each
// applies its fault to a converged cluster of 64 and runs it for three
// minutes.
var accuracyFaults = []struct {
	name string
	run  func(s *scenario)
}{
	{"10% loss", func(s *scenario) { s.SetLoss(0.10); s.Run(3 * time.Minute) }},
	{"30% loss", func(s *scenario) { s.SetLoss(0.30); s.Run(3 * time.Minute) }},
	{"one-way links (8)", func(s *scenario) {
		for i := range 8 {
			_ = s.BlockOneWay(s.names[20+2*i], s.names[1+2*i])
		}
		s.Run(3 * time.Minute)
	}},
	{"starved member", func(s *scenario) {
		_ = s.Starve(s.names[3], 100*time.Millisecond, 2*time.Second, 3*time.Minute)
		s.Run(3 * time.Minute)
	}},
	{"pauses of 4 s", func(s *scenario) {
		// Below PauseTolerance (5 s), one member after another.
		for i := range 6 {
			_ = s.Pause(s.names[5+i], 4*time.Second)
			s.Run(30 * time.Second)
		}
	}},
}

// TestPairingAB compares paired probing with aligned probing over the same
// seeds: packets and bytes per member per second in steady state, the
// spread of a graceful leave, crash detection, and false suspicions under
// the accuracy faults. It prints a table and asserts nothing a seed could
// flip: it is a measurement (make pairing).
//
//	go test ./internal/sim -run '^TestPairingAB$' -v -pairing.ab -pairing.seeds 8 -pairing.sizes 64,1000
func TestPairingAB(t *testing.T) {
	if !*pairingAB {
		t.Skip("a measurement: -pairing.ab runs it (make pairing)")
	}
	modes := []struct {
		name   string
		config func(string) *swim.Config
	}{
		{"aligned", configWith(func(c *swim.Config) { c.PairedProbing = false })},
		{"paired", configWith(func(c *swim.Config) {})},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-6s %-8s %9s %9s %11s %11s %11s %11s %11s\n", "N", "mode", "pkts/m/s", "bytes/m/s", "leave p50", "leave p99", "susp p50", "dead p50", "dead p99")
	for _, n := range parseSizes(t, *pairingSizes) {
		for _, mode := range modes {
			runs := make([]abRun, *pairingSeeds)
			t.Run(fmt.Sprintf("n=%d/%s", n, mode.name), func(t *testing.T) {
				for i := range runs {
					t.Run(fmt.Sprintf("seed=%d", i+1), func(t *testing.T) {
						t.Parallel()
						runs[i] = measureAB(t, uint64(i+1), n, mode.config)
					})
				}
			})
			if t.Failed() {
				return
			}
			var pk, by []float64
			var leave, sus, dead []time.Duration
			for _, r := range runs {
				pk, by = append(pk, r.packets), append(by, r.bytes)
				leave, sus, dead = append(leave, r.leaveSpread), append(sus, r.suspect), append(dead, r.allDead)
			}
			ms := func(ds []time.Duration, p float64) time.Duration { return percentile(ds, p).Round(time.Millisecond) }
			fmt.Fprintf(&table, "%-6d %-8s %9.2f %9.1f %11v %11v %11v %11v %11v\n", n, mode.name, median(pk), median(by),
				ms(leave, .5), ms(leave, .99), ms(sus, .5), ms(dead, .5), ms(dead, .99))
		}
	}
	fmt.Fprintf(&table, "\n%-20s %-8s %12s %7s\n", "fault (64, 3 min)", "mode", "accusations", "deaths")
	for _, f := range accuracyFaults {
		for _, mode := range modes {
			results := make([]abAccuracy, *pairingSeeds)
			t.Run(fmt.Sprintf("%s/%s", f.name, mode.name), func(t *testing.T) {
				for i := range results {
					t.Run(fmt.Sprintf("seed=%d", i+1), func(t *testing.T) {
						t.Parallel()
						s := convergedScenario(t, uint64(100+i), 64, mode.config)
						from := s.Now()
						f.run(s)
						_, rumors := s.suspicionsOf(from, s.names)
						results[i] = abAccuracy{rumors, s.deathsOf(from, s.names)}
					})
				}
			})
			var sum abAccuracy
			for _, r := range results {
				sum.accusations += r.accusations
				sum.deaths += r.deaths
			}
			fmt.Fprintf(&table, "%-20s %-8s %12d %7d\n", f.name, mode.name, sum.accusations, sum.deaths)
		}
	}
	t.Log(table.String())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
