package swim

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// stormConfig is holeConfig with periodic gossip on, at LAN's pace.
func stormConfig() *Config {
	cfg := holeConfig()
	cfg.GossipInterval = 200 * time.Millisecond
	return cfg
}

// stormMT is a member of a 2,048-member cluster (a join storm's rounds
// are spaced by 4 GossipIntervals there).
func stormMT(t *testing.T) *mt {
	h := newMT(t, stormConfig())
	h.joinPeers(2047, 1)
	require.Equal(t, 4*h.cfg.GossipInterval, h.m.joinStormGap())
	return h
}

// newcomerAlive is the alive of a member that just joined, as gossip
// brings it.
func newcomerAlive(i int) *wire.Alive {
	addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), 7946)
	return &wire.Alive{Name: fmt.Sprintf("new%04d", i), Addr: wire.EncodeAddr(addr), Incarnation: 1}
}

// gossipRounds counts the gossip packets of out and the distinct times
// they went out at.
func gossipRounds(out mtOut) (packets, rounds int) {
	at := map[time.Time]bool{}
	for _, p := range out.Packets {
		if p.isGossipOnly() {
			packets++
			at[p.At] = true
		}
	}
	return packets, len(at)
}

// In a join storm the newcomers' alives open a gossip round at most once
// per joinStormGap, and still each goes out: 10 joins a second for 8 s at
// 2,048 members open about 15 rounds, not 40 (one every GossipInterval).
// The first join is not yet a storm: its alive keeps the rounds at
// GossipInterval until it has been sent 16 times, about 6 rounds; then
// one round per 800 ms.
func TestJoinStormSpacesGossipRounds(t *testing.T) {
	h := stormMT(t)
	var all mtOut
	const joins = 80
	start := h.now
	for i := range joins {
		h.feed(mtPeerAddr(1+i%100), newcomerAlive(i))
		out := h.run(start.Add(time.Duration(i+1)*100*time.Millisecond), nil)
		all.Packets = append(all.Packets, out.Packets...)
	}
	packets, rounds := gossipRounds(all)
	var times []time.Duration
	seen := map[time.Time]bool{}
	for _, p := range all.Packets {
		if p.isGossipOnly() && !seen[p.At] {
			seen[p.At] = true
			times = append(times, p.At.Sub(start))
		}
	}
	t.Logf("%d gossip packets in %d rounds at %v; %d lazy", packets, rounds, times, h.m.Stats().JoinNewsLazy)
	require.LessOrEqual(t, rounds, 17, "rounds opened in 8 s")
	require.Equal(t, uint64(joins-1), h.m.Stats().JoinNewsLazy, "all but the first join")
	sent := map[string]bool{}
	for _, p := range all.Packets {
		for _, msg := range p.Msgs {
			if a, ok := msg.(*wire.Alive); ok {
				sent[a.Name] = true
			}
		}
	}
	for i := range joins {
		require.True(t, sent[newcomerAlive(i).Name], "the alive of newcomer %d was never sent", i)
	}
}

// A lone join is not a storm: its alive goes out in the next round, as in a
// small cluster, and so does one that comes long after it.
func TestLoneJoinGossipedAtOnce(t *testing.T) {
	h := stormMT(t)
	for i, gap := range []time.Duration{0, 5 * time.Second} {
		h.run(h.now.Add(gap), nil)
		h.m.Ready()
		h.feed(mtPeerAddr(1), newcomerAlive(i))
		out := h.run(h.now, nil)
		packets, rounds := gossipRounds(out)
		require.Equal(t, 1, rounds, "join %d: a round at once", i)
		require.Equal(t, h.cfg.GossipNodes, packets, "join %d", i)
	}
	require.Zero(t, h.m.Stats().JoinNewsLazy)
}

