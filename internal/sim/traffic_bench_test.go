package sim

import (
	"encoding/binary"
	"flag"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var trafficSeeds = flag.Int("traffic.seeds", 3, "seeds per size in BenchmarkUserTraffic")

// trafficResult is what one run of the user-traffic workload measured.
type trafficResult struct {
	detect        time.Duration // crash until every survivor saw the victim dead
	falseSuspects int           // suspect events about live members
	sent          int           // broadcasts queued
	full          []time.Duration
	deliveredFrac float64 // deliveries over (sent × receivers)
	dropped       uint64  // broadcasts dropped by full queues, all members
}

// runTraffic boots n members with LAN defaults, then for 30 s of virtual
// time has every member broadcast rate messages of 100 bytes a second
// (none when rate is 0), crashing one member 10 s in. It measures crash
// detection, false suspicions, and, for each broadcast, when the last
// member got it.
func runTraffic(t testing.TB, seed uint64, n, rate int) trafficResult {
	var (
		res       trafficResult
		start     = map[uint64]time.Time{}
		got       = map[uint64]int{}
		victim    string
		crashedAt time.Time
		measuring bool
	)
	opts := Options{Seed: seed, NodeFactory: MachineFactory(lanConfig), DisableLog: true, CheckInterval: 100 * time.Millisecond,
		OnEvent: func(r Record) {
			if measuring && r.Event.Kind == swim.EventSuspect && r.Event.Member.Name != victim {
				res.falseSuspects++
			}
		},
		OnMessage: func(at time.Time, node string, msg swim.Message) {
			if len(msg.Payload) < 8 {
				return
			}
			id := binary.BigEndian.Uint64(msg.Payload)
			got[id]++
			if got[id] == n-1 {
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
	per := max(rate*int(step)/int(time.Second), 0) // messages per member per step
	for i := 0; i < int(30*time.Second/step); i++ {
		if i == int(10*time.Second/step) {
			crashedAt = s.Now()
			require.NoError(t, s.Crash(victim))
		}
		for _, name := range s.names {
			if !s.Node(name).Up() {
				continue
			}
			for range per {
				next++
				binary.BigEndian.PutUint64(payload, next)
				id := next
				require.NoError(t, s.DoMachine(name, func(m *swim.Machine, now time.Time) {
					if _, err := m.Broadcast(now, "", payload); err == nil {
						start[id] = now
						res.sent++
					}
				}))
			}
		}
		s.Run(step)
		if res.detect == 0 && !crashedAt.IsZero() && s.allSee(without(s.names, victim), []string{victim}, swim.StateDead) {
			res.detect = s.Now().Sub(crashedAt)
		}
	}
	s.Run(10 * time.Second) // the last broadcasts finish spreading
	total := 0
	for _, c := range got {
		total += c
	}
	if res.sent > 0 {
		res.deliveredFrac = float64(total) / float64(res.sent*(n-2)) // receivers: all but the origin and the victim, about
	}
	for _, name := range s.names {
		if s.Node(name).Up() {
			res.dropped += s.machine(name).Stats().UserBroadcastsDropped
		}
	}
	return res
}

// BenchmarkUserTraffic runs the workload of runTraffic at 256 and 2,500
// members, each member broadcasting 10 messages of 100 bytes a second,
// beside the same run without user traffic, and reports: crash detection
// with and without traffic, false suspicions, the share of (broadcast,
// member) deliveries made, and for the broadcasts that reached every
// member the rounds (GossipInterval) that took, p50 and p99, against the
// push-gossip bound log2 N + ln N. Run it with
//
//	go test ./internal/sim -run '^$' -bench UserTraffic -benchtime 1x -timeout 60m
func BenchmarkUserTraffic(b *testing.B) {
	for _, n := range []int{256, 2500} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				gossip := swim.DefaultLANConfig().GossipInterval
				bound := math.Log2(float64(n)) + math.Log(float64(n))
				for seed := uint64(1); seed <= uint64(*trafficSeeds); seed++ {
					quiet := runTraffic(b, seed, n, 0)
					busy := runTraffic(b, seed, n, 10)
					var p50, p99 float64
					if len(busy.full) > 0 {
						p50 = float64(percentile(busy.full, 0.5)) / float64(gossip)
						p99 = float64(percentile(busy.full, 0.99)) / float64(gossip)
					}
					b.Logf("n=%d seed=%d: detection %v quiet, %v with traffic; false suspicions %d quiet, %d with traffic; "+
						"%d broadcasts, %.1f%% of deliveries made, %d reached everyone: p50 %.1f rounds, p99 %.1f (bound log2 N + ln N = %.1f); %d dropped by full queues",
						n, seed, quiet.detect, busy.detect, quiet.falseSuspects, busy.falseSuspects,
						busy.sent, 100*busy.deliveredFrac, len(busy.full), p50, p99, bound, busy.dropped)
				}
			}
		})
	}
}
