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
				h.feed(mtStranger, a)
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

// TestIdleClusterSendsOnlyProbes: with nothing to disseminate, a member
// sends its probes and nothing else, even with periodic gossip on.
func TestIdleClusterSendsOnlyProbes(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipInterval = 200 * time.Millisecond
	h := newMT(t, cfg)
	h.joinPeers(5, 1)
	h.settle()
	probesBefore := h.m.Stats().Probes
	out := h.run(h.now.Add(10*time.Second), nil)
	require.NotEmpty(t, out.Packets)
	for _, p := range out.Packets {
		require.Len(t, p.Msgs, 1, "an idle member piggybacks nothing")
		require.IsType(t, &wire.Ping{}, p.Msgs[0], "an idle member sends only probes")
	}
	require.Equal(t, h.m.Stats().Probes-probesBefore, uint64(len(out.Packets)))
	require.Empty(t, out.Events)
}

// TestHandleStreamPushPullReturnsState: a push-pull is answered with this
// member's whole view, after merging the peer's.
func TestHandleStreamPushPullReturnsState(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(2), Incarnation: 1, From: "accuser"})
	h.feedConfirmed(mtStranger, &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: mtPeer(3), Left: true})
	h.m.Ready()
	req, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(9), Members: []wire.MemberState{mtMember(9, StateAlive, 4)}})
	require.NoError(t, err)

	reply, err := h.m.HandleStream(h.now, mtPeerAddr(9), req)
	require.NoError(t, err)
	msgs, err := wire.DecodeStreamPacket(reply)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	pp, ok := msgs[0].(*wire.PushPull)
	require.True(t, ok, "reply is %T", msgs[0])
	require.Equal(t, mtSelf, pp.From)
	require.False(t, pp.Join)

	type view struct {
		State State
		Inc   uint64
		Addr  netip.AddrPort
	}
	got := map[string]view{}
	for _, ms := range pp.Members {
		addr, err := wire.DecodeAddr(ms.Addr)
		require.NoError(t, err)
		_, dup := got[ms.Name]
		require.False(t, dup, "%s twice in the reply", ms.Name)
		got[ms.Name] = view{State(ms.State), ms.Incarnation, addr}
	}
	want := map[string]view{}
	for _, mem := range h.m.Members() {
		want[mem.Name] = view{mem.State, mem.Incarnation, mem.Addr}
	}
	require.Equal(t, want, got)
	require.Equal(t, view{StateAlive, 0, mtSelfAddr}, got[mtSelf])
	require.Equal(t, view{StateSuspect, 1, mtPeerAddr(2)}, got[mtPeer(2)])
	require.Equal(t, view{StateLeft, 1, mtPeerAddr(3)}, got[mtPeer(3)])
	require.Equal(t, view{StateAlive, 4, mtPeerAddr(9)}, got[mtPeer(9)], "the reply is built after the merge")
}

