package swim

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// invented returns the alive of an invented member, at an address nobody
// answers from.
func invented(i int) *wire.Alive {
	inv := mtInvented(i)
	return &wire.Alive{Name: inv.Name, Addr: inv.Addr, Incarnation: inv.Incarnation}
}

// TestInventedMembersAreNotAdmitted: a stranger's packets announcing
// members that do not exist (the table flood) add nobody: no event, no
// gossip, no probe, no packet to their addresses, no local health penalty;
// each is counted.
func TestInventedMembersAreNotAdmitted(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipInterval = 100 * time.Millisecond
	cfg.GossipNodes = 3
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	msgs := make([]wire.Message, 0, 200)
	for i := range 200 {
		msgs = append(msgs, invented(i))
	}
	h.feed(mtStranger, msgs...)
	out := h.ready()
	require.Empty(t, out.Events)
	require.Empty(t, out.Packets)
	require.Equal(t, 4, h.m.NumMembers())
	require.Equal(t, uint64(200), h.m.Stats().Admission.NewcomersRefused)

	// Ten periods on, nobody was admitted, gossiped or probed, and this
	// member's health is untouched.
	out = h.run(h.now.Add(10*cfg.ProbeInterval), nil)
	require.Equal(t, 4, h.m.NumMembers())
	require.Zero(t, h.m.health)
	for _, p := range out.Packets {
		require.NotEqual(t, byte(200), p.To.Addr().As4()[1], "a packet went to invented address %s", p.To)
		for _, msg := range p.Msgs {
			if a, ok := msg.(*wire.Alive); ok {
				require.NotContains(t, a.Name, "fake-", "an invented member was gossiped")
			}
		}
	}
}

// TestInventedSelfAnnouncementsChecked: news a process gives of itself, at
// the address it sent from, is checked with one lone ping to that address
// in the announced name; a silent address admits nobody and costs no
// health.
func TestInventedSelfAnnouncementsChecked(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	for i := range 20 {
		a := invented(i)
		h.feed(mustAddr(t, a.Addr), a)
	}
	out := h.ready()
	require.Empty(t, out.Events)
	require.Len(t, out.Packets, 20)
	for _, p := range out.Packets {
		require.Len(t, p.Msgs, 1, "a check carries no gossip")
		ping := p.Msgs[0].(*wire.Ping)
		c := h.m.addrChecks[ping.Seq]
		require.Equal(t, addrCheckNewcomer, c.kind)
		require.Equal(t, p.To, c.addr)
		require.Equal(t, p.To, mustAddr(t, h.m.newcomers.byAddr[c.addr].alive.Addr))
		require.Equal(t, h.m.newcomers.byAddr[c.addr].alive.Name, ping.Target)
	}
	require.Equal(t, uint64(20), h.m.Stats().Admission.NewcomersChecked)
	silent := map[netip.AddrPort]bool{}
	for _, p := range out.Packets {
		silent[p.To] = true
	}
	h.run(h.now.Add(5*cfg.ProbeInterval), silent)
	require.Equal(t, 4, h.m.NumMembers())
	require.Zero(t, h.m.health)
	require.Empty(t, h.m.newcomers.byAddr)
	require.Empty(t, h.m.addrChecks)
	require.Equal(t, uint64(20), h.m.Stats().Admission.NewcomersRefused)
}

func mustAddr(t *testing.T, b []byte) netip.AddrPort {
	t.Helper()
	a, err := wire.DecodeAddr(b)
	require.NoError(t, err)
	return a
}

// TestNewcomerAdmittedWhenItAnswers: a member not known announcing itself
// is admitted, gossiped and probed once its address answered in its name; an
// ack from anywhere else admits nothing.
func TestNewcomerAdmittedWhenItAnswers(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	h.feed(mtStranger, mtAlive(9, 4))
	require.Empty(t, h.ready().Packets, "a stranger's news of another is dropped")
	h.feed(mtPeerAddr(9), mtAlive(9, 4))
	out := h.ready()
	require.Empty(t, out.Events)
	require.Len(t, out.Packets, 1)
	ping := out.Packets[0].Msgs[0].(*wire.Ping)
	require.Equal(t, mtPeer(9), ping.Target, "the check is in the announced name")
	require.Equal(t, mtPeerAddr(9), out.Packets[0].To)

	h.feed(mtStranger, &wire.Ack{Seq: ping.Seq})
	_, ok := h.m.Member(mtPeer(9))
	require.False(t, ok, "an ack from another address admits nothing")
	require.Equal(t, uint64(1), h.m.Stats().AcksRefused)

	h.feed(mtPeerAddr(9), &wire.Ack{Seq: ping.Seq})
	out = h.ready()
	require.Len(t, out.Events, 1)
	require.Equal(t, EventJoin, out.Events[0].Kind)
	require.Equal(t, uint64(4), out.Events[0].Member.Incarnation)
	require.NotEmpty(t, deltasAbout(h.piggyback(), mtPeer(9)), "admitted news is passed on")
}

