package swim

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Config.Admission.Admit keeps a member out of the table, every time news of it
// comes, and counts it; members it admits are unaffected.
func TestAdmitRefusesMember(t *testing.T) {
	cfg := mtConfig()
	var asked []string
	cfg.Admission.Admit = func(mb Member) error {
		asked = append(asked, mb.Name)
		if string(mb.Meta) != "v1" {
			return errors.New("wrong version")
		}
		return nil
	}
	h := newMT(t, cfg)
	bad := &wire.Alive{Name: "bad", Addr: wire.EncodeAddr(mtPeerAddr(9)), Incarnation: 1, Meta: []byte("v2")}
	good := &wire.Alive{Name: "good", Addr: wire.EncodeAddr(mtPeerAddr(8)), Incarnation: 1, Meta: []byte("v1")}
	h.feedAnswered(mtPeerAddr(9), bad)
	h.feedAnswered(mtPeerAddr(8), good)
	h.feedAnswered(mtPeerAddr(9), bad)
	_, ok := h.m.Member("bad")
	require.False(t, ok)
	_, ok = h.m.Member("good")
	require.True(t, ok)
	require.Equal(t, uint64(2), h.m.Stats().Admission.Refused)
	require.Equal(t, []string{"bad", "good", "bad"}, asked)
	// A member already in the table is not asked again on its updates.
	h.feed(mtPeerAddr(8), &wire.Alive{Name: "good", Addr: wire.EncodeAddr(mtPeerAddr(8)), Incarnation: 2, Meta: []byte("v1")})
	require.Len(t, asked, 3)
}

// Config.Admission.Join refuses a join whole: the seed's answer to this
// member's join is not merged, and the join's outcome is the refusal.
func TestAdmitJoinRefusesSeedView(t *testing.T) {
	cfg := mtConfig()
	cfg.Admission.Join = func(peers []Member) error {
		for _, p := range peers {
			if strings.HasPrefix(p.Name, "other-cluster") {
				return errors.New("a member of another cluster")
			}
		}
		return nil
	}
	h := newMT(t, cfg)
	ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
	reply, err := wire.AppendPacket(nil, &wire.PushPull{From: "seed", Members: []wire.MemberState{
		mtMember(1, StateAlive, 1),
		{Name: "other-cluster-1", Addr: wire.EncodeAddr(mtPeerAddr(2)), Incarnation: 1},
	}})
	require.NoError(t, err)
	require.ErrorContains(t, h.m.HandleStreamResponse(h.now, ids[0], reply, nil), "another cluster")
	require.Equal(t, 1, h.m.NumMembers(), "nothing merged")
	require.Equal(t, uint64(1), h.m.Stats().Admission.JoinsRefused)
}