// TestPushPullMerge: a peer's full state is merged by the precedence rules,
// except that a remote "dead" only makes a member suspect here (so that it
// may refute), while a remote "left" is applied as left. Changes are passed
// on.
func TestPushPullMerge(t *testing.T) {
	tests := []struct {
		name      string
		remote    wire.MemberState
		wantState State
		wantInc   uint64
		wantEvent EventKind // 0: none
		gossip    wire.Message
	}{
		{"remote dead makes suspect", mtMember(1, StateDead, 5), StateSuspect, 5, EventSuspect,
			&wire.Suspect{Name: mtPeer(1), Incarnation: 5, From: mtPeer(9)}},
		{"remote dead at higher incarnation makes suspect", mtMember(1, StateDead, 6), StateSuspect, 6, EventSuspect,
			&wire.Suspect{Name: mtPeer(1), Incarnation: 6, From: mtPeer(9)}},
		{"remote suspect", mtMember(1, StateSuspect, 5), StateSuspect, 5, EventSuspect,
			&wire.Suspect{Name: mtPeer(1), Incarnation: 5, From: mtPeer(9)}},
		{"remote left is left", mtMember(1, StateLeft, 5), StateLeft, 5, EventLeave,
			&wire.Dead{Name: mtPeer(1), Incarnation: 5, From: mtPeer(9), Left: true}},
		{"remote left at higher incarnation", mtMember(1, StateLeft, 6), StateLeft, 6, EventLeave,
			&wire.Dead{Name: mtPeer(1), Incarnation: 6, From: mtPeer(9), Left: true}},
		{"remote alive at higher incarnation", mtMember(1, StateAlive, 6), StateAlive, 6, 0, mtAlive(1, 6)},
		{"remote alive at same incarnation", mtMember(1, StateAlive, 5), StateAlive, 5, 0, nil},
		{"remote dead at lower incarnation", mtMember(1, StateDead, 4), StateAlive, 5, 0, nil},
		{"remote left at lower incarnation", mtMember(1, StateLeft, 4), StateAlive, 5, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.join(mtMember(1, StateAlive, 5), mtMember(2, StateAlive, 1))
			req, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(9), Members: []wire.MemberState{tc.remote}})
			require.NoError(t, err)
			_, err = h.m.HandleStream(h.now, mtPeerAddr(9), req)
			require.NoError(t, err)
			out := h.confirmLeaves(h.ready())
			mem, _ := h.m.Member(mtPeer(1))
			require.Equal(t, tc.wantState, mem.State)
			require.Equal(t, tc.wantInc, mem.Incarnation)
			evs := out.eventsAbout(mtPeer(1))
			if tc.wantEvent == 0 {
				require.Empty(t, evs)
			} else {
				require.Len(t, evs, 1)
				require.Equal(t, tc.wantEvent, evs[0].Kind)
				require.Equal(t, tc.wantState, evs[0].Member.State)
			}
			gossip := deltasAbout(h.piggyback(), mtPeer(1))
			if tc.gossip == nil {
				require.Empty(t, gossip)
				return
			}
			require.Equal(t, []wire.Message{tc.gossip}, withoutSilence(gossip...), "a change learned by push-pull is passed on")
		})
	}
}

// TestPushPullUnknownMembers: a push-pull adds the alive members it brings
// and ignores suspect, dead and left ones this member never knew.
func TestPushPullUnknownMembers(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(2, 1)
	req, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(9), Members: []wire.MemberState{
		mtMember(9, StateAlive, 1),
		mtMember(10, StateSuspect, 1),
		mtMember(11, StateDead, 1),
		mtMember(12, StateLeft, 1),
	}})
	require.NoError(t, err)
	_, err = h.m.HandleStream(h.now, mtPeerAddr(9), req)
	require.NoError(t, err)
	out := h.ready()
	require.Len(t, out.Events, 1)
	require.Equal(t, EventJoin, out.Events[0].Kind)
	require.Equal(t, mtPeer(9), out.Events[0].Member.Name)
	for _, i := range []int{10, 11, 12} {
		_, known := h.m.Member(mtPeer(i))
		require.False(t, known, "%s added", mtPeer(i))
	}
}

// TestPushPullRefutesInReply: a push-pull that accuses this member is
// answered with the refutation already in the reply.
func TestPushPullRefutesInReply(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(2, 1)
	req, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(9), Members: []wire.MemberState{
		{Name: mtSelf, Addr: wire.EncodeAddr(mtSelfAddr), Incarnation: 0, State: uint8(StateDead)},
	}})
	require.NoError(t, err)
	reply, err := h.m.HandleStream(h.now, mtPeerAddr(9), req)
	require.NoError(t, err)
	msgs, err := wire.DecodeStreamPacket(reply)
	require.NoError(t, err)
	pp := msgs[0].(*wire.PushPull)
	for _, ms := range pp.Members {
		if ms.Name == mtSelf {
			require.Equal(t, uint8(StateAlive), ms.State)
			require.Equal(t, uint64(1), ms.Incarnation)
			return
		}
	}
	t.Fatal("the reply does not hold this member")
}

