package swim

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Attacks by a stranger on the network, each tried on the Machine as the
// packets or streams an attacker would send, with what must hold after it.
// Each of these tests failed on the code before the defence it checks.

// mtInvented is the push-pull or gossip entry of a member nobody runs.
func mtInvented(i int) wire.MemberState {
	return wire.MemberState{
		Name:        "fake-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + string(rune('a'+i/17576%26)),
		Addr:        wire.EncodeAddr(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 7946)),
		Incarnation: 1,
	}
}

// inventedPushPull encodes a push-pull from a stranger announcing n
// invented members.
func inventedPushPull(t *testing.T, n int) []byte {
	t.Helper()
	w := wire.NewPushPullWriter(nil, "stranger", false, n)
	addr := netip.MustParseAddrPort("10.200.0.1:7946")
	var name [16]byte
	for i := range n {
		b := append(name[:0], "fake-"...)
		for v := i; ; v /= 36 {
			b = append(b, "0123456789abcdefghijklmnopqrstuvwxyz"[v%36])
			if v < 36 {
				break
			}
		}
		w.Add(string(b), addr, 1, uint8(StateAlive), nil)
	}
	data, err := w.Bytes()
	require.NoError(t, err)
	return data
}

// TestAttackHugePushPullRefused: a push-pull announcing 2^20 invented
// members (the wire limit), if merged, would crash the member when it
// encoded its reply. It is refused whole, before anything is merged.
func TestAttackHugePushPullRefused(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	data := inventedPushPull(t, wire.MaxPushPullMembers)
	start := time.Now()
	reply, err := h.m.HandleStream(h.now, mtStranger, data)
	took := time.Since(start)
	require.Error(t, err)
	require.Nil(t, reply)
	require.Equal(t, 4, h.m.NumMembers(), "nothing of it was merged")
	require.Equal(t, uint64(1), h.m.Stats().PushPullsRefused)
	t.Logf("refused in %v", took)
}

// TestAttackTableCap: invented members arriving by gossip (255 fit in one
// compound packet) or push-pull fill the table only up to MaxMembers; the
// rest are refused and counted, and known members keep working.
func TestAttackTableCap(t *testing.T) {
	cfg := mtConfig()
	cfg.MaxMembers = 20
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	msgs := make([]wire.Message, 0, 200)
	for i := range 200 {
		inv := mtInvented(i)
		msgs = append(msgs, &wire.Alive{Name: inv.Name, Addr: inv.Addr, Incarnation: inv.Incarnation})
	}
	h.feed(mtStranger, msgs...)
	require.Equal(t, 20, h.m.NumMembers(), "the table stops at MaxMembers")
	require.Equal(t, uint64(200-16), h.m.Stats().MembersRefused)

	// A known member's news still counts.
	h.feed(mtPeerAddr(1), &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(mtPeerAddr(1)), Incarnation: 5, Meta: []byte("new")})
	mem, ok := h.m.Member(mtPeer(1))
	require.True(t, ok)
	require.Equal(t, uint64(5), mem.Incarnation)

	// A push-pull announcing more than MaxMembers is refused whole.
	_, err := h.m.HandleStream(h.now, mtStranger, inventedPushPull(t, cfg.MaxMembers+1))
	require.Error(t, err)
	require.Equal(t, uint64(1), h.m.Stats().PushPullsRefused)
}

