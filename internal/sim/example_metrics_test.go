package sim_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/sim"
)

// A measurement as a tuning tool runs one: converge a cluster, put it under
// a network model, crash a few members, and read the Report. The run is
// reproducible from its seed; the output states its facts coarsely (counts,
// and the slowest detection against a bound) so that it holds for any
// implementation of the same protocol, not only for one schedule of its
// packets.
func ExampleMetrics() {
	config := func(string) *swim.Config {
		c := swim.DefaultLANConfig()
		c.IndirectChecks = 4
		return c
	}
	c := sim.New(sim.Options{
		Seed:          1,
		NodeFactory:   sim.MachineFactory(config),
		DisableLog:    true,                   // no event log: a Metrics needs none
		CheckInterval: 100 * time.Millisecond, // RunUntil checks at most this often
	})
	nodes, _ := c.AddNodes("m", 100)
	for _, n := range nodes[1:] {
		_ = c.DoMachine(n.Name(), func(m *swim.Machine, now time.Time) {
			m.Join(now, []netip.AddrPort{nodes[0].Addr()})
		})
	}
	if _, ok := c.RunUntilAgree(time.Minute); !ok {
		fmt.Println("no convergence")
		return
	}

	c.SetLatency(sim.LognormalLatency(time.Millisecond, 50*time.Millisecond))
	c.SetLoss(0.05)
	m := sim.NewMetrics(c)
	for i := 1; i <= 5; i++ {
		_ = c.Crash(fmt.Sprintf("m%d", 10*i))
		c.Run(time.Minute)
	}
	r := m.Report()
	d := r.Detection
	fmt.Printf("%d crashes, %d known by every survivor, the slowest within 7s: %v\n", d.Crashes, d.AllKnew, d.AllKnow.Max <= 7*time.Second)
	fmt.Printf("false deaths: %d; under 200 bytes sent per member and second: %v\n", r.FalseDeaths, r.Traffic.BytesPerMemberSecond < 200)
	// Output:
	// 5 crashes, 5 known by every survivor, the slowest within 7s: true
	// false deaths: 0; under 200 bytes sent per member and second: true
}
