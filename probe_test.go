package swim

import (
	"fmt"
	"net/netip"
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
	h.feed(mtStranger, mtAlive(6, 1))
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

// TestProbeOutcome covers one probe round: a direct ping, ping-reqs to k
// other members after ProbeTimeout, and suspicion at the end of the period
// if no ack (direct or relayed) came back (SWIM §3.1, §4.2).
func TestProbeOutcome(t *testing.T) {
	tests := []struct {
		name     string
		peers    int
		k        int
		answer   string // "", "ack", "wrong-seq", "relayed"
		wantReqs int
		suspect  bool
	}{
		{name: "acked", peers: 5, k: 3, answer: "ack", wantReqs: 0},
		{name: "ack with another seq", peers: 5, k: 3, answer: "wrong-seq", wantReqs: 3, suspect: true},
		{name: "silent", peers: 5, k: 3, wantReqs: 3, suspect: true},
		{name: "silent k=1", peers: 5, k: 1, wantReqs: 1, suspect: true},
		{name: "silent k=0", peers: 5, k: 0, wantReqs: 0, suspect: true},
		{name: "silent k over members", peers: 4, k: 10, wantReqs: 3, suspect: true},
		{name: "silent alone with target", peers: 1, k: 3, wantReqs: 0, suspect: true},
		{name: "relayed ack", peers: 5, k: 3, answer: "relayed", wantReqs: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mtConfig()
			cfg.IndirectChecks = tc.k
			h := newMT(t, cfg)
			h.joinPeers(tc.peers, 1)
			ping, pkt, _ := h.firstProbe()
			t0 := h.now
			target := ping.Target
			targetAddr := pkt.To
			var other netip.AddrPort // a live member other than the target
			for i := 1; i <= tc.peers; i++ {
				if mtPeer(i) != target {
					other = mtPeerAddr(i)
				}
			}

			h.now = t0.Add(cfg.ProbeTimeout / 5)
			switch tc.answer {
			case "ack":
				h.feed(targetAddr, &wire.Ack{Seq: ping.Seq})
			case "wrong-seq":
				h.feed(other, &wire.Ack{Seq: ping.Seq + 1000})
			}

			h.requireQuiet(t0.Add(cfg.ProbeTimeout-time.Nanosecond), "no ping-req before ProbeTimeout")
			h.tick(t0.Add(cfg.ProbeTimeout))
			out := h.ready()
			reqs, to := out.pingReqs()
			require.Len(t, reqs, tc.wantReqs)
			seen := map[netip.AddrPort]bool{}
			for i, r := range reqs {
				require.Equal(t, ping.Seq, r.Seq, "a ping-req carries the probe's seq")
				require.Equal(t, target, r.Target)
				require.Equal(t, wire.EncodeAddr(targetAddr), r.TargetAddr)
				require.Equal(t, mtSelf, r.From)
				require.NotEqual(t, targetAddr, to[i], "a ping-req never goes to the target")
				require.NotEqual(t, mtSelfAddr, to[i])
				require.False(t, seen[to[i]], "ping-reqs go to distinct members")
				seen[to[i]] = true
				_, known := h.m.Member(r.Target)
				require.True(t, known)
			}
			require.Equal(t, uint64(tc.wantReqs), h.m.Stats().PingReqsSent)
			if tc.answer == "relayed" {
				h.now = t0.Add(cfg.ProbeTimeout + cfg.ProbeTimeout/5)
				h.feed(to[0], &wire.Ack{Seq: ping.Seq})
				h.m.Ready()
			}

			h.tick(t0.Add(cfg.ProbeInterval - time.Nanosecond))
			out = h.ready()
			mem, _ := h.m.Member(target)
			require.Equal(t, StateAlive, mem.State, "not suspect before the period ends")
			require.Empty(t, out.eventsAbout(target))

			h.tick(t0.Add(cfg.ProbeInterval))
			out = h.ready()
			mem, _ = h.m.Member(target)
			evs := out.eventsAbout(target)
			st := h.m.Stats()
			gossip := deltasAbout(h.piggyback(), target)
			if !tc.suspect {
				require.Equal(t, StateAlive, mem.State)
				require.Empty(t, evs)
				require.Zero(t, st.ProbesFailed)
				require.Zero(t, st.SuspicionsRaised)
				require.Empty(t, gossip)
				return
			}
			require.Equal(t, StateSuspect, mem.State)
			require.Equal(t, uint64(1), mem.Incarnation)
			require.Len(t, evs, 1)
			require.Equal(t, EventSuspect, evs[0].Kind)
			require.Equal(t, uint64(1), st.ProbesFailed)
			require.Equal(t, uint64(1), st.SuspicionsRaised)
			require.Len(t, gossip, 1)
			require.Equal(t, []wire.Message{&wire.Suspect{Name: target, Incarnation: 1, From: mtSelf}}, withoutSilence(gossip...),
				"the suspicion is gossiped")
			require.Equal(t, uint32(cfg.ProbeInterval/time.Millisecond), gossip[0].(*wire.Suspect).Silence,
				"the suspicion carries the age of its anchor, the start of the failed probe")
		})
	}
}