// TestAttackIncarnationWrap: with incarnation 2^64-1 one packet would be
// final if incarnations wrapped: a refutation computing seen+1 would get 0,
// so Dead{b, max} would keep b dead for good and Alive{b, attacker, max}
// would move b's address to the attacker's for good. Such deltas are
// implausible and dropped.
func TestAttackIncarnationWrap(t *testing.T) {
	attacker := netip.MustParseAddrPort("192.0.2.66:7946")
	t.Run("dead at max about a peer", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		h.feed(mtStranger, &wire.Dead{Name: mtPeer(1), Incarnation: math.MaxUint64, From: "attacker"})
		mem, _ := h.m.Member(mtPeer(1))
		require.Equal(t, StateAlive, mem.State)
		require.Equal(t, uint64(1), mem.Incarnation)
		require.Equal(t, uint64(1), h.m.Stats().DeltasImplausible)
	})
	t.Run("alive at max with another address", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		h.feed(mtStranger, &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(attacker), Incarnation: math.MaxUint64})
		mem, _ := h.m.Member(mtPeer(1))
		require.Equal(t, mtPeerAddr(1), mem.Addr, "the address stays the member's")
		require.Equal(t, uint64(1), h.m.Stats().DeltasImplausible)
	})
	t.Run("suspicion of self at max", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		h.feed(mtStranger, &wire.Suspect{Name: mtSelf, Incarnation: math.MaxUint64, From: "attacker"})
		require.Equal(t, uint64(0), h.m.LocalMember().Incarnation, "no refutation of an implausible claim")
		// A plausible accusation is still refuted, by one.
		h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtSelf, Incarnation: 0, From: mtPeer(1)})
		require.Equal(t, uint64(1), h.m.LocalMember().Incarnation)
	})
	t.Run("a jump that is plausible is kept", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		// A member that restarted and overtook its previous life, or
		// refuted many times while we were cut off.
		h.feed(mtPeerAddr(1), &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(mtPeerAddr(1)), Incarnation: 1 + MaxIncarnationJump})
		mem, _ := h.m.Member(mtPeer(1))
		require.Equal(t, uint64(1+MaxIncarnationJump), mem.Incarnation)
		require.Equal(t, uint64(0), h.m.Stats().DeltasImplausible)
	})
	t.Run("refutation saturates", func(t *testing.T) {
		require.Equal(t, uint64(math.MaxUint64), nextIncarnation(math.MaxUint64))
		require.Equal(t, uint64(8), nextIncarnation(7))
	})
}

// TestAttackSpoofedLeave: a leave at a member's current incarnation (any
// push-pull reveals it) is easy to forge; applied at once, it would remove
// the member. A leave reported by anyone is checked with the member itself
// first: a ping carrying the claim, which a member that did not leave
// refutes.
func TestAttackSpoofedLeave(t *testing.T) {
	leave := &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(1), Left: true}
	t.Run("spoofed", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		h.feed(mtStranger, leave)
		out := h.ready()
		require.Empty(t, out.eventsAbout(mtPeer(1)), "not left on hearsay")
		ps, pkts := out.pings()
		require.Len(t, ps, 1, "the member is asked")
		require.Equal(t, mtPeerAddr(1), pkts[0].To)
		require.True(t, containsMsg(pkts[0].Msgs, leave), "the ping carries the claim, so the member can refute it")
		// The member did not leave: it refutes, on the ack.
		h.feed(mtPeerAddr(1), &wire.Ack{Seq: ps[0].Seq}, mtAlive(1, 2))
		h.tick(h.now.Add(time.Minute))
		out = h.ready()
		require.Empty(t, out.eventsAbout(mtPeer(1)))
		mem, _ := h.m.Member(mtPeer(1))
		require.Equal(t, StateAlive, mem.State)
		require.Equal(t, uint64(2), mem.Incarnation)
	})
	t.Run("real, member still answering", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		h.feed(mtPeerAddr(2), leave)
		ps, _ := h.ready().pings()
		require.Len(t, ps, 1)
		h.feed(mtPeerAddr(1), &wire.Ack{Seq: ps[0].Seq})
		evs := h.ready().eventsAbout(mtPeer(1))
		require.Len(t, evs, 1)
		require.Equal(t, EventLeave, evs[0].Kind)
		require.Equal(t, StateLeft, evs[0].Member.State)
	})
	t.Run("real, member gone", func(t *testing.T) {
		cfg := mtConfig()
		h := newMT(t, cfg)
		h.joinPeers(3, 1)
		h.feed(mtPeerAddr(2), leave)
		h.m.Ready()
		h.tick(h.now.Add(cfg.ProbeTimeout))
		evs := h.ready().eventsAbout(mtPeer(1))
		require.Len(t, evs, 1)
		require.Equal(t, StateLeft, evs[0].Member.State)
	})
}

