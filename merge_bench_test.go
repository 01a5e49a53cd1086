package swim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// largePushPull encodes a push-pull from "big" announcing n members nobody
// runs, with distinct names and addresses.
func largePushPull(tb testing.TB, n int) []byte {
	tb.Helper()
	w := wire.NewPushPullWriter(nil, "big", false, n)
	for i := range n {
		addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 7946)
		w.Add(fmt.Sprintf("member-%06d", i), addr, 1, uint8(StateAlive), nil, wire.Versions{})
	}
	data, err := w.Bytes()
	require.NoError(tb, err)
	return data
}

// BenchmarkLargeMergeMachine merges a 100,000-member push-pull (a seed's
// answer to a join) into a Machine and reports the longest single input
// (HandleStreamResponse, then each Tick): the longest Memberlist holds its
// lock for it.
func BenchmarkLargeMergeMachine(b *testing.B) {
	const n = 100_000
	data := largePushPull(b, n)
	cfg := mtConfig()
	cfg.MaxMembers = 2 * n
	var longest, total time.Duration
	for range b.N {
		m, err := NewMachine(cfg, mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
		require.NoError(b, err)
		ids := m.Join(mtStart, []netip.AddrPort{mtSeedAddr})
		start := time.Now()
		require.NoError(b, m.HandleStreamResponse(mtStart, ids[0], data, nil))
		longest = max(longest, time.Since(start))
		for len(m.merges) > 0 {
			t0 := time.Now()
			m.Tick(mtStart)
			longest = max(longest, time.Since(t0))
		}
		total += time.Since(start)
		require.Equal(b, n+1, m.NumMembers())
	}
	b.ReportMetric(float64(longest.Microseconds())/1000, "ms-longest-input")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-merge")
}

// BenchmarkLargeMergeLockHold sends a running member a 100,000-member
// push-pull over TCP while a prober pings it every millisecond, and
// reports the slowest ack (how long the member could not answer) and the
// pings it never answered.
func BenchmarkLargeMergeLockHold(b *testing.B) {
	const n = 100_000
	data := largePushPull(b, n)
	var worst time.Duration
	var lost, sent int
	for range b.N {
		cfg := testConfig("target")
		cfg.MaxMembers = 2 * n
		cfg.MaxStreamBytes = wire.MaxStreamMessageSize
		cfg.Events = nil
		ml, err := New(cfg)
		require.NoError(b, err)
		addr := ml.LocalMember().Addr

		probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		require.NoError(b, err)
		var mu sync.Mutex
		sentAt := map[uint32]time.Time{}
		acked := 0
		var slowest time.Duration
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // reader: match acks to pings
			buf := make([]byte, 2048)
			for {
				k, _, err := probe.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				msgs, err := wire.DecodePacket(buf[:k])
				if err != nil {
					continue
				}
				for _, msg := range msgs {
					if a, ok := msg.(*wire.Ack); ok {
						mu.Lock()
						if t0, ok := sentAt[a.Seq]; ok {
							slowest = max(slowest, time.Since(t0))
							delete(sentAt, a.Seq)
							acked++
						}
						mu.Unlock()
					}
				}
			}
		})
		pings := 0
		wg.Go(func() { // prober: a ping every millisecond
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for seq := uint32(1); ; seq++ {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				pkt, _ := wire.AppendPacket(nil, &wire.Ping{Seq: seq, Target: "target", From: "prober"})
				mu.Lock()
				sentAt[seq] = time.Now()
				pings++
				mu.Unlock()
				_, _ = probe.WriteToUDPAddrPort(pkt, addr)
			}
		})

		// The view comes as a seed's answer to the member's join: news
		// from a process not known is not believed (newcomers.go).
		seed, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(b, err)
		wg.Go(func() {
			conn, err := seed.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			if _, err := wire.ReadStreamMessage(conn, wire.MaxStreamMessageSize); err == nil {
				_ = wire.WriteStreamMessage(conn, data)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = ml.Join(ctx, seed.Addr().String())
		cancel()
		require.NoError(b, err)
		_ = seed.Close()
		require.Eventually(b, func() bool { return ml.NumMembers() == n+1 }, time.Minute, 10*time.Millisecond)
		close(done)
		// The acks of the last pings may still be in flight.
		pollUntil(200*time.Millisecond, func() bool { mu.Lock(); defer mu.Unlock(); return len(sentAt) == 0 })
		_ = probe.Close()
		wg.Wait()
		require.NoError(b, ml.Shutdown())
		mu.Lock()
		worst = max(worst, slowest)
		sent += pings
		lost += pings - acked
		mu.Unlock()
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms-slowest-ack")
	b.ReportMetric(float64(lost)/float64(b.N), "pings-unanswered")
	b.ReportMetric(float64(sent)/float64(b.N), "pings-sent")
}

// pollUntil checks cond every millisecond until it holds or d has passed.
func pollUntil(d time.Duration, cond func() bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// TestAttackRemoteCrashStream: one TCP push-pull announcing 2^20 invented
// members, if merged, would crash the member (its reply would not encode).
// It is refused, by its size at the default MaxStreamBytes or by
// its member count when streams that large are allowed, and the member
// carries on: a newcomer joins through it.
func TestAttackRemoteCrashStream(t *testing.T) {
	data := largePushPull(t, wire.MaxPushPullMembers)
	for _, tc := range []struct {
		name           string
		maxStreamBytes int
		counter        func(MemberlistStats) uint64
	}{
		{"default MaxStreamBytes", 0, func(s MemberlistStats) uint64 { return s.StreamsTooLarge }},
		{"streams up to the wire limit", wire.MaxStreamMessageSize, func(s MemberlistStats) uint64 { return s.PushPullsRefused }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("victim")
			cfg.MaxStreamBytes = tc.maxStreamBytes
			victim := startMember(t, cfg)
			conn, err := net.Dial("tcp", victim.LocalMember().Addr.String())
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(formTimeout)))
			_ = wire.WriteStreamMessage(conn, data) // the victim may close before it is all written
			_, err = wire.ReadStreamMessage(conn, wire.MaxStreamMessageSize)
			require.Error(t, err, "no reply to a refused push-pull")
			require.Eventually(t, func() bool { return tc.counter(victim.Stats()) == 1 }, formTimeout, pollEvery)
			require.Equal(t, 1, victim.NumMembers())

			newcomer := startMember(t, testConfig("newcomer"))
			ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
			defer cancel()
			n, err := newcomer.Join(ctx, victim.LocalMember().Addr.String())
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Eventually(t, func() bool { return victim.NumMembers() == 2 }, formTimeout, pollEvery)
		})
	}
}
