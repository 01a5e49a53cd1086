package sim

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// machineRun joins n real Machines through one seed, over a lossy network,
// crashes one and runs on. It asserts nothing about the protocol: that is
// the root package's scenario tests' job.
func machineRun(t testing.TB, n int, seed uint64, log bool) *Cluster {
	c := New(Options{
		Seed:        seed,
		Loss:        0.01,
		DisableLog:  !log,
		NodeFactory: MachineFactory(func(string) *swim.Config { return swim.DefaultLANConfig() }),
	})
	nodes, err := c.AddNodes("m", n)
	require.NoError(t, err)
	seeds := []netip.AddrPort{nodes[0].Addr()}
	for _, sn := range nodes[1:] {
		require.NoError(t, c.DoMachine(sn.Name(), func(m *swim.Machine, now time.Time) { m.Join(now, seeds) }))
	}
	c.Run(20 * time.Second)
	require.NoError(t, c.Crash(nodes[n/2].Name()))
	c.Run(40 * time.Second)
	return c
}

// The Machine must be deterministic too: no map iteration order, clock or
// global randomness leaking into what it sends.
func TestMachinesReplayExactly(t *testing.T) {
	c1 := machineRun(t, 30, 7, true)
	c2 := machineRun(t, 30, 7, true)
	c1.LogSeedOnFailure(t)
	require.NotEmpty(t, c1.Log())
	require.Equal(t, c1.Log(), c2.Log())
	require.Equal(t, c1.Counters(), c2.Counters())
	require.Equal(t, c1.Digest(), c2.Digest())
}

// BenchmarkMachines reports the cost of a minute of a 1,000-member cluster
// that joins through one seed and loses a member; compare ns/op with the 60s
// simulated.
func BenchmarkMachines(b *testing.B) {
	for range b.N {
		c := machineRun(b, 1000, 1, false)
		b.ReportMetric(float64(c.Counters().Events), "events/op")
	}
}
