package sim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// BenchmarkCluster measures the engine alone: n fakes each ping a random
// peer every second (with jitter) and ack what they get, for 10 virtual
// seconds. The fakes do next to nothing, so this is the simulator's cost
// per event; ns/event is the figure to watch.
func BenchmarkCluster(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			addrs := make([]netip.AddrPort, n)
			for i := range addrs {
				addrs[i] = addrOf(i)
			}
			b.ReportAllocs()
			var events uint64
			for range b.N {
				c := New(Options{
					Seed: 1,
					NodeFactory: func(name string, addr netip.AddrPort, rng *rand.Rand, now time.Time) (Node, error) {
						return &fake{
							name: name, addr: addr, rng: rng, born: now,
							period: time.Second, jitter: true,
							next:  now.Add(time.Duration(rng.Int64N(int64(time.Second)))),
							peers: addrs, heard: make(map[netip.AddrPort]bool),
						}, nil
					},
					DisableLog: true,
				})
				if _, err := c.AddNodes("n", n); err != nil {
					b.Fatal(err)
				}
				c.Run(10 * time.Second)
				events += c.Counters().Events
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
		})
	}
}