// stormDeferred runs a storm of 10 joins a second for 4 s, then on to
// GossipInterval after its last round, when the queue holds only join news
// and the next round has been put off to joinStormGap after the last.
func stormDeferred(t *testing.T, h *mt) {
	t.Helper()
	start := h.now
	var last time.Time
	for i := range 40 {
		h.feed(mtPeerAddr(1+i%100), newcomerAlive(i))
		for _, p := range h.run(start.Add(time.Duration(i+1)*100*time.Millisecond), nil).Packets {
			if p.isGossipOnly() {
				last = p.At
			}
		}
	}
	for _, p := range h.run(last.Add(h.cfg.GossipInterval+time.Millisecond), nil).Packets {
		require.False(t, p.isGossipOnly(), "a round at %v, %v after the last", p.At.Sub(start), p.At.Sub(last))
	}
	require.Equal(t, last.Add(h.m.joinStormGap()), h.m.timers.due[timerGossip], "the next round is put off")
}

// News relayed during a storm keeps the storm's pace: a suspicion heard
// while the rounds are spaced out does not bring them back to
// GossipInterval (every member would, for every rumor), but goes out in
// the next round of the storm, first of what is queued.
func TestJoinStormPacesRelayedNews(t *testing.T) {
	h := stormMT(t)
	stormDeferred(t, h)
	due := h.m.timers.due[timerGossip]
	h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtPeer(7), Incarnation: 1, From: mtPeer(1)})
	for _, p := range h.run(due.Add(-time.Millisecond), nil).Packets {
		require.False(t, p.isGossipOnly(), "a round at %v, before the storm's next one at %v", p.At, due)
	}
	require.Equal(t, due, h.m.timers.due[timerGossip], "the round is still put off")
	suspicion := false
	for _, p := range h.run(due, nil).Packets {
		if p.isGossipOnly() && len(deltasAbout(p.Msgs, mtPeer(7))) > 0 {
			suspicion = true
		}
	}
	require.True(t, suspicion, "the suspicion went out in the storm's next round")
}

// Outside a storm too, in a cluster this large: a relayed rumor goes out
// in a round at once when the last round is long past, and the next one
// waits for joinStormGap after it, not GossipInterval.
func TestRelayedNewsPacedInALargeCluster(t *testing.T) {
	h := stormMT(t)
	h.run(h.now.Add(10*time.Second), nil)
	h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtPeer(7), Incarnation: 1, From: mtPeer(1)})
	first := h.run(h.now, nil)
	_, rounds := gossipRounds(first)
	require.Equal(t, 1, rounds, "the first rumor goes out at once")
	last := h.m.lastGossipRound
	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(8), Incarnation: 1, From: mtPeer(2)})
	for _, p := range h.run(last.Add(h.m.joinStormGap()-time.Millisecond), nil).Packets {
		require.False(t, p.isGossipOnly(), "a round %v after the last", p.At.Sub(last))
	}
	_, rounds = gossipRounds(h.run(last.Add(h.m.joinStormGap()), nil))
	require.Equal(t, 1, rounds, "the next round, joinStormGap after the last")
}

// News this member is the source of is not paced: its refutation, and its
// leave, go out at once.
func TestJoinStormDoesNotPaceOwnNews(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(h *mt)
	}{
		{"refutation", func(h *mt) {
			h.feed(mtPeerAddr(1), &wire.Suspect{Name: h.m.selfName, Incarnation: h.m.self.inc(), From: mtPeer(1)})
		}},
		{"leave", func(h *mt) { require.NoError(t, h.m.Leave(h.now)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := stormMT(t)
			stormDeferred(t, h)
			tc.act(h)
			own := false
			for _, p := range h.run(h.now, nil).Packets {
				if p.isGossipOnly() && len(deltasAbout(p.Msgs, h.m.selfName)) > 0 {
					own = true
				}
			}
			require.True(t, own, "our own news went out at once, not %v after the last round", h.m.joinStormGap())
		})
	}
}