// TestJoinStreams: Join queues one push-pull per seed, skipping this
// member's own address, and returns their stream IDs.
func TestJoinStreams(t *testing.T) {
	s1 := netip.MustParseAddrPort("10.2.0.1:7946")
	s2 := netip.MustParseAddrPort("[2001:db8::2]:7000")
	tests := []struct {
		name  string
		seeds []netip.AddrPort
		want  []netip.AddrPort
	}{
		{"two seeds", []netip.AddrPort{s1, s2}, []netip.AddrPort{s1, s2}},
		{"own address skipped", []netip.AddrPort{mtSelfAddr, s1, s2}, []netip.AddrPort{s1, s2}},
		{"only own address", []netip.AddrPort{mtSelfAddr}, nil},
		{"no seeds", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mtConfig()
			h := newMT(t, cfg)
			ids := h.m.Join(h.now, tc.seeds)
			require.Len(t, ids, len(tc.want))
			out := h.ready()
			require.Len(t, out.Streams, len(tc.want))
			seen := map[uint64]bool{}
			for i, sr := range out.Streams {
				require.Equal(t, ids[i], sr.ID)
				require.False(t, seen[sr.ID], "stream IDs are distinct")
				seen[sr.ID] = true
				require.Equal(t, tc.want[i], sr.To)
				require.Equal(t, cfg.StreamTimeout, sr.Timeout)
				msgs, err := wire.DecodeStreamPacket(sr.Data)
				require.NoError(t, err)
				require.Len(t, msgs, 1)
				pp, ok := msgs[0].(*wire.PushPull)
				require.True(t, ok)
				require.True(t, pp.Join)
				require.Equal(t, mtSelf, pp.From)
				require.Equal(t, mtSelf, pp.Members[0].Name)
			}
			require.Equal(t, uint64(len(tc.want)), h.m.Stats().PushPulls)
		})
	}
}

// TestJoinResponseMergesWithoutRegossip: the state a seed returns is merged
// (join events for every member) but not gossiped again: everyone else
// knows it already. A periodic push-pull bringing the same state is passed
// on.
func TestJoinResponseMergesWithoutRegossip(t *testing.T) {
	members := []wire.MemberState{
		mtMember(1, StateAlive, 1), mtMember(2, StateAlive, 3), mtMember(3, StateAlive, 1),
		mtMember(4, StateAlive, 2), mtMember(5, StateAlive, 1),
	}
	for _, join := range []bool{true, false} {
		t.Run(fmt.Sprintf("join=%v", join), func(t *testing.T) {
			h := newMT(t, mtConfig())
			reply, err := wire.AppendPacket(nil, &wire.PushPull{From: "seed", Members: members})
			require.NoError(t, err)
			if join {
				ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
				require.Len(t, ids, 1)
				require.NoError(t, h.m.HandleStreamResponse(h.now, ids[0], reply, nil))
			} else {
				_, err := h.m.HandleStream(h.now, mtSeedAddr, reply)
				require.NoError(t, err)
			}
			out := h.ready()
			require.Len(t, out.Events, len(members))
			for i, e := range out.Events {
				require.Equal(t, EventJoin, e.Kind)
				require.Equal(t, members[i].Name, e.Member.Name)
				require.Equal(t, members[i].Incarnation, e.Member.Incarnation)
			}
			require.Equal(t, len(members)+1, h.m.NumMembers())
			gossip := h.piggyback()
			if join {
				require.Empty(t, gossip, "a join's merge is not gossiped")
				return
			}
			require.Len(t, deltas(gossip), len(members), "a push-pull's news is passed on")
		})
	}
}

// TestStreamResponseErrors: an unknown ID, a failed exchange and a garbled
// reply are reported and counted.
func TestStreamResponseErrors(t *testing.T) {
	h := newMT(t, mtConfig())
	require.ErrorIs(t, h.m.HandleStreamResponse(h.now, 999, nil, nil), ErrUnknownStream)

	ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr, netip.MustParseAddrPort("10.2.0.1:7946")})
	require.Len(t, ids, 2)
	boom := errors.New("connection refused")
	require.ErrorIs(t, h.m.HandleStreamResponse(h.now, ids[0], nil, boom), boom)
	require.Equal(t, uint64(1), h.m.Stats().PushPullsFailed)
	require.ErrorIs(t, h.m.HandleStreamResponse(h.now, ids[0], nil, nil), ErrUnknownStream, "a stream is answered once")

	require.NotPanics(t, func() {
		require.Error(t, h.m.HandleStreamResponse(h.now, ids[1], []byte{wire.Version, 0xee, 1, 2}, nil))
	})
	require.Equal(t, uint64(2), h.m.Stats().PushPullsFailed)
	require.Equal(t, 1, h.m.NumMembers())
}