// Over sockets: a seed whose Admission.Join refuses the joiner makes the
// joiner's Join fail; Admit keeps a member with the wrong metadata out.
func TestAdmissionOverSockets(t *testing.T) {
	seedCfg := testConfig("seed")
	seedCfg.Admission.Join = func(peers []Member) error {
		for _, p := range peers {
			if p.Name == "intruder" {
				return errors.New("not on the list")
			}
		}
		return nil
	}
	seedCfg.Admission.Admit = func(mb Member) error {
		if string(mb.Meta) == "old" {
			return errors.New("too old")
		}
		return nil
	}
	seed := startMember(t, seedCfg)
	intruder := startMember(t, testConfig("intruder"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := intruder.Join(ctx, seed.LocalMember().Addr.String())
	require.Error(t, err)

	oldCfg := testConfig("old-member")
	oldCfg.Meta = []byte("old")
	old := startMember(t, oldCfg)
	_, _ = old.Join(ctx, seed.LocalMember().Addr.String())
	// The seed checks the joiner's address before it asks Admit
	// (newcomers.go): the refusal comes a round trip after the join.
	require.Eventually(t, func() bool { return seed.Stats().Admission.Refused > 0 }, formTimeout, 10*time.Millisecond)
	_, ok := seed.Member("old-member")
	require.False(t, ok)
	require.Equal(t, 1, seed.NumMembers())
}

// Two live processes with one name: the later started one's Join fails
// with ErrNameConflict and it leaves; the first keeps the name, is told of
// the other at its address once, and keeps receiving its messages; the
// seed never moves the name to the second's address.
func TestNameConflictSettled(t *testing.T) {
	peers := formCluster(t, testConfig("seed"), testConfig("peer-1"), testConfig("peer-2"))
	seed := peers[0]
	box := &inbox{}
	firstCfg := testConfig("dup")
	firstCfg.Messages = box
	first := startMember(t, firstCfg)
	for !time.Now().After(first.LocalMember().Started().Add(time.Millisecond)) {
		// The second starts in a later millisecond: lives order by start.
		runtime.Gosched()
	}
	second := startMember(t, testConfig("dup"))
	require.Less(t, first.LocalMember().Life, second.LocalMember().Life, "lives order by start")
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := first.Join(ctx, seed.LocalMember().Addr.String())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, p := range peers {
			if _, ok := p.Member("dup"); !ok {
				return false
			}
		}
		return true
	}, formTimeout, pollEvery)

	_, err = second.Join(ctx, seed.LocalMember().Addr.String())
	require.ErrorIs(t, err, ErrNameConflict)
	require.Equal(t, StateLeft, second.LocalMember().State)
	require.Equal(t, uint64(1), second.Stats().Lives.NamesYielded)
	require.Eventually(t, func() bool {
		for _, e := range first.log.about("dup") {
			if e.Kind == EventConflict && e.Member.Addr == second.LocalMember().Addr {
				return true
			}
		}
		return false
	}, formTimeout, pollEvery, "the first was not told of the second")
	require.Equal(t, uint64(1), first.Stats().Lives.NameConflicts)
	require.Zero(t, first.Stats().Lives.NamesYielded)

	require.NoError(t, seed.SendBestEffort("dup", []byte("still yours")))
	require.Eventually(t, func() bool { return box.has(MessageBestEffort, "seed", "still yours") }, formTimeout, pollEvery)
	for _, p := range peers {
		mb, ok := p.Member("dup")
		require.True(t, ok)
		require.Equal(t, first.LocalMember().Addr, mb.Addr)
		require.Equal(t, first.LocalMember().Life, mb.Life)
		for _, e := range p.log.about("dup") {
			require.Equal(t, first.LocalMember().Addr, e.Member.Addr, "%s saw the name at another address: %v", p.LocalMember().Name, e)
		}
	}
}

// News of this member alive at another address where nothing answers is
// a previous life, refuted, and no conflict.
func TestPreviousLifeIsNoConflict(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinPeers(1, 1)
	old := netip.MustParseAddrPort("10.9.9.9:7946")
	h.feed(mtPeerAddr(1), &wire.Alive{Name: mtSelf, Addr: wire.EncodeAddr(old), Incarnation: 5})
	out := h.ready()
	pings, pkts := out.pings()
	require.Len(t, pings, 1, "one check of the other address")
	require.Equal(t, old, pkts[0].To)
	require.Equal(t, mtSelf, pings[0].Target)
	h.tick(h.now.Add(cfg.ProbeInterval))
	require.Empty(t, h.ready().Events)
	require.Zero(t, h.m.Stats().Lives.NameConflicts)
	require.Greater(t, h.m.LocalMember().Incarnation, uint64(5), "refuted")

	// The same news again while the check ran: no second ping; a live
	// process answering there is a conflict.
	h.feed(mtPeerAddr(1), &wire.Alive{Name: mtSelf, Addr: wire.EncodeAddr(old), Incarnation: 7})
	pings, _ = h.ready().pings()
	require.Len(t, pings, 1)
	h.feed(old, &wire.Ack{Seq: pings[0].Seq})
	evs := h.ready().Events
	require.Len(t, evs, 1)
	require.Equal(t, EventConflict, evs[0].Kind)
	require.Equal(t, old, evs[0].Member.Addr)
}
