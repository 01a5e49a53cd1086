package swim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// The entry size is what lets 10,000 members fit in one process (10⁸
// entries); growing it should be a decision, not an accident.
func TestMemberEntryIsTwentyBytes(t *testing.T) {
	require.Equal(t, uintptr(20), unsafe.Sizeof(memberState{}))
}

// newSharedMT makes n Machines that share one Registry, each knowing peers
// p001..p<peers> alive at incarnation 1.
func newSharedMT(t *testing.T, reg *Registry, n, peers int) []*Machine {
	t.Helper()
	var ms []*Machine
	for i := range n {
		cfg := mtConfig()
		cfg.Name = fmt.Sprintf("self%d", i)
		cfg.GossipToDeadTime = time.Second
		m, err := reg.NewMachine(cfg, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, 0, byte(i)}), 7946), rand.New(rand.NewPCG(uint64(i), 2)), mtStart)
		require.NoError(t, err)
		state := &wire.PushPull{From: "seed"}
		for p := 1; p <= peers; p++ {
			state.Members = append(state.Members, mtMember(p, StateAlive, 1))
		}
		ids := m.Join(mtStart, []netip.AddrPort{mtSeedAddr})
		reply, err := wire.AppendPacket(nil, state)
		require.NoError(t, err)
		require.NoError(t, m.HandleStreamResponse(mtStart, ids[0], reply, nil))
		m.Ready()
		ms = append(ms, m)
	}
	return ms
}

func TestRegistryStoresEachIdentityOnce(t *testing.T) {
	reg := NewRegistry()
	ms := newSharedMT(t, reg, 3, 10)
	// 3 selves and 10 peers, each name and version once.
	require.Equal(t, 13, reg.Names())
	require.Len(t, reg.verAddr, 14, "one version per name (plus the unused 0)")

	// Machine 0 learns p001's new metadata: a second version of the name,
	// while the others still see the first.
	newer := &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(mtPeerAddr(1)), Incarnation: 2, Meta: []byte("v2")}
	require.NoError(t, ms[0].HandlePacket(mtStart, mtPeerAddr(1), mtPacket(t, newer)))
	got, _ := ms[0].Member(mtPeer(1))
	require.Equal(t, []byte("v2"), got.Meta)
	old, _ := ms[1].Member(mtPeer(1))
	require.Empty(t, old.Meta)
	require.Len(t, reg.verAddr, 15)

	// Once everyone moved on, the old version is freed and its slot reused.
	for _, m := range ms[1:] {
		require.NoError(t, m.HandlePacket(mtStart, mtPeerAddr(1), mtPacket(t, newer)))
	}
	require.Len(t, reg.freeVers, 1)
	newest := &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(mtPeerAddr(1)), Incarnation: 3, Meta: []byte("v3")}
	require.NoError(t, ms[0].HandlePacket(mtStart, mtPeerAddr(1), mtPacket(t, newest)))
	require.Empty(t, reg.freeVers)
	require.Len(t, reg.verAddr, 15)

	// A member every Machine has forgotten frees its name. Its death,
	// reported by another, counts once the check of it goes unanswered
	// and it stays silent through the suspicion that follows.
	reported := mtStart.Add(time.Second)
	for _, m := range ms {
		dead := &wire.Dead{Name: mtPeer(2), Incarnation: 1, From: "x"}
		require.NoError(t, m.HandlePacket(reported, mtPeerAddr(3), mtPacket(t, dead)))
	}
	window, _ := ms[0].suspicionBounds()
	for _, m := range ms {
		m.Tick(reported.Add(mtConfig().ProbeTimeout))
	}
	at := reported.Add(window)
	for _, m := range ms {
		m.Tick(at)
		got, _ := m.Member(mtPeer(2))
		require.Equal(t, StateDead, got.State)
	}
	require.Equal(t, 13, reg.Names(), "dead, not yet forgotten")
	for _, m := range ms[:2] {
		m.Tick(at.Add(2 * time.Second))
	}
	require.Equal(t, 13, reg.Names(), "one Machine still holds it")
	ms[2].Tick(at.Add(2 * time.Second))
	require.Equal(t, 12, reg.Names())
	_, known := reg.lookup(mtPeer(2))
	require.False(t, known)
	for _, m := range ms {
		_, ok := m.Member(mtPeer(2))
		require.False(t, ok)
		_, ok = m.Member(mtPeer(3))
		require.True(t, ok)
	}
}