// TestLeave: Leave gossips this member as left at a higher incarnation,
// stops probing, and LeaveDone turns true once the announcement was sent as
// often as any delta; a second Leave is ErrLeft.
func TestLeave(t *testing.T) {
	cfg := mtConfig()
	cfg.RetransmitMult = 4 // N=4: 8 transmissions
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	h.settle()
	require.NoError(t, h.m.Leave(h.now))
	local := h.m.LocalMember()
	require.Equal(t, StateLeft, local.State)
	require.Equal(t, uint64(1), local.Incarnation)
	require.False(t, h.m.LeaveDone(), "not sent yet")
	require.ErrorIs(t, h.m.Leave(h.now), ErrLeft)
	require.ErrorIs(t, h.m.UpdateMeta(h.now, []byte("x")), ErrLeft)

	left := &wire.Dead{Name: mtSelf, Incarnation: 1, From: mtSelf, Left: true}
	sent := 0
	for i := 0; i < 20; i++ {
		if containsMsg(h.piggyback(), left) {
			sent++
			require.Equal(t, i+1, sent)
		}
		require.Equal(t, sent >= 8, h.m.LeaveDone(), "after %d sends", sent)
	}
	require.Equal(t, 8, sent, "the leave is sent RetransmitMult·2 times")

	out := h.run(h.now.Add(10*cfg.ProbeInterval), nil)
	ps, _ := out.pings()
	require.Empty(t, ps, "a member that left does not probe")
}

// TestLeaveAlone: with nobody to tell, a leave is done at once.
func TestLeaveAlone(t *testing.T) {
	h := newMT(t, mtConfig())
	require.NoError(t, h.m.Leave(h.now))
	require.True(t, h.m.LeaveDone())
}

// TestLeaveGossipedAtOnce: with periodic gossip on, the leave goes out at
// the next tick rather than at the next gossip slot.
func TestLeaveGossipedAtOnce(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipInterval = time.Second
	cfg.ProbeInterval = 10 * time.Second
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	h.feed(mtStranger, mtAlive(1, 2))
	h.tick(h.now) // a gossip round: the next one is a second away
	h.settle()
	h.now = h.now.Add(10 * time.Millisecond)
	require.NoError(t, h.m.Leave(h.now))
	require.False(t, h.m.NextDeadline().After(h.now))
	h.tick(h.now)
	out := h.ready()
	require.NotEmpty(t, out.Packets)
	for _, p := range out.Packets {
		require.True(t, p.isGossipOnly())
		require.Contains(t, p.Msgs, wire.Message(&wire.Dead{Name: mtSelf, Incarnation: 1, From: mtSelf, Left: true}))
	}
}