// TestPingReqServed: a ping-req makes this member ping the target, and the
// target's ack is relayed to the requester with the requester's seq.
func TestPingReqServed(t *testing.T) {
	tests := []struct {
		name      string
		target    string
		addr      netip.AddrPort
		ack       string // "right", "wrong", "twice"
		wantRelay int
	}{
		{"ack relayed", mtPeer(2), mtPeerAddr(2), "right", 1},
		{"ack with another seq not relayed", mtPeer(2), mtPeerAddr(2), "wrong", 0},
		{"duplicate ack relayed once", mtPeer(2), mtPeerAddr(2), "twice", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mtConfig()
			h := newMT(t, cfg)
			h.joinPeers(3, 1)
			requester := mtPeerAddr(1)
			const reqSeq = 7777
			h.feed(requester, &wire.PingReq{Seq: reqSeq, Target: tc.target, TargetAddr: wire.EncodeAddr(tc.addr), From: mtPeer(1)})
			out := h.ready()
			ps, pkts := out.pings()
			require.Len(t, ps, 1, "the target is pinged")
			require.Len(t, out.Packets, 1, "nothing else is sent")
			require.Equal(t, tc.addr, pkts[0].To)
			require.Equal(t, tc.target, ps[0].Target)
			require.Equal(t, mtSelf, ps[0].From)
			require.Equal(t, uint64(1), h.m.Stats().PingReqsServed)

			seq := ps[0].Seq
			if tc.ack == "wrong" {
				seq += 1000
			}
			h.now = h.now.Add(cfg.ProbeTimeout / 5)
			h.feed(tc.addr, &wire.Ack{Seq: seq})
			if tc.ack == "twice" {
				h.feed(tc.addr, &wire.Ack{Seq: seq})
			}
			out = h.ready()
			var relayed []*wire.Ack
			for _, p := range out.Packets {
				for _, msg := range p.Msgs {
					if a, ok := msg.(*wire.Ack); ok {
						require.Equal(t, requester, p.To, "an ack goes back to the requester")
						relayed = append(relayed, a)
					}
				}
			}
			require.Len(t, relayed, tc.wantRelay)
			for _, a := range relayed {
				require.Equal(t, uint32(reqSeq), a.Seq, "the relayed ack carries the requester's seq")
			}
		})
	}
}

// TestPingAnswer: a ping naming this member is acked with its seq; one
// naming another member (who used to live at this address) is not
// answered.
func TestPingAnswer(t *testing.T) {
	tests := []struct {
		name   string
		target string
		acked  bool
	}{
		{"addressed to us", mtSelf, true},
		{"addressed to another member", "someone-else", false},
		{"addressed to a known peer", mtPeer(2), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.joinPeers(3, 1)
			h.feed(mtPeerAddr(1), &wire.Ping{Seq: 4242, Target: tc.target, From: mtPeer(1)})
			out := h.ready()
			if !tc.acked {
				require.Empty(t, out.Packets)
				return
			}
			require.Len(t, out.Packets, 1)
			require.Equal(t, mtPeerAddr(1), out.Packets[0].To)
			require.Equal(t, &wire.Ack{Seq: 4242}, out.Packets[0].Msgs[0])
		})
	}
}