// TestNewcomerVouchedByMember: news of a member not known, from a live
// member's own address or in a live member's push-pull, is believed at once
// (a join through a seed spreads at gossip's speed); the same push-pull
// from elsewhere is dropped, but a joiner's own entry is checked and the
// rest of its view is merged once it was admitted.
func TestNewcomerVouchedByMember(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	h.feed(mtPeerAddr(1), mtAlive(9, 1))
	_, ok := h.m.Member(mtPeer(9))
	require.True(t, ok)

	pp := func(from string, i int) []byte {
		w := wire.NewPushPullWriter(nil, from, false, 1)
		w.Add(mtPeer(i), mtPeerAddr(i), 1, uint8(StateAlive), nil, wire.Versions{})
		data, err := w.Bytes()
		require.NoError(t, err)
		return data
	}
	// A live member's push-pull from its host (any source port).
	_, err := h.m.HandleStream(h.now, netip.AddrPortFrom(mtPeerAddr(2).Addr(), 40000), pp(mtPeer(2), 10))
	require.NoError(t, err)
	_, ok = h.m.Member(mtPeer(10))
	require.True(t, ok)
	// In a member's name from another host: dropped.
	_, err = h.m.HandleStream(h.now, mtStranger, pp(mtPeer(2), 11))
	require.NoError(t, err)
	_, ok = h.m.Member(mtPeer(11))
	require.False(t, ok)
	require.Equal(t, uint64(1), h.m.Stats().Admission.NewcomersRefused)
	// A joiner's own entry, from its host: checked; the rest of its
	// view waits for its admission.
	w := wire.NewPushPullWriter(nil, mtPeer(12), false, 2)
	w.Add(mtPeer(12), mtPeerAddr(12), 1, uint8(StateAlive), nil, wire.Versions{})
	w.Add(mtPeer(13), mtPeerAddr(13), 1, uint8(StateAlive), nil, wire.Versions{})
	data, err := w.Bytes()
	require.NoError(t, err)
	_, err = h.m.HandleStream(h.now, netip.AddrPortFrom(mtPeerAddr(12).Addr(), 40000), data)
	require.NoError(t, err)
	require.Equal(t, uint64(1), h.m.Stats().Admission.NewcomersChecked)
	_, ok = h.m.Member(mtPeer(13))
	require.False(t, ok, "held until its sender is admitted")
	out := h.answerNewcomers(h.ready())
	require.Len(t, out.eventsAbout(mtPeer(12)), 1)
	require.Len(t, out.eventsAbout(mtPeer(13)), 1, "believed once its sender is a member")
}

// TestNewcomerNotCrowdedOut: while a stranger floods this member with
// invented members, a real one announcing itself is admitted as soon as it
// answers.
func TestNewcomerNotCrowdedOut(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	msgs := make([]wire.Message, 0, 250)
	for i := range 250 {
		msgs = append(msgs, invented(i))
	}
	h.feed(mtStranger, msgs...)
	h.ready()
	out := h.feedAnswered(mtPeerAddr(9), &wire.Ping{Seq: 7, Target: mtSelf, From: mtPeer(9)}, mtAlive(9, 1))
	require.Len(t, out.eventsAbout(mtPeer(9)), 1)
}

