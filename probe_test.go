package swim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// probeAndAck runs the probe due at `at`: it requires exactly one ping, to
// a live member, acks it from the target, and returns the target's name.
func (h *mt) probeAndAck(at time.Time) string {
	h.t.Helper()
	h.tick(at)
	out := h.ready()
	ps, pkts := out.pings()
	require.Len(h.t, ps, 1, "one probe per period at %v", at.Sub(mtStart))
	require.Equal(h.t, mtSelf, ps[0].From)
	mem, ok := h.m.Member(ps[0].Target)
	require.True(h.t, ok, "probe of unknown member %q", ps[0].Target)
	require.Equal(h.t, mem.Addr, pkts[0].To, "the ping goes to its target's address")
	h.feed(pkts[0].To, &wire.Ack{Seq: ps[0].Seq})
	return ps[0].Target
}

// requireQuiet ticks at `at` and requires that no packet goes out.
func (h *mt) requireQuiet(at time.Time, why string) {
	h.t.Helper()
	h.tick(at)
	out := h.ready()
	require.Empty(h.t, out.Packets, why)
}

// requirePermutation requires names to hold each of want exactly once.
func requirePermutation(t *testing.T, want, names []string, msgAndArgs ...any) {
	t.Helper()
	got := slices.Clone(names)
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	require.Equal(t, w, got, msgAndArgs...)
}

func peerNames(n int) []string {
	names := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		names = append(names, mtPeer(i))
	}
	return names
}

// TestProbeRoundRobin: one ping per ProbeInterval, and over each pass of N
// probes every member is probed exactly once (SWIM §4.3); the order is
// reshuffled between passes.
func TestProbeRoundRobin(t *testing.T) {
	for _, n := range []int{1, 2, 5, 13} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			cfg := mtConfig()
			h := newMT(t, cfg)
			h.joinPeers(n, 1)
			ping, pkt, _ := h.firstProbe()
			t0 := h.now
			h.feed(pkt.To, &wire.Ack{Seq: ping.Seq})
			order := []string{ping.Target}
			const passes = 5
			for k := 1; k < passes*n; k++ {
				at := t0.Add(time.Duration(k) * cfg.ProbeInterval)
				h.requireQuiet(at.Add(-cfg.ProbeInterval+cfg.ProbeTimeout), "acked probe: no indirect probe")
				h.requireQuiet(at.Add(-time.Nanosecond), "no probe before the period ends")
				order = append(order, h.probeAndAck(at))
			}
			var passOrders [][]string
			for p := 0; p < passes; p++ {
				pass := order[p*n : (p+1)*n]
				requirePermutation(t, peerNames(n), pass, "pass %d: %v", p, pass)
				passOrders = append(passOrders, pass)
			}
			if n >= 5 {
				// Reshuffled at each pass: the passes do not all repeat
				// one order (for 5 members, 4 equal shuffles in a row
				// have probability 1/120³).
				distinct := map[string]bool{}
				for _, p := range passOrders[1:] {
					distinct[strings.Join(p, ",")] = true
				}
				require.Greater(t, len(distinct), 1, "the probe order is reshuffled between passes: %v", passOrders)
			}
			require.Equal(t, uint64(passes*n), h.m.Stats().Probes)
			require.Zero(t, h.m.Stats().ProbesFailed)
		})
	}
}

// TestProbeNewMemberProbedWithinPass: a member that joins mid-pass is
// inserted among those not yet probed, so the pass covers it.
func TestProbeNewMemberProbedWithinPass(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinPeers(5, 1)
	ping, pkt, _ := h.firstProbe()
	t0 := h.now
	h.feed(pkt.To, &wire.Ack{Seq: ping.Seq})
	done := []string{ping.Target, h.probeAndAck(t0.Add(cfg.ProbeInterval))}
	h.feedAnswered(mtPeerAddr(6), mtAlive(6, 1))
	h.m.Ready()
	var rest []string
	for k := 2; k < 6; k++ {
		rest = append(rest, h.probeAndAck(t0.Add(time.Duration(k)*cfg.ProbeInterval)))
	}
	want := []string{mtPeer(6)}
	for _, name := range peerNames(5) {
		if !slices.Contains(done, name) {
			want = append(want, name)
		}
	}
	requirePermutation(t, want, rest, "the rest of the pass covers the new member and those not yet probed")
}

// TestProbeResurrectedMemberOncePerPass: a member declared dead and back
// alive is still probed once per pass, not twice (time-bounded
// completeness of the others, SWIM §4.3).
func TestProbeResurrectedMemberOncePerPass(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinPeers(4, 1)
	h.feed(mtStranger, &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	h.feed(mtStranger, mtAlive(1, 2))
	mem, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateAlive, mem.State)
	h.m.Ready()

	ping, pkt, _ := h.firstProbe()
	t0 := h.now
	h.feed(pkt.To, &wire.Ack{Seq: ping.Seq})
	order := []string{ping.Target}
	for k := 1; k < 12; k++ {
		order = append(order, h.probeAndAck(t0.Add(time.Duration(k)*cfg.ProbeInterval)))
	}
	for p := 0; p < 3; p++ {
		requirePermutation(t, peerNames(4), order[p*4:(p+1)*4], "pass %d of %v", p, order)
	}
}

// TestAlignedProbing: with AlignedProbing every member probes the others
// in ring order, one per round: any N consecutive probes (N other members)
// cover every member once, and each member is probed at a fixed phase,
// every N rounds.
func TestAlignedProbing(t *testing.T) {
	for _, n := range []int{1, 2, 5, 12} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			cfg := mtConfig()
			cfg.AlignedProbing = true
			h := newMT(t, cfg)
			h.joinPeers(n, 1)
			out := h.run(h.now.Add(time.Duration(4*n+2)*cfg.ProbeInterval), nil)
			var order []string
			times := map[string][]time.Time{}
			for _, p := range out.Packets {
				for _, msg := range p.Msgs {
					if ping, ok := msg.(*wire.Ping); ok {
						order = append(order, ping.Target)
						times[ping.Target] = append(times[ping.Target], p.At)
					}
				}
			}
			require.GreaterOrEqual(t, len(order), 3*n)
			for i := 0; i+n <= len(order); i++ {
				requirePermutation(t, peerNames(n), order[i:i+n], "probes %d..%d of %v", i, i+n-1, order)
			}
			for name, ts := range times {
				// The first probe was scheduled before the join, when
				// the ring held no target to take a phase from: it goes
				// out at its round's start. Check from the second on.
				if name == order[0] {
					ts = ts[1:]
				}
				for i := 1; i < len(ts); i++ {
					require.Equal(t, time.Duration(n)*cfg.ProbeInterval, ts[i].Sub(ts[i-1]), "%s probed every N rounds", name)
				}
			}
			require.Zero(t, h.m.Stats().ProbesFailed)
		})
	}
}