// TestAttackAckSpray: were sequence numbers to count up from 0 and any ack
// with the right one to count, spraying acks 1..255 would keep a crashed
// member alive. They start at a random value, and an ack counts only from
// the probed member or a relay that was asked.
func TestAttackAckSpray(t *testing.T) {
	t.Run("random start", func(t *testing.T) {
		a, err := NewMachine(mtConfig(), mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
		require.NoError(t, err)
		b, err := NewMachine(mtConfig(), mtSelfAddr, rand.New(rand.NewPCG(3, 4)), mtStart)
		require.NoError(t, err)
		require.NotEqual(t, a.nextSeq(), b.nextSeq())
		require.Greater(t, a.nextSeq(), uint32(256))
	})
	t.Run("ack from a stranger", func(t *testing.T) {
		cfg := mtConfig()
		cfg.IndirectChecks = 0
		h := newMT(t, cfg)
		h.joinPeers(3, 1)
		ping, _, _ := h.firstProbe()
		t0 := h.now
		h.feed(mtStranger, &wire.Ack{Seq: ping.Seq})
		h.m.Ready()
		h.tick(t0.Add(cfg.ProbeInterval))
		mem, _ := h.m.Member(ping.Target)
		require.Equal(t, StateSuspect, mem.State, "a stranger's ack proves nothing")
		require.Equal(t, uint64(1), h.m.Stats().AcksRefused)
	})
	t.Run("ack relayed by a member not asked", func(t *testing.T) {
		cfg := mtConfig()
		cfg.IndirectChecks = 1
		h := newMT(t, cfg)
		h.joinPeers(3, 1)
		ping, pkt, _ := h.firstProbe()
		t0 := h.now
		h.tick(t0.Add(cfg.ProbeTimeout))
		_, asked := h.ready().pingReqs()
		require.Len(t, asked, 1)
		for i := 1; i <= 3; i++ {
			if a := mtPeerAddr(i); a != asked[0] && a != pkt.To {
				h.feed(a, &wire.Ack{Seq: ping.Seq})
			}
		}
		h.m.Ready()
		h.tick(t0.Add(cfg.ProbeInterval))
		mem, _ := h.m.Member(ping.Target)
		require.Equal(t, StateSuspect, mem.State)
	})
	t.Run("duplicated nack", func(t *testing.T) {
		cfg := mtConfig()
		cfg.Nacks = true
		cfg.AwarenessMaxMultiplier = 8
		cfg.IndirectChecks = 2
		h := newMT(t, cfg)
		h.joinPeers(4, 1)
		ping, _, _ := h.firstProbe()
		t0 := h.now
		h.tick(t0.Add(cfg.ProbeTimeout))
		_, asked := h.ready().pingReqs()
		require.Len(t, asked, 2)
		for range 5 {
			h.feed(asked[0], &wire.Nack{Seq: ping.Seq})
		}
		h.feed(mtStranger, &wire.Nack{Seq: ping.Seq})
		h.m.Ready()
		h.tick(t0.Add(cfg.ProbeInterval))
		st := h.m.Stats()
		require.Equal(t, uint64(1), st.NacksMissing, "one relay stayed silent")
		require.Equal(t, uint64(1), st.NacksReceived, "one nack counted, once")
		require.Equal(t, 1, h.m.HealthScore())
	})
}

// TestAttackAmplification: a spoofed ping must not draw a reply carrying
// every queued delta (a 6-byte ping, a 1,330-byte reply), nor a ping-req
// make a member ping any address for anyone.
func TestAttackAmplification(t *testing.T) {
	t.Run("ping from a stranger", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		for i := 1; i <= 3; i++ {
			h.feed(mtPeerAddr(i), mtAlive(i, 2)) // deltas queued for gossip
		}
		h.m.Ready()
		req := mtPacket(t, &wire.Ping{Seq: 1, From: ""})
		require.NoError(t, h.m.HandlePacket(h.now, mtStranger, req))
		out := h.ready()
		require.Len(t, out.Packets, 1)
		require.LessOrEqual(t, out.Packets[0].Len, len(req), "no more bytes back than came in")
		require.Equal(t, []wire.Message{&wire.Ack{Seq: 1}}, out.Packets[0].Msgs)
		// A member asking gets the deltas as before.
		h.feed(mtPeerAddr(1), &wire.Ping{Seq: 2, Target: mtSelf, From: mtPeer(1)})
		out = h.ready()
		require.Len(t, out.Packets, 1)
		require.NotEmpty(t, deltas(out.Packets[0].Msgs))
	})
	t.Run("ping-req from a stranger", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		victim := netip.MustParseAddrPort("198.51.100.7:53")
		h.feed(mtStranger, &wire.PingReq{Seq: 1, Target: "x", TargetAddr: wire.EncodeAddr(victim), From: "x"})
		h.feed(mtStranger, &wire.PingReq{Seq: 2, Target: mtPeer(2), TargetAddr: wire.EncodeAddr(mtPeerAddr(2)), From: "x"})
		require.Empty(t, h.ready().Packets)
		require.Equal(t, uint64(2), h.m.Stats().PingReqsRefused)
	})
	t.Run("ping-req for an address no member has", func(t *testing.T) {
		// A member may ask for a target we do not know yet (it joined a
		// moment ago), so the ping goes out, but bare: a ping-req forged
		// in a member's name reflects no more bytes than it carried.
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		for i := 1; i <= 3; i++ {
			h.feed(mtPeerAddr(i), mtAlive(i, 2)) // deltas queued for gossip
		}
		h.m.Ready()
		victim := netip.MustParseAddrPort("198.51.100.7:53")
		for _, target := range []string{mtPeer(2), "unknown"} {
			req := mtPacket(t, &wire.PingReq{Seq: 1, Target: target, TargetAddr: wire.EncodeAddr(victim), From: mtPeer(1)})
			require.NoError(t, h.m.HandlePacket(h.now, mtPeerAddr(1), req))
			out := h.ready()
			require.Len(t, out.Packets, 1)
			require.Equal(t, victim, out.Packets[0].To)
			require.LessOrEqual(t, out.Packets[0].Len, len(req))
			require.Empty(t, deltas(out.Packets[0].Msgs))
		}
		// A known target at its known address gets the usual ping.
		h.feed(mtPeerAddr(1), &wire.PingReq{Seq: 3, Target: mtPeer(2), TargetAddr: wire.EncodeAddr(mtPeerAddr(2)), From: mtPeer(1)})
		out := h.ready()
		require.Len(t, out.Packets, 1)
		require.NotEmpty(t, deltas(out.Packets[0].Msgs))
	})
	t.Run("ping-req rate", func(t *testing.T) {
		h := newMT(t, mtConfig())
		h.joinPeers(3, 1)
		for i := range 10 * maxRelayBurst {
			h.feed(mtPeerAddr(1), &wire.PingReq{Seq: uint32(i), Target: mtPeer(2), TargetAddr: wire.EncodeAddr(mtPeerAddr(2)), From: mtPeer(1)})
		}
		ps, _ := h.ready().pings()
		require.Len(t, ps, maxRelayBurst, "a burst is served up to its bound")
		require.Equal(t, uint64(9*maxRelayBurst), h.m.Stats().PingReqsRefused)
	})
}

