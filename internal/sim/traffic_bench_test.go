package sim

import (
	"encoding/binary"
	"flag"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var (
	trafficSeeds    = flag.Int("traffic.seeds", 3, "seeds at 256 members in BenchmarkUserTraffic")
	trafficBigSeeds = flag.Int("traffic.bigseeds", 1, "seeds at 2,500 members in BenchmarkUserTraffic")
)

// trafficResult is what one run of the user-traffic workload measured.
type trafficResult struct {
	detect        time.Duration // crash until every survivor saw the victim dead
	firstSuspect  time.Duration // crash until the first suspicion of the victim
	firstDead     time.Duration // ... and the first death
	falseSuspects int           // suspect events about live members
	sent          int           // broadcasts queued
	full          []time.Duration
	deliveredFrac float64 // deliveries over (sent × receivers)
	dropped       uint64  // broadcasts (gossip) and pushes (trees) dropped by full queues, all members
}

// gossipConfig is the LAN defaults with the broadcast trees off: the
// broadcasts go by gossip beside membership news under the fair budget,
// as they do toward members of older releases.
func gossipConfig(string) *swim.Config {
	cfg := swim.DefaultLANConfig()
	cfg.Broadcasts.Trees = false
	return cfg
}

// runTraffic boots n members with LAN defaults and broadcasts by gossip
// (gossipConfig), then for 30 s of virtual time has every member
// broadcast messages of 100 bytes, rate a second on
// average (none when rate is 0; at a fraction, each member broadcasts in
// each 100 ms step with that probability), crashing one member 10 s in. It
// measures crash detection (until the last survivor reported the crash),
// false suspicions, and, for each broadcast, when the last member got it.
func runTraffic(t testing.TB, seed uint64, n int, rate float64) trafficResult {
	var (
		res       trafficResult
		start     = map[uint64]time.Time{}
		got       = map[uint64]int{}
		need      = map[uint64]int{} // the members up but the origin, when it was sent
		victim    string
		crashedAt time.Time
		measuring bool
		reported  int
	)
	opts := Options{Seed: seed, NodeFactory: MachineFactory(gossipConfig), DisableLog: true, CheckInterval: 100 * time.Millisecond,
		OnEvent: func(r Record) {
			if !measuring {
				return
			}
			switch {
			case r.Event.Member.Name != victim:
				if r.Event.Kind == swim.EventSuspect {
					res.falseSuspects++
				}
			case crashedAt.IsZero():
			case r.Event.Kind == swim.EventSuspect && res.firstSuspect == 0:
				res.firstSuspect = r.At.Sub(crashedAt)
			case r.Event.Kind == swim.EventLeave:
				if res.firstDead == 0 {
					res.firstDead = r.At.Sub(crashedAt)
				}
				if reported++; reported == n-1 {
					res.detect = r.At.Sub(crashedAt)
				}
			}
		},
		OnMessage: func(at time.Time, node string, msg swim.Message) {
			if len(msg.Payload) < 8 {
				return
			}
			id := binary.BigEndian.Uint64(msg.Payload)
			got[id]++
			if got[id] == need[id] {
				res.full = append(res.full, at.Sub(start[id]))
			}
		}}
	s := newScenarioWith(t, opts, n, true)
	require.True(t, s.RunUntil(s.converged, 5*time.Minute), "no convergence")
	s.Run(10 * time.Second)
	measuring = true
	victim = s.names[n/2]
	payload := make([]byte, 100)
	var next uint64
	const step = 100 * time.Millisecond
	perStep := rate * step.Seconds() // messages per member per step
	rng := rand.New(rand.NewPCG(seed, 99))
	for i := 0; i < int(30*time.Second/step); i++ {
		if i == int(10*time.Second/step) {
			crashedAt = s.Now()
			require.NoError(t, s.Crash(victim))
		}
		for _, name := range s.names {
			if !s.Node(name).Up() {
				continue
			}
			count := int(perStep)
			if rng.Float64() < perStep-float64(count) {
				count++
			}
			for range count {
				next++
				binary.BigEndian.PutUint64(payload, next)
				id := next
				require.NoError(t, s.DoMachine(name, func(m *swim.Machine, now time.Time) {
					if _, err := m.Broadcast(now, "", payload); err == nil {
						start[id] = now
						need[id] = s.NumUp() - 1
						res.sent++
					}
				}))
			}
		}
		s.Run(step)
	}
	s.Run(10 * time.Second) // the last broadcasts finish spreading
	total := 0
	for _, c := range got {
		total += c
	}
	wanted := 0
	for _, k := range need {
		wanted += k
	}
	if wanted > 0 {
		res.deliveredFrac = float64(total) / float64(wanted)
	}
	for _, name := range s.names {
		if s.Node(name).Up() {
			st := s.machine(name).Stats()
			res.dropped += st.Broadcasts.Dropped + st.Trees.PushesDropped
		}
	}
	return res
}

// BenchmarkUserTraffic runs the workload of runTraffic at 256 and 2,500
// members, each member broadcasting 10 messages of 100 bytes a second, and
// the cluster 5 a second in all, beside the same run without user traffic,
// and reports:
// crash detection with and without traffic, false suspicions, the share of
// (broadcast, member) deliveries made, and for the broadcasts that reached
// every member the rounds (GossipInterval) that took, p50 and p99, against
// the push-gossip bound log2 N + ln N. Run it with `make traffic`.
func BenchmarkUserTraffic(b *testing.B) {
	for _, n := range []int{256, 2500} {
		seeds := *trafficSeeds
		if n > 256 {
			seeds = *trafficBigSeeds
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				gossip := swim.DefaultLANConfig().GossipInterval
				bound := math.Log2(float64(n)) + math.Log(float64(n))
				for seed := uint64(1); seed <= uint64(seeds); seed++ {
					quiet := runTraffic(b, seed, n, 0)
					b.Logf("n=%d seed=%d no traffic: detection %v (first suspicion %v, first death %v), false suspicions %d",
						n, seed, quiet.detect, quiet.firstSuspect, quiet.firstDead, quiet.falseSuspects)
					// 10 a second from every member is far over what gossip
					// carries (each broadcast costs about N times the
					// retransmit limit in frames); 5 a second from the whole
					// cluster is within it.
					for _, rate := range []float64{10, 5 / float64(n)} {
						busy := runTraffic(b, seed, n, rate)
						var p50, p99 float64
						if len(busy.full) > 0 {
							p50 = float64(percentile(busy.full, 0.5)) / float64(gossip)
							p99 = float64(percentile(busy.full, 0.99)) / float64(gossip)
						}
						b.Logf("n=%d seed=%d %.3g msg/s each: detection %v (first suspicion %v, first death %v), false suspicions %d; %d broadcasts, %.1f%% of deliveries made, "+
							"%d reached everyone: p50 %.2f rounds, p99 %.2f (log2 N + ln N = %.1f); %d dropped by full queues",
							n, seed, rate, busy.detect, busy.firstSuspect, busy.firstDead, busy.falseSuspects, busy.sent, 100*busy.deliveredFrac, len(busy.full), p50, p99, bound, busy.dropped)
					}
				}
			}
		})
	}
}