// TestNoReflectionThroughInventedMember: a claim of a member at a third
// party's address, repeated every 100 ms for 30 s, from a stranger's
// address or from the third party's own (a spoofed source), has this
// member send that address fewer bytes than the claims cost, each a lone
// ping, never more than one per probe interval.
func TestNoReflectionThroughInventedMember(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipInterval = 200 * time.Millisecond
	cfg.GossipNodes = 3
	h := newMT(t, cfg)
	h.joinPeers(15, 1)
	victim := netip.MustParseAddrPort("198.51.100.7:53")
	claim := &wire.Alive{Name: "ghost", Addr: wire.EncodeAddr(victim), Incarnation: 1}
	claimBytes, toVictim, pings := 0, 0, 0
	var last time.Time
	for i := range 300 {
		claim.Incarnation = uint64(1 + i)
		claimBytes += 2 * len(mtPacket(t, claim))
		h.feed(mtStranger, claim)
		h.feed(victim, claim)
		for _, p := range h.run(h.now.Add(100*time.Millisecond), map[netip.AddrPort]bool{victim: true}).Packets {
			if p.To != victim {
				continue
			}
			toVictim += p.Len
			pings++
			require.Len(t, p.Msgs, 1)
			require.IsType(t, &wire.Ping{}, p.Msgs[0])
			if !last.IsZero() {
				require.GreaterOrEqual(t, p.At.Sub(last), cfg.ProbeInterval, "two checks of one address within an interval")
			}
			last = p.At
		}
	}
	t.Logf("claims %d B, toward the victim %d B in %d pings", claimBytes, toVictim, pings)
	require.Positive(t, pings)
	require.Less(t, toVictim, claimBytes)
	_, ok := h.m.Member("ghost")
	require.False(t, ok)
}

// TestJoinerBehindNAT: a joiner whose push-pull comes from another address
// than the one it advertises (behind NAT, or dialing from another network)
// is checked at the address it advertises, and admitted when that answers.
func TestJoinerBehindNAT(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	w := wire.NewPushPullWriter(nil, mtPeer(20), true, 1)
	w.Add(mtPeer(20), mtPeerAddr(20), 1, uint8(StateAlive), nil, wire.Versions{})
	data, err := w.Bytes()
	require.NoError(t, err)
	_, err = h.m.HandleStream(h.now, netip.MustParseAddrPort("203.0.113.9:41000"), data)
	require.NoError(t, err)
	out := h.ready()
	require.Len(t, out.Packets, 1)
	require.Equal(t, mtPeerAddr(20), out.Packets[0].To, "checked where it advertises itself")
	out = h.answerNewcomers(out)
	require.Len(t, out.eventsAbout(mtPeer(20)), 1)
}

// TestNewcomerChecksNotKeptFull: a stranger's self-announcements from
// 20,000 spoofed addresses in one second, each checked, kept every
// newcomer check in flight taken, so that 3 of 10 real newcomers joining
// through this member meanwhile were never admitted. Announcements that
// came by UDP may hold at most half the checks, and one network
// (sourceNetwork) at most newcomerChecksPerNetwork of them; a joiner's own
// push-pull, which took a TCP handshake, is checked in the rest.
func TestNewcomerChecksNotKeptFull(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	admitted := 0
	for step := range 100 {
		for k := range 200 {
			i := step*200 + k
			addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 250 + byte(i>>16), byte(i >> 8), byte(i)}), 7946)
			h.feed(addr, &wire.Alive{Name: fmt.Sprintf("spoofed-%05d", i), Addr: wire.EncodeAddr(addr), Incarnation: 1})
		}
		if step%10 == 5 {
			j := 20 + step/10
			w := wire.NewPushPullWriter(nil, mtPeer(j), true, 1)
			w.Add(mtPeer(j), mtPeerAddr(j), 1, uint8(StateAlive), nil, wire.Versions{})
			data, err := w.Bytes()
			require.NoError(t, err)
			_, err = h.m.HandleStream(h.now, netip.AddrPortFrom(mtPeerAddr(j).Addr(), 41000), data)
			require.NoError(t, err)
		}
		out := h.ready()
		for _, p := range out.Packets {
			if ping, ok := p.Msgs[0].(*wire.Ping); ok && len(p.Msgs) == 1 && p.To.Addr().As4()[1] == mtPeerAddr(1).Addr().As4()[1] {
				h.feed(p.To, &wire.Ack{Seq: ping.Seq})
				admitted += len(h.ready().eventsAbout(ping.Target))
			}
		}
		h.now = h.now.Add(10 * time.Millisecond)
		h.m.Tick(h.now)
	}
	require.Equal(t, 10, admitted, "real newcomers admitted during the flood")
}