// TestLargeMergeInSlices: a push-pull of more than mergeSlice members is
// applied a slice per input, so a driver holding a lock while it feeds the
// Machine never holds it long; our own entry is applied first, so a
// refutation still rides on the reply.
func TestLargeMergeInSlices(t *testing.T) {
	cfg := mtConfig()
	cfg.MaxMembers = 10000
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	const n = 5000
	w := wire.NewPushPullWriter(nil, "big", false, n+1)
	for i := range n {
		w.Add(mtPeer(100+i), mtPeerAddr(100+i), 1, uint8(StateAlive), nil)
	}
	w.Add(mtSelf, mtSelfAddr, 0, uint8(StateSuspect), nil) // last: applied first all the same
	data, err := w.Bytes()
	require.NoError(t, err)

	reply, err := h.m.HandleStream(h.now, mtPeerAddr(1), data)
	require.NoError(t, err)
	require.Equal(t, 4+mergeSlice, h.m.NumMembers(), "one slice merged with the request")
	msgs, err := wire.DecodeStreamPacket(reply)
	require.NoError(t, err)
	var selfInReply *wire.MemberState
	for i, ms := range msgs[0].(*wire.PushPull).Members {
		if ms.Name == mtSelf {
			selfInReply = &msgs[0].(*wire.PushPull).Members[i]
		}
	}
	require.NotNil(t, selfInReply)
	require.Equal(t, uint64(1), selfInReply.Incarnation, "the reply carries the refutation")

	ticks := 0
	for h.m.NumMembers() < 4+n {
		d := h.m.NextDeadline()
		require.False(t, d.After(h.now), "the next slice is due at once")
		before := h.m.NumMembers()
		h.tick(h.now)
		require.LessOrEqual(t, h.m.NumMembers()-before, mergeSlice)
		ticks++
		require.Less(t, ticks, 10)
	}
	require.Equal(t, (n-mergeSlice+mergeSlice-1)/mergeSlice, ticks)
	require.Empty(t, h.m.merges)
}