// Nor are the applications' broadcasts, this member's or relayed.
func TestJoinStormDoesNotHoldBackBroadcasts(t *testing.T) {
	h := stormMT(t)
	stormDeferred(t, h)
	_, err := h.m.Broadcast(h.now, "k", []byte("v"))
	require.NoError(t, err)
	require.False(t, h.m.timers.due[timerGossip].After(h.now), "the round is brought back")
}

// In a storm a hole is asked for only if gossip has not filled it within
// joinStormGrace: a newcomer that pings this member before its alive
// arrives costs no push-pull; one whose alive never comes does.
func TestJoinStormDefersHoleAsks(t *testing.T) {
	h := stormMT(t)
	h.feed(mtPeerAddr(1), newcomerAlive(0)) // a storm is on
	h.feed(mtStranger, &wire.Ping{Seq: 1, Target: mtSelf, From: newcomerAlive(1).Name})
	h.feed(mtStranger, &wire.Ping{Seq: 2, Target: mtSelf, From: newcomerAlive(2).Name})
	require.Equal(t, uint64(2), h.m.Stats().HoleAsksDeferred)
	require.Zero(t, h.m.Stats().HolePushPulls, "no ask while the news may be in flight")

	h.feed(mtPeerAddr(2), newcomerAlive(1)) // gossip fills the first hole
	h.run(h.now.Add(h.m.joinStormGrace()-time.Millisecond), nil)
	require.Zero(t, h.m.Stats().HolePushPulls, "nothing asked within the grace")
	h.run(h.now.Add(2*time.Millisecond), nil)
	require.Equal(t, uint64(1), h.m.Stats().HolePushPulls, "only the hole gossip did not fill is asked for")
}

// Lazy join news is retired after half the sends of other news.
func TestLazyJoinNewsSentHalfAsOften(t *testing.T) {
	q := newPiggybackQueue(100, 0)
	eager := q.queue("eager", frameOf(10, 'e'))
	lazy := q.queue("lazy", frameOf(10, 'l'))
	q.markLazy(lazy)
	require.Equal(t, 1, q.lazy)
	const limit = 16
	sends := map[string]int{}
	for range 2 * limit {
		frames, _ := q.take(nil, 1000, limit, wire.MaxProtocol)
		for _, f := range frames {
			sends[string(f[len(f)-1:])]++
		}
	}
	require.Equal(t, limit, sends["e"], "eager news")
	require.Equal(t, lazyLimit(limit), sends["l"], "lazy news")
	require.Equal(t, 8, lazyLimit(limit))
	require.True(t, eager.removed)
	require.True(t, lazy.removed)
	require.Zero(t, q.lazy)
	require.Zero(t, q.Len())
}

// A member keeps at most joinStormBacklog newcomers' alives of a storm:
// past it the one sent most goes, never other news.
func TestJoinStormBacklogBounded(t *testing.T) {
	h := stormMT(t)
	h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtPeer(7), Incarnation: 1, From: mtPeer(1)})
	const joins = joinStormBacklog + 50
	for i := range joins {
		h.feed(mtPeerAddr(1+i%100), newcomerAlive(i))
		if i == 10 {
			h.run(h.now.Add(h.m.joinStormGap()/2), nil) // some sent before the rest come
		}
	}
	st := h.m.Stats()
	require.Equal(t, uint64(joins-1), st.JoinNewsLazy, "all but the first join")
	require.Equal(t, joinStormBacklog, h.m.bq.lazy)
	require.Equal(t, st.JoinNewsLazy-joinStormBacklog, st.JoinNewsDropped)
	_, queued := h.m.bq.byKey[mtPeer(7)]
	require.True(t, queued, "the suspicion stays queued")
	for i := 1; i <= 10; i++ {
		_, queued := h.m.bq.byKey[newcomerAlive(i).Name]
		require.False(t, queued, "newcomer %d, sent before the rest came, was dropped first", i)
	}
	_, queued = h.m.bq.byKey[newcomerAlive(joins-1).Name]
	require.True(t, queued, "the newest is kept")
}