// TestPingReqNack: with Nacks, a relay whose target stays silent tells the
// requester so at 80% of ProbeTimeout (Lifeguard §IV-A); it says nothing
// when the target answered, or with Nacks off.
func TestPingReqNack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nacks    bool
		answered bool
		wantNack bool
	}{
		{"silent target", true, false, true},
		{"target answered", true, true, false},
		{"nacks off", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mtConfig()
			cfg.Nacks = tc.nacks
			h := newMT(t, cfg)
			h.joinPeers(3, 1)
			t0 := h.now
			const reqSeq = 99
			h.feed(mtPeerAddr(1), &wire.PingReq{Seq: reqSeq, Target: mtPeer(2), TargetAddr: wire.EncodeAddr(mtPeerAddr(2)), From: mtPeer(1)})
			ps, _ := h.ready().pings()
			require.Len(t, ps, 1)
			if tc.answered {
				h.feed(mtPeerAddr(2), &wire.Ack{Seq: ps[0].Seq})
				h.m.Ready()
			}
			nackAt := t0.Add(cfg.ProbeTimeout * 4 / 5)
			nacksTo := func(out mtOut) []*wire.Nack {
				var ns []*wire.Nack
				for _, p := range out.Packets {
					for _, msg := range p.Msgs {
						if n, ok := msg.(*wire.Nack); ok {
							require.Equal(t, mtPeerAddr(1), p.To, "the nack goes to the requester")
							ns = append(ns, n)
						}
					}
				}
				return ns
			}
			h.tick(nackAt.Add(-time.Nanosecond))
			require.Empty(t, nacksTo(h.ready()), "no nack before 80%% of ProbeTimeout")
			h.tick(nackAt)
			ns := nacksTo(h.ready())
			h.tick(t0.Add(cfg.ProbeTimeout))
			ns = append(ns, nacksTo(h.ready())...)
			if !tc.wantNack {
				require.Empty(t, ns)
				return
			}
			require.Equal(t, []*wire.Nack{{Seq: reqSeq}}, ns, "one nack, with the requester's seq")
		})
	}
}

// TestProbeSavedByTraffic: with AnyTrafficHeartbeat, a probe that got no
// ack but during which the target was heard from is a success (Geode).
func TestProbeSavedByTraffic(t *testing.T) {
	for _, heartbeat := range []bool{true, false} {
		t.Run(fmt.Sprintf("AnyTrafficHeartbeat=%v", heartbeat), func(t *testing.T) {
			cfg := mtConfig()
			cfg.AnyTrafficHeartbeat = heartbeat
			cfg.IndirectChecks = 0
			h := newMT(t, cfg)
			h.joinPeers(3, 1)
			ping, pkt, _ := h.firstProbe()
			t0 := h.now
			h.now = t0.Add(cfg.ProbeTimeout / 2)
			h.feed(pkt.To, &wire.Ping{Seq: 5, Target: mtSelf, From: ping.Target}) // the target talks, but its ack is lost
			h.m.Ready()
			h.tick(t0.Add(cfg.ProbeInterval))
			mem, _ := h.m.Member(ping.Target)
			if heartbeat {
				require.Equal(t, StateAlive, mem.State)
				require.Equal(t, uint64(1), h.m.Stats().ProbesSavedByTraffic)
				require.Zero(t, h.m.Stats().ProbesFailed)
				return
			}
			require.Equal(t, StateSuspect, mem.State)
			require.Zero(t, h.m.Stats().ProbesSavedByTraffic)
		})
	}
}

// TestLocalHealthScalesProbing: a failed probe raises the local health
// score and the next probe periods and timeouts scale by score+1; a
// successful probe lowers it again (Lifeguard §IV-A). Probes are acked
// here except the first.
func TestLocalHealthScalesProbing(t *testing.T) {
	cfg := mtConfig()
	cfg.AwarenessMaxMultiplier = 8
	cfg.IndirectChecks = 1
	h := newMT(t, cfg)
	h.joinPeers(5, 1)
	_, _, _ = h.firstProbe() // not acked: fails at t0+ProbeInterval
	t0 := h.now
	require.Zero(t, h.m.HealthScore())

	// The failure and the next probe, which waits twice as long.
	h.tick(t0.Add(cfg.ProbeTimeout))
	h.m.Ready()
	h.tick(t0.Add(cfg.ProbeInterval))
	require.Equal(t, 1, h.m.HealthScore(), "a failed probe raises the score")
	out := h.ready()
	ps, pkts := out.pings()
	require.Len(t, ps, 1, "the next probe starts")
	t1 := h.now
	h.requireQuiet(t1.Add(cfg.ProbeTimeout), "the probe timeout is scaled: no ping-req yet")
	h.tick(t1.Add(2 * cfg.ProbeTimeout))
	reqs, _ := h.ready().pingReqs()
	require.Len(t, reqs, 1, "ping-reqs after 2·ProbeTimeout")
	h.feed(pkts[0].To, &wire.Ack{Seq: ps[0].Seq})
	require.Zero(t, h.m.HealthScore(), "a successful probe lowers the score")
	h.requireQuiet(t1.Add(2*cfg.ProbeInterval-time.Nanosecond), "the probe interval was scaled when the probe started")
	h.tick(t1.Add(2 * cfg.ProbeInterval))
	ps, _ = h.ready().pings()
	require.Len(t, ps, 1)
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