// The heard time is 32-bit milliseconds and wraps every 49.7 days; the sweep
// must keep an old heartbeat from looking new after any length of uptime.
func TestHeardTimeSurvivesWrap(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(1, 1)
	s := h.m.lookup(mtPeer(1))
	h.m.markHeard(s, mtStart)
	now := mtStart
	for range 60 * 24 * 6 { // 60 days in 10-minute steps
		now = now.Add(10 * time.Minute)
		h.m.sweepHeard(now)
		require.False(t, h.m.heardSince(s, now.Add(-time.Second)), "at %v", now.Sub(mtStart))
	}
	h.m.markHeard(s, now)
	require.True(t, h.m.heardSince(s, now.Add(-time.Second)))
	require.Equal(t, now, h.m.lastHeard(s, now))
	require.Equal(t, now, h.m.lastHeard(s, now.Add(time.Hour)))
}

// BenchmarkHandlePing is the commonest packet: a ping in, an ack out.
func BenchmarkHandlePing(b *testing.B) {
	t := &testing.T{}
	h := newMT(t, mtConfig())
	h.joinPeers(1000, 1)
	pkt := mtPacket(t, &wire.Ping{Seq: 7, Target: mtSelf, From: mtPeer(5)})
	b.ReportAllocs()
	for b.Loop() {
		if err := h.m.HandlePacket(mtStart, mtPeerAddr(5), pkt); err != nil {
			b.Fatal(err)
		}
		h.m.Ready()
	}
}

// BenchmarkLookup finds a member by name in a table of 10,000.
func BenchmarkLookup(b *testing.B) {
	t := &testing.T{}
	h := newMT(t, mtConfig())
	h.joinPeers(10000, 1)
	names := make([]string, 1024)
	for i := range names {
		names[i] = mtPeer(1 + i*9)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if h.m.lookup(names[i&1023]) == nil {
			b.Fatal("missing")
		}
		i++
	}
}

// BenchmarkPushPullUnchanged merges a 1,000-member state that says nothing
// new, the common periodic exchange, and encodes the reply.
func BenchmarkPushPullUnchanged(b *testing.B) {
	t := &testing.T{}
	h := newMT(t, mtConfig())
	h.joinPeers(1000, 1)
	state := &wire.PushPull{From: mtPeer(1)}
	for i := 1; i <= 1000; i++ {
		state.Members = append(state.Members, mtMember(i, StateAlive, 1))
	}
	req, err := wire.AppendPacket(nil, state)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.m.HandleStream(mtStart, mtPeerAddr(1), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBroadcastTake fills one packet from a queue of pending deltas,
// each retired after 12 sends as in a cluster of about 1,000; the queue is
// refilled with 1,000 deltas whenever it runs dry.
func BenchmarkBroadcastTake(b *testing.B) {
	q := newPiggybackQueue(4096, 0)
	frames := make([][]byte, 1000)
	for i := range frames {
		f, err := wire.AppendFrame(nil, mtAlive(i+1, 1))
		if err != nil {
			b.Fatal(err)
		}
		frames[i] = f
	}
	out := make([][]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		if q.Len() == 0 {
			for i, f := range frames {
				q.queue(mtPeer(i+1), f)
			}
		}
		out, _ = q.take(out[:0], 1400, 12, wire.MaxProtocol)
	}
}

// Members lists the live members in name order, this one included until
// it leaves, and follows the table as it changes; Snapshot adds the dead.
func TestMembersFollowTheTable(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(5, 1)
	names := func() []string {
		var out []string
		for _, mb := range h.m.Members() {
			out = append(out, mb.Name)
		}
		return out
	}
	require.Equal(t, []string{mtPeer(1), mtPeer(2), mtPeer(3), mtPeer(4), mtPeer(5), mtSelf}, names())
	h.feedConfirmed(mtStranger, &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: "x"})
	h.feed(mtPeerAddr(1), mtAlive(9, 1))
	require.Equal(t, []string{mtPeer(1), mtPeer(2), mtPeer(4), mtPeer(5), mtPeer(9), mtSelf}, names())
	var want []string
	all, _ := h.m.Snapshot()
	for _, mb := range all {
		if mb.State == StateAlive || mb.State == StateSuspect {
			want = append(want, mb.Name)
		}
	}
	require.Equal(t, want, names(), "the same as Members without the dead")
	require.NoError(t, h.m.Leave(h.now))
	require.NotContains(t, names(), mtSelf)
}
