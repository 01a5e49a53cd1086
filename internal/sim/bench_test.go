package sim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
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

// BenchmarkSimulatedMembers runs the real protocol: 1,000 converged members
// (LAN defaults) for 30 virtual seconds per op. member-vsec/s is members ×
// virtual seconds per wall second; B/member is the heap in use per member
// at the end (each holds a view of all 1,000). The 10,000-member figures
// come from go run ./internal/scale.
func BenchmarkSimulatedMembers(b *testing.B) {
	const n = 1000
	const span = 30 * time.Second
	var heap uint64
	for range b.N {
		c := New(Options{Seed: 1, NodeFactory: MachineFactory(lanConfig), DisableLog: true})
		if _, err := c.AddNodes("m", n); err != nil {
			b.Fatal(err)
		}
		if err := c.Converge(); err != nil {
			b.Fatal(err)
		}
		c.Run(span)
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = ms.HeapInuse
		runtime.KeepAlive(c)
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*span.Seconds()*float64(b.N)/b.Elapsed().Seconds(), "member-vsec/s")
	b.ReportMetric(float64(heap)/n, "B/member")
}
