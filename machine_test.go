package swim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// countAlive counts the packets carrying the alive delta want.
func countAlive(pkts []mtPkt, want *wire.Alive) int {
	n := 0
	for _, p := range pkts {
		for _, msg := range p.Msgs {
			if a, ok := msg.(*wire.Alive); ok && a.Name == want.Name && a.Incarnation == want.Incarnation {
				n++
			}
		}
	}
	return n
}

// TestPiggybackWithinPacketBudget: whatever is pending, no packet the
// Machine sends (probes, ping-reqs, acks, gossip) exceeds PacketBudget,
// and packets do carry several deltas when they fit.
func TestPiggybackWithinPacketBudget(t *testing.T) {
	for _, budget := range []int{512, 1400} {
		t.Run(fmt.Sprintf("PacketBudget=%d", budget), func(t *testing.T) {
			cfg := mtConfig()
			cfg.PacketBudget = budget
			cfg.GossipInterval = 50 * time.Millisecond
			cfg.GossipNodes = 3
			h := newMT(t, cfg)
			h.joinPeers(10, 1)
			for i := 100; i < 180; i++ {
				a := mtAlive(i, 1)
				a.Meta = bytes.Repeat([]byte{'m'}, (i*37)%300)
				h.feed(mtPeerAddr(1), a)
			}
			silent := map[netip.AddrPort]bool{} // most probes fail: ping-reqs go out too
			for i := 100; i < 180; i++ {
				silent[mtPeerAddr(i)] = true
			}
			var pkts []mtPkt
			for i := 0; i < 20; i++ {
				h.feed(mtStranger, &wire.Ping{Seq: uint32(i), Target: mtSelf, From: "stranger"})
				pkts = append(pkts, h.respond(silent).Packets...)
			}
			pkts = append(pkts, h.run(mtStart.Add(5*time.Second), silent).Packets...)

			kinds := map[string]bool{}
			multi, largest := 0, 0
			for _, p := range pkts {
				require.LessOrEqual(t, p.Len, budget, "packet to %s with %d messages", p.To, len(p.Msgs))
				largest = max(largest, p.Len)
				if len(deltas(p.Msgs)) > 1 {
					multi++
				}
				kinds[fmt.Sprintf("%T", p.Msgs[0])] = true
			}
			require.Positive(t, multi, "some packets carry several deltas")
			require.Greater(t, largest, budget*3/4, "packets are filled up to the budget")
			for _, k := range []string{"*wire.Ping", "*wire.PingReq", "*wire.Ack", "*wire.Alive"} {
				require.True(t, kinds[k], "no packet led by %s was checked: %v", k, kinds)
			}
		})
	}
}

// TestRetransmitLimit: a delta rides on RetransmitMult·max(2,
// ceil(log10(N+1))) packets, then is retired.
func TestRetransmitLimit(t *testing.T) {
	tests := []struct {
		peers, mult, want int
	}{
		{1, 4, 8},     // N=2: log10(3) rounds up to 1, the floor of 2 applies
		{8, 4, 8},     // N=9: log10(10) = 1
		{9, 4, 8},     // N=10: log10(11) rounds up to 2
		{98, 4, 8},    // N=99: log10(100) = 2
		{99, 4, 12},   // N=100: log10(101) rounds up to 3
		{999, 4, 16},  // N=1000: log10(1001) rounds up to 4
		{99, 1, 3},    // RetransmitMult scales it
		{1, 1, 2},     // the smallest limit
		{999, 3, 12},  // ...
		{20, 2, 4},    // N=21
		{150, 2, 6},   // N=151
		{1500, 1, 4},  // N=1501
		{12, 10, 20},  // N=13
		{100, 10, 30}, // N=101
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("N=%d/mult=%d", tc.peers+1, tc.mult), func(t *testing.T) {
			cfg := mtConfig()
			cfg.RetransmitMult = tc.mult
			h := newMT(t, cfg)
			h.joinPeers(tc.peers, 1)
			update := mtAlive(1, 2)
			h.feed(mtStranger, update)
			h.m.Ready()
			sent := 0
			for i := 0; i < tc.want+5; i++ {
				for _, d := range h.piggyback() {
					if a, ok := d.(*wire.Alive); ok && a.Name == update.Name && a.Incarnation == 2 {
						sent++
						require.Equal(t, i+1, sent, "the delta rides on every packet until retired")
					}
				}
			}
			require.Equal(t, tc.want, sent)
		})
	}
}