// TestTombstones: a member forgotten after its death is remembered by its
// last incarnation. Older news of it (a replay) is dropped, and the member's
// old address is told it was declared dead; newer news brings it back; a
// push-pull with the member itself (restarted under its name) tells it its
// tombstone, so that it refutes above it.
func TestTombstones(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipToDeadTime = 30 * time.Second
	cfg.ReconnectTimeout = time.Hour
	forgotten := func(t *testing.T) *mt {
		h := newMT(t, cfg)
		h.joinPeers(3, 4)
		h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 4, From: mtPeer(2)})
		h.tick(h.now.Add(cfg.GossipToDeadTime))
		h.m.Ready()
		_, known := h.m.Member(mtPeer(1))
		require.False(t, known, "setup: forgotten")
		return h
	}
	t.Run("old news dropped", func(t *testing.T) {
		h := forgotten(t)
		for _, inc := range []uint64{0, 3, 4} {
			h.feed(mtPeerAddr(2), mtAlive(1, inc))
		}
		out := h.ready()
		_, known := h.m.Member(mtPeer(1))
		require.False(t, known)
		require.Empty(t, out.Events)
		require.Equal(t, uint64(3), h.m.Stats().DeltasStale)
		var told []wire.Message
		for _, p := range out.Packets {
			if p.To == mtPeerAddr(1) {
				told = append(told, p.Msgs...)
			}
		}
		nudge := &wire.Dead{Name: mtPeer(1), Incarnation: 4, From: mtSelf}
		n := 0
		for _, msg := range told {
			if reflect.DeepEqual(msg, nudge) {
				n++
			}
		}
		require.Equal(t, 1, n, "the member is told, once")
	})
	t.Run("new news accepted", func(t *testing.T) {
		h := forgotten(t)
		h.feed(mtPeerAddr(2), mtAlive(1, 5))
		evs := h.ready().eventsAbout(mtPeer(1))
		require.Len(t, evs, 1)
		require.Equal(t, EventJoin, evs[0].Kind)
	})
	t.Run("restarted member told its tombstone", func(t *testing.T) {
		h := forgotten(t)
		req, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(1), Join: true, Members: []wire.MemberState{mtMember(1, StateAlive, 0)}})
		require.NoError(t, err)
		reply, err := h.m.HandleStream(h.now, mtPeerAddr(1), req)
		require.NoError(t, err)
		_, known := h.m.Member(mtPeer(1))
		require.False(t, known, "its alive at 0 is older than its tombstone")
		msgs, err := wire.DecodeStreamPacket(reply)
		require.NoError(t, err)
		require.Contains(t, msgs[0].(*wire.PushPull).Members, mtMember(1, StateDead, 4))
	})
	t.Run("reply to our own exchange is first-hand", func(t *testing.T) {
		h := forgotten(t)
		ids := h.m.Join(h.now, []netip.AddrPort{mtPeerAddr(1)})
		reply, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(1), Members: []wire.MemberState{mtMember(1, StateAlive, 4)}})
		require.NoError(t, err)
		require.NoError(t, h.m.HandleStreamResponse(h.now, ids[0], reply, nil))
		mem, known := h.m.Member(mtPeer(1))
		require.True(t, known)
		require.Equal(t, StateAlive, mem.State)
	})
}