// TestMachineUpdateMeta: metadata over MaxMetaSize is refused with an error naming
// it and changes nothing; accepted metadata is gossiped in an alive at a
// higher incarnation.
func TestMachineUpdateMeta(t *testing.T) {
	tests := []struct {
		name string
		size int
		ok   bool
	}{
		{"empty", 0, true},
		{"at MaxMetaSize", 16, true},
		{"over MaxMetaSize", 17, false},
		{"far over MaxMetaSize", 4096, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mtConfig()
			cfg.MaxMetaSize = 16
			cfg.Meta = []byte("old")
			h := newMT(t, cfg)
			h.joinPeers(2, 1)
			meta := bytes.Repeat([]byte{'x'}, tc.size)
			err := h.m.UpdateMeta(h.now, meta)
			local := h.m.LocalMember()
			gossip := deltasAbout(h.piggyback(), mtSelf)
			if !tc.ok {
				require.Error(t, err)
				require.Contains(t, err.Error(), "MaxMetaSize")
				require.Equal(t, uint64(0), local.Incarnation)
				require.Equal(t, []byte("old"), local.Meta)
				require.Empty(t, gossip)
				return
			}
			require.NoError(t, err)
			require.Equal(t, uint64(1), local.Incarnation)
			require.Equal(t, string(meta), string(local.Meta))
			require.Len(t, gossip, 1)
			a, ok := gossip[0].(*wire.Alive)
			require.True(t, ok)
			require.Equal(t, uint64(1), a.Incarnation)
			require.Equal(t, string(meta), string(a.Meta))
			require.Equal(t, wire.EncodeAddr(mtSelfAddr), a.Addr)

			require.NoError(t, h.m.UpdateMeta(h.now, []byte("v2")))
			require.Equal(t, uint64(2), h.m.LocalMember().Incarnation)
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
		"unknown type":       {wire.Version, 0xee, 0x90},
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
			version := h.m.Version()
			var err error
			require.NotPanics(t, func() { err = h.m.HandlePacket(h.now, mtPeerAddr(1), data) })
			require.Error(t, err)
			require.Equal(t, before.PacketsDropped+1, h.m.Stats().PacketsDropped)
			require.Equal(t, version, h.m.Version(), "a rejected packet changes nothing")
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
	rejected := 0
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
		before := h.m.Stats().PacketsDropped
		var err error
		require.NotPanics(t, func() { err = h.m.HandlePacket(h.now, mtPeerAddr(1+i%3), data) }, "input %x", data)
		if err != nil {
			rejected++
			require.Equal(t, before+1, h.m.Stats().PacketsDropped, "input %x", data)
		}
		h.m.Ready()
	}
	require.Greater(t, rejected, 4000)
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
		{"alive with metadata over MaxMetaSize", &wire.Alive{Name: "x", Addr: wire.EncodeAddr(mtPeerAddr(9)), Incarnation: 1,
			Meta: make([]byte, 513)}},
		{"ping-req with a bad target address", &wire.PingReq{Seq: 1, Target: mtPeer(2), TargetAddr: []byte{9}, From: mtPeer(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.joinPeers(3, 1)
			before := h.m.Stats().PacketsDropped
			version := h.m.Version()
			require.NotPanics(t, func() { _ = h.m.HandlePacket(h.now, mtPeerAddr(1), mtPacket(t, tc.msg)) })
			require.Equal(t, before+1, h.m.Stats().PacketsDropped)
			require.Equal(t, version, h.m.Version())
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

// TestDeclaredDeadExchangesStateAgain: news that others declared this member
// dead (gossiped, or in a push-pull) brings the early push-pulls of a join,
// since those members stopped telling it anything; a stale death, below our
// incarnation, does not.
func TestDeclaredDeadExchangesStateAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		via     string
		inc     uint64
		wantNew bool
	}{
		{"gossiped", "gossip", 1, true},
		{"in a push-pull", "push-pull", 1, true},
		{"stale", "gossip", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mtConfig()
			cfg.PushPullInterval = time.Hour
			h := newMT(t, cfg)
			h.joinPeers(4, 1)
			// Past the join's own follow-ups, and refuted once (inc 1).
			h.run(h.now.Add(10*cfg.ProbeInterval), nil)
			h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtSelf, Incarnation: 0, From: mtPeer(1)})
			require.Equal(t, uint64(1), h.m.LocalMember().Incarnation)
			h.run(h.now.Add(cfg.ProbeInterval), nil)
			before := h.m.Stats().PushPulls

			switch tc.via {
			case "gossip":
				h.feed(mtPeerAddr(2), &wire.Dead{Name: mtSelf, Incarnation: tc.inc, From: mtPeer(2)})
			case "push-pull":
				req, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(2), Members: []wire.MemberState{
					{Name: mtSelf, Addr: wire.EncodeAddr(mtSelfAddr), Incarnation: tc.inc, State: uint8(StateDead)},
				}})
				require.NoError(t, err)
				_, err = h.m.HandleStream(h.now, mtPeerAddr(2), req)
				require.NoError(t, err)
			}
			out := h.run(h.now.Add(cfg.ProbeInterval/4), nil)
			if !tc.wantNew {
				require.Empty(t, out.Streams)
				require.Equal(t, before, h.m.Stats().PushPulls)
				return
			}
			require.Len(t, out.Streams, 1, "a push-pull within a quarter period")
			require.Equal(t, tc.inc+1, h.m.LocalMember().Incarnation, "and the refutation")
		})
	}
}