// TestGossipRounds: while deltas are pending, every GossipInterval they go
// to GossipNodes distinct random members in packets of their own; once the
// queue is empty no gossip packet goes out.
func TestGossipRounds(t *testing.T) {
	for _, nodes := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("GossipNodes=%d", nodes), func(t *testing.T) {
			cfg := mtConfig()
			cfg.GossipInterval = 200 * time.Millisecond
			cfg.GossipNodes = nodes
			cfg.RetransmitMult = 4 // N=6: 8 transmissions
			h := newMT(t, cfg)
			h.joinPeers(5, 1)
			t0 := h.now
			update := mtAlive(1, 2)
			h.feed(mtStranger, update)
			require.False(t, h.m.NextDeadline().After(t0), "pending gossip is due at once")
			out := h.run(t0.Add(5*time.Second), nil)

			const limit = 8
			require.Equal(t, limit, countAlive(out.Packets, update), "the delta is sent RetransmitMult·2 times in all")
			var lastSent time.Time
			for _, p := range out.Packets {
				if countAlive([]mtPkt{p}, update) > 0 {
					lastSent = p.At
				}
			}
			rounds := map[time.Time][]netip.AddrPort{}
			var times []time.Time
			peers := map[netip.AddrPort]bool{}
			for i := 1; i <= 5; i++ {
				peers[mtPeerAddr(i)] = true
			}
			for _, p := range out.Packets {
				if !p.isGossipOnly() {
					continue
				}
				require.False(t, p.At.After(lastSent), "gossip after the queue emptied")
				require.Zero(t, p.At.Sub(t0)%cfg.GossipInterval, "gossip at %v, off the GossipInterval grid", p.At.Sub(t0))
				require.True(t, peers[p.To], "gossip to %s, not a member", p.To)
				if _, ok := rounds[p.At]; !ok {
					times = append(times, p.At)
				}
				rounds[p.At] = append(rounds[p.At], p.To)
			}
			require.NotEmpty(t, times)
			require.Equal(t, t0, times[0], "the first round goes out at once")
			for i, at := range times {
				to := rounds[at]
				require.LessOrEqual(t, len(to), nodes)
				if i < len(times)-1 {
					require.Len(t, to, nodes, "round at %v: GossipNodes targets while deltas are pending", at.Sub(t0))
					require.Equal(t, at.Add(cfg.GossipInterval), times[i+1], "one round per GossipInterval while deltas are pending")
				}
				slices.SortFunc(to, func(a, b netip.AddrPort) int { return a.Compare(b) })
				require.Len(t, slices.Compact(to), len(rounds[at]), "distinct targets in a round")
			}
		})
	}
}

// malformedPackets returns inputs HandlePacket must reject.
func malformedPackets(t *testing.T) map[string][]byte {
	ping, err := wire.AppendPacket(nil, &wire.Ping{Seq: 300, Target: mtSelf, From: mtPeer(1)})
	require.NoError(t, err)
	compound := mtPacket(t, &wire.Ping{Seq: 7, Target: mtSelf, From: mtPeer(1)},
		mtAlive(4, 2), &wire.Suspect{Name: mtPeer(5), Incarnation: 9, From: mtPeer(1)})
	pushPull, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(1), Members: []wire.MemberState{mtMember(1, StateAlive, 1)}})
	require.NoError(t, err)
	cases := map[string][]byte{
		"nil":                nil,
		"empty":              {},
		"version only":       {wire.Version},
		"wrong version":      append([]byte{wire.Version + 1}, ping[1:]...),
		"type without body":  {wire.Version, byte(wire.TypeAck)},
		"trailing byte":      append(slices.Clone(ping), 0),
		"compound trailing":  append(slices.Clone(compound), 0xc0),
		"push-pull over UDP": pushPull,
		"oversized":          append([]byte{wire.Version, byte(wire.TypeAck)}, make([]byte, wire.MaxPacketSize)...),
		"text":               []byte("GET / HTTP/1.1\r\n\r\n"),
		"compound in compound": wire.AppendCompound(nil, [][]byte{
			compound[1:], // a compound frame as an item
			compound[1:],
		}),
	}
	for i := 0; i < len(ping); i++ {
		cases[fmt.Sprintf("ping truncated to %d", i)] = ping[:i]
	}
	for i := 0; i < len(compound); i++ {
		cases[fmt.Sprintf("compound truncated to %d", i)] = compound[:i]
	}
	return cases
}

