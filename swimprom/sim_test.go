package swimprom

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/sim"
)

// TestSimulatorVirtualDurations: Collectors observing simulated members
// measure virtual time. A crash in an 8-member cluster at LAN defaults
// gives every survivor a suspicion that ended in death after about 4 s of
// virtual time (the 5 s pause tolerance, less the probe that preceded the
// accusation), though the run takes a fraction of that on the wall clock.
func TestSimulatorVirtualDurations(t *testing.T) {
	const n = 8
	cols := make(map[string]*Collector)
	c := sim.New(sim.Options{
		Seed: 7,
		NodeFactory: sim.MachineFactory(func(name string) *swim.Config {
			cfg := swim.DefaultLANConfig()
			col := New(WithConstLabels(prometheus.Labels{"member": name}))
			cols[name] = col
			cfg.Observer = col
			return cfg
		}),
	})
	nodes, err := c.AddNodes("m", n)
	require.NoError(t, err)
	for _, node := range nodes[1:] {
		require.NoError(t, c.DoMachine(node.Name(), func(m *swim.Machine, now time.Time) {
			m.Join(now, []netip.AddrPort{nodes[0].Addr()})
		}))
	}
	_, ok := c.RunUntilAgree(time.Minute)
	require.True(t, ok, "the simulated cluster did not converge")

	wall := time.Now()
	victim := nodes[n-1].Name()
	require.NoError(t, c.Crash(victim))
	c.Run(time.Minute)
	elapsed := time.Since(wall)

	for _, node := range nodes[:n-1] {
		m := &member{col: cols[node.Name()], reg: prometheus.NewPedanticRegistry()}
		require.NoError(t, m.reg.Register(m.col))
		require.Equal(t, 1.0, m.value(t, "swim_suspicion_duration_seconds", "outcome", "dead"), "%s saw one suspicion end in death", node.Name())
		require.Zero(t, m.value(t, "swim_suspicion_duration_seconds", "outcome", "refuted"), "%s: no false suspicion", node.Name())
		held := m.histogramSum(t, "swim_suspicion_duration_seconds", "outcome", "dead")
		// The suspicion runs PauseTolerance from the start of the probe
		// that failed, about a probe interval before the accusation, and
		// the final check adds a fifth of a probe timeout.
		require.InDelta(t, 4.5, held, 1.5, "%s held %s suspect %.3fs of virtual time", node.Name(), victim, held)
	}
	t.Logf("crash detected by %d survivors in a minute of virtual time, %v of wall time", n-1, elapsed)
	require.Less(t, elapsed, 30*time.Second, fmt.Sprintf("a virtual minute took %v", elapsed))
}

// histogramSum is the sum of the named histogram's sample whose labels
// include want.
func (m *member) histogramSum(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, s := range mf.GetMetric() {
			labels := make(map[string]string)
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if labels[want[i]] != want[i+1] {
					continue metrics
				}
			}
			return s.GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no histogram %s%v", name, want)
	return 0
}
