package swim

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Events are numbered from 1 without gaps, and a snapshot names the last
// event it reflects: the snapshot plus the events after it is the table.
func TestEventSeqAndSnapshot(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	members, seq := h.m.Snapshot()
	require.Len(t, members, 4)
	require.Equal(t, uint64(3), seq, "three joins")

	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	h.feed(mtPeerAddr(1), &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(mtPeerAddr(1)), Incarnation: 2, Meta: []byte("m")})
	evs := h.ready().Events
	require.Len(t, evs, 2)
	for i, e := range evs {
		require.Equal(t, seq+uint64(i)+1, e.Seq)
	}
	// Applying the events after the snapshot to it gives the table now.
	view := map[string]Member{}
	for _, mb := range members {
		view[mb.Name] = mb
	}
	for _, e := range evs {
		if e.Seq > seq {
			view[e.Member.Name] = e.Member
		}
	}
	now, last := h.m.Snapshot()
	require.Equal(t, evs[len(evs)-1].Seq, last)
	for _, mb := range now {
		require.Equal(t, mb, view[mb.Name], mb.Name)
	}
}

// Over sockets, events carry their time, and a consumer can combine a
// snapshot with the stream.
func TestSnapshotOverSockets(t *testing.T) {
	ms := startCluster(t, 3)
	members, seq := ms[0].Snapshot()
	require.Len(t, members, 3)
	require.Positive(t, seq)
	// Every event delivered so far, in order, numbered without a gap.
	ms[0].log.mu.Lock()
	evs := append([]Event(nil), ms[0].log.events...)
	ms[0].log.mu.Unlock()
	require.NotEmpty(t, evs)
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq)
		require.WithinDuration(t, time.Now(), e.Time, time.Minute)
	}
	require.LessOrEqual(t, evs[len(evs)-1].Seq, seq, "the snapshot reflects what was delivered")
}

// With SelfEvents, a suspicion and a death of this member are reported,
// each followed by the refutation; without, neither is.
func TestSelfEvents(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := mtConfig()
		cfg.SelfEvents = on
		h := newMT(t, cfg)
		h.joinPeers(2, 1)
		h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtSelf, Incarnation: 0, From: mtPeer(1)})
		h.feed(mtPeerAddr(2), &wire.Dead{Name: mtSelf, Incarnation: 1, From: mtPeer(2)})
		evs := h.ready().eventsAbout(mtSelf)
		if !on {
			require.Empty(t, evs)
			continue
		}
		require.Len(t, evs, 4)
		require.Equal(t, EventSuspect, evs[0].Kind)
		require.Equal(t, uint64(0), evs[0].Member.Incarnation)
		require.Equal(t, EventAlive, evs[1].Kind)
		require.Equal(t, uint64(1), evs[1].Member.Incarnation)
		require.Equal(t, EventLeave, evs[2].Kind)
		require.Equal(t, StateDead, evs[2].Member.State)
		require.Equal(t, EventAlive, evs[3].Kind)
		require.Equal(t, uint64(2), evs[3].Member.Incarnation)
	}
}

// Join after Leave: the member takes part again in the same process, at
// an incarnation above its leave, probing again; peers see it join.
func TestRejoinAfterLeaveMachine(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(2, 1)
	require.NoError(t, h.m.Leave(h.now))
	left := h.m.LocalMember().Incarnation
	h.ready()
	h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
	self := h.m.LocalMember()
	require.Equal(t, StateAlive, self.State)
	require.Greater(t, self.Incarnation, left)
	require.False(t, h.m.Status().LeaveDone)
	require.NoError(t, h.m.UpdateMeta(h.now, []byte("back")), "the API works again")
	ping, _, _ := h.firstProbe()
	require.NotNil(t, ping, "probing resumed")
}

func TestRejoinAfterLeaveOverSockets(t *testing.T) {
	ms := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	require.NoError(t, ms[2].Leave(ctx))
	require.Eventually(t, func() bool { return ms[0].log.saw(EventLeave, "node-2", StateLeft) }, formTimeout, pollEvery)
	n, err := ms[2].Join(ctx, ms[0].LocalMember().Addr.String())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool { return ms[0].NumMembers() == 3 && ms[1].NumMembers() == 3 }, formTimeout, pollEvery)
	mb, _ := ms[0].Member("node-2")
	require.Equal(t, StateAlive, mb.State)
	// A second Leave is a new one, and is seen again.
	require.NoError(t, ms[2].Leave(ctx))
	require.Eventually(t, func() bool { return ms[1].NumMembers() == 2 }, formTimeout, pollEvery)
}

// A member restarted under the same name, on another port, before it was
// declared dead, rejoins: the others see it alive at its new address (an
// update), not its old self.
func TestRestartUnderSameName(t *testing.T) {
	ms := startCluster(t, 3)
	old := ms[2].LocalMember().Addr
	require.NoError(t, ms[2].Shutdown())
	again := startMember(t, testConfig("node-2"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := again.Join(ctx, ms[0].LocalMember().Addr.String())
	require.NoError(t, err)
	require.NotEqual(t, old, again.LocalMember().Addr)
	require.Eventually(t, func() bool {
		for _, m := range ms[:2] {
			mb, ok := m.Member("node-2")
			if !ok || mb.State != StateAlive || mb.Addr != again.LocalMember().Addr {
				return false
			}
		}
		return true
	}, formTimeout, pollEvery, "the restarted member is not seen at its new address: %s", views(ms[:2]))
	require.Eventually(t, func() bool { return again.NumMembers() == 3 }, formTimeout, pollEvery)
	require.Zero(t, again.Stats().Lives.NameConflicts, "its previous life answers nothing: no conflict")
}