// TestMalformedPackets: garbage or truncated packets are reported as
// errors and counted in PacketsDropped; they never panic and change
// nothing.
func TestMalformedPackets(t *testing.T) {
	for name, data := range malformedPackets(t) {
		t.Run(name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.joinPeers(3, 1)
			before := h.m.Stats()
			version := h.m.Status().Version
			var err error
			require.NotPanics(t, func() { err = h.m.HandlePacket(h.now, mtPeerAddr(1), data) })
			require.Error(t, err)
			require.Equal(t, before.PacketsDropped+1, h.m.Stats().PacketsDropped)
			require.Equal(t, version, h.m.Status().Version, "a rejected packet changes nothing")
			require.True(t, func() bool { r := h.m.Ready(); return r.IsEmpty() }(), "a rejected packet is not answered")
		})
	}
}

// TestRandomGarbagePackets: random bytes never panic the Machine; whatever
// it rejects with an error it counts.
func TestRandomGarbagePackets(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	rejected, skipped := 0, 0
	for i := 0; i < 5000; i++ {
		data := make([]byte, rng.IntN(80))
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		if len(data) > 0 && i%2 == 0 {
			data[0] = wire.Version
		}
		if len(data) > 1 && i%4 == 0 {
			data[1] = byte(1 + rng.IntN(int(wire.TypeCompound)))
		}
		before := h.m.Stats()
		var err error
		require.NotPanics(t, func() { err = h.m.HandlePacket(h.now, mtPeerAddr(1+i%3), data) }, "input %x", data)
		if err != nil {
			rejected++
			require.Equal(t, before.PacketsDropped+1, h.m.Stats().PacketsDropped, "input %x", data)
		} else if h.m.Stats().UnknownMessages > before.UnknownMessages {
			// A type byte past the known ones: a newer kind, skipped.
			skipped++
		}
		h.m.Ready()
	}
	require.Greater(t, rejected+skipped, 4000)
	require.NotZero(t, skipped)
}

// TestMalformedMessages: well-formed packets carrying unusable messages (an
// alive without a valid address, a ping-req with a bad target address) are
// dropped and counted, and change nothing.
func TestMalformedMessages(t *testing.T) {
	tests := []struct {
		name string
		msg  wire.Message
	}{
		{"alive with a bad address", &wire.Alive{Name: "x", Addr: []byte{1, 2, 3}, Incarnation: 1}},
		{"alive without a name", &wire.Alive{Name: "", Addr: wire.EncodeAddr(mtPeerAddr(9)), Incarnation: 1}},
		// Two invalid names would print alike ("\ufffd") in JSON and logs.
		{"alive with a name not valid UTF-8", &wire.Alive{Name: "p\xff\xfe", Addr: wire.EncodeAddr(mtPeerAddr(9)), Incarnation: 1}},
		{"alive with metadata over MaxMetaSize", &wire.Alive{Name: "x", Addr: wire.EncodeAddr(mtPeerAddr(9)), Incarnation: 1,
			Meta: make([]byte, 513)}},
		{"ping-req with a bad target address", &wire.PingReq{Seq: 1, Target: mtPeer(2), TargetAddr: []byte{9}, From: mtPeer(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.joinPeers(3, 1)
			before := h.m.Stats().PacketsDropped
			version := h.m.Status().Version
			require.NotPanics(t, func() { _ = h.m.HandlePacket(h.now, mtPeerAddr(1), mtPacket(t, tc.msg)) })
			require.Equal(t, before+1, h.m.Stats().PacketsDropped)
			require.Equal(t, version, h.m.Status().Version)
			out := h.ready()
			require.Empty(t, out.Packets)
			require.Empty(t, out.Events)
		})
	}
}

// TestMalformedStreams: garbage on a stream is an error, never a panic (a
// panic there would let one TCP connection crash the process).
func TestMalformedStreams(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	ping := mustPacket(t, &wire.Ping{Seq: 1, Target: mtSelf, From: mtPeer(1)})
	tests := []struct {
		name string
		data []byte
	}{
		{name: "nil"},
		{name: "garbage", data: []byte("garbage")},
		{name: "truncated ping", data: ping[:len(ping)-2]},
		{name: "ack", data: mustPacket(t, &wire.Ack{Seq: 1})},
		{name: "ping for another member", data: mustPacket(t, &wire.Ping{Seq: 1, Target: "other", From: mtPeer(1)})},
		{name: "push-pull and more", data: mtPacket(t, &wire.PushPull{From: mtPeer(1)}, &wire.Ack{Seq: 2})},
		{name: "wrong version", data: append([]byte{wire.Version + 1}, ping[1:]...)},
		{name: "unknown type", data: []byte{wire.Version, 0xee}},
		{name: "compound of garbage", data: []byte{wire.Version, byte(wire.TypeCompound), 0x92, 0xc4, 0x01, 0xff, 0xc4, 0x00}},
		{name: "empty compound", data: wire.AppendCompound(nil, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = h.m.HandleStream(h.now, mtPeerAddr(1), tc.data) })
			require.Error(t, err)
		})
	}
}

// TestMalformedStreamResponses: a garbled reply to one of our stream
// requests is an error and counted, never a panic.
func TestMalformedStreamResponses(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{name: "nil"},
		{name: "garbage", data: []byte("garbage")},
		{name: "ack instead of push-pull", data: mustPacket(t, &wire.Ack{Seq: 1})},
		{name: "push-pull and more", data: mtPacket(t, &wire.PushPull{From: mtPeer(1)}, &wire.Ack{Seq: 2})},
		{name: "empty compound", data: wire.AppendCompound(nil, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
			var err error
			require.NotPanics(t, func() { err = h.m.HandleStreamResponse(h.now, ids[0], tc.data, nil) })
			require.Error(t, err)
			require.Equal(t, uint64(1), h.m.Stats().PushPullsFailed)
			require.Equal(t, 1, h.m.NumMembers())
		})
	}
}

func mustPacket(t *testing.T, msg wire.Message) []byte {
	t.Helper()
	b, err := wire.AppendPacket(nil, msg)
	require.NoError(t, err)
	return b
}

// TestJoinFollowUpsStartWithTheSeed: after a join, the first follow-up
// push-pull goes back to the seed an eighth to a quarter of a probe period
// later (it has heard of whoever joined through it meanwhile); the next
// ones come at doubling gaps, to random members.
func TestJoinFollowUpsStartWithTheSeed(t *testing.T) {
	cfg := mtConfig()
	cfg.PushPullInterval = time.Minute
	seed := mtPeerAddr(1)
	for rngSeed := uint64(1); rngSeed <= 5; rngSeed++ {
		m, err := NewMachine(cfg, mtSelfAddr, rand.New(rand.NewPCG(rngSeed, 2)), mtStart)
		require.NoError(t, err)
		h := &mt{t: t, m: m, cfg: cfg, now: mtStart}
		ids := h.m.Join(h.now, []netip.AddrPort{seed})
		require.Len(t, ids, 1)
		members := make([]wire.MemberState, 0, 8)
		for i := 1; i <= 8; i++ {
			members = append(members, mtMember(i, StateAlive, 1))
		}
		reply, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(1), Members: members})
		require.NoError(t, err)
		require.NoError(t, h.m.HandleStreamResponse(h.now, ids[0], reply, nil))
		joined := h.now
		h.m.Ready()

		var at []time.Duration
		var to []netip.AddrPort
		for i := 0; len(at) < 3 && i < 10000; i++ {
			out := h.step(joined.Add(10*cfg.ProbeInterval), nil)
			for _, s := range out.Streams {
				at = append(at, h.now.Sub(joined))
				to = append(to, s.To)
				require.Error(t, h.m.HandleStreamResponse(h.now, s.ID, nil, errors.New("not answered in this test")))
			}
		}
		require.Len(t, at, 3, "three follow-ups")
		require.Equal(t, seed, to[0], "the first follow-up goes to the seed")
		require.GreaterOrEqual(t, at[0], cfg.ProbeInterval/8)
		require.LessOrEqual(t, at[0], cfg.ProbeInterval/4)
		require.GreaterOrEqual(t, at[1]-at[0], cfg.ProbeInterval, "then a gap of one to two periods")
		require.LessOrEqual(t, at[1]-at[0], 2*cfg.ProbeInterval)
		require.GreaterOrEqual(t, at[2]-at[1], 2*cfg.ProbeInterval, "then two to four")
		require.LessOrEqual(t, at[2]-at[1], 4*cfg.ProbeInterval)
	}
}

// TestInvalidNamesNotMerged: a push-pull's members whose names are not
// valid UTF-8 are not admitted; the others are.
func TestInvalidNamesNotMerged(t *testing.T) {
	h := newMT(t, mtConfig())
	bad := mtMember(7, StateAlive, 1)
	bad.Name = "p\xc3\x28"
	h.join(mtMember(1, StateAlive, 1), bad)
	require.Equal(t, 2, h.m.NumMembers())
	_, ok := h.m.Member(bad.Name)
	require.False(t, ok)
}
