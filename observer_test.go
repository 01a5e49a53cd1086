package swim

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// obsSuspicion is one ObserveSuspicion call.
type obsSuspicion struct {
	held    time.Duration
	refuted bool
}

// obsRecorder records what the Machine reports to its Observer.
type obsRecorder struct {
	rtts       []time.Duration
	suspicions []obsSuspicion
	delays     []time.Duration
}

func (r *obsRecorder) ObserveBroadcastDelay(d time.Duration) { r.delays = append(r.delays, d) }

func (r *obsRecorder) ObserveProbeRTT(rtt time.Duration) { r.rtts = append(r.rtts, rtt) }

func (r *obsRecorder) ObserveSuspicion(held time.Duration, refuted bool) {
	r.suspicions = append(r.suspicions, obsSuspicion{held, refuted})
}

// newObservedMT is a Machine under test with cfg and a recording Observer,
// joined to peers p001..p003 at incarnation 1.
func newObservedMT(t *testing.T, cfg *Config) (*mt, *obsRecorder) {
	t.Helper()
	rec := &obsRecorder{}
	cfg.Observer = rec
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	return h, rec
}

// requireCounts checks MemberCounts against the states Members lists, and
// against want.
func requireCounts(t *testing.T, m *Machine, want MemberCounts) {
	t.Helper()
	var got MemberCounts
	for _, mem := range m.allMembers() {
		switch mem.State {
		case StateAlive:
			got.Alive++
		case StateSuspect:
			got.Suspect++
		case StateDead:
			got.Dead++
		case StateLeft:
			got.Left++
		}
	}
	require.Equal(t, got, m.MemberCounts(), "MemberCounts and the table disagree")
	require.Equal(t, want, got)
}

// TestObserverSuspicionToDeath: a suspect that stays silent is declared
// dead after its timeout and the final check; the Observer gets one
// suspicion, not refuted, as long as the Machine held it, in the
// Machine's own clock.
func TestObserverSuspicionToDeath(t *testing.T) {
	cfg := mtConfig()
	cfg.Detection.FinalCheck = true
	h, rec := newObservedMT(t, cfg)
	h.now = mtStart.Add(123 * time.Millisecond)
	suspectedAt := h.now
	deadline := h.suspectPeer1()
	requireCounts(t, h.m, MemberCounts{Alive: 3, Suspect: 1})
	require.Empty(t, rec.suspicions)

	silent := map[netip.AddrPort]bool{mtPeerAddr(1): true}
	h.run(deadline.Add(2*cfg.ProbeInterval), silent)
	mem, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateDead, mem.State)
	require.Equal(t, uint64(1), h.m.Stats().DeathsDeclared)
	require.Len(t, rec.suspicions, 1)
	// Declared dead ProbeTimeout after the final check, which starts at
	// most ProbeTimeout before the timeout.
	held := rec.suspicions[0].held
	require.False(t, rec.suspicions[0].refuted)
	require.GreaterOrEqual(t, held, deadline.Sub(suspectedAt))
	require.LessOrEqual(t, held, deadline.Sub(suspectedAt)+cfg.ProbeTimeout)
	requireCounts(t, h.m, MemberCounts{Alive: 3, Dead: 1})
}

// TestObserverSuspicionOutcomes: each way a suspicion ends, and what the
// Observer is told of it.
func TestObserverSuspicionOutcomes(t *testing.T) {
	p1 := mtPeerAddr(1)
	for _, tc := range []struct {
		name string
		// end ends the suspicion raised at h.now; after says how long
		// after the suspicion it did.
		end   func(h *mt) (after time.Duration)
		want  []obsSuspicion
		count MemberCounts
	}{
		{
			name: "refuted",
			end: func(h *mt) time.Duration {
				h.now = h.now.Add(700 * time.Millisecond)
				h.feed(p1, mtAlive(1, 2))
				return 700 * time.Millisecond
			},
			want:  []obsSuspicion{{700 * time.Millisecond, true}},
			count: MemberCounts{Alive: 4},
		},
		{
			name: "dead by gossip",
			end: func(h *mt) time.Duration {
				h.now = h.now.Add(2 * time.Second)
				h.feedConfirmed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
				return 2 * time.Second
			},
			want:  []obsSuspicion{{2 * time.Second, false}},
			count: MemberCounts{Alive: 3, Dead: 1},
		},
		{
			name: "suspected again at a newer incarnation, then refuted",
			end: func(h *mt) time.Duration {
				start := h.now
				h.now = start.Add(time.Second)
				h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(1), Incarnation: 2, From: mtPeer(2)})
				h.now = start.Add(3 * time.Second)
				h.feed(p1, mtAlive(1, 3))
				return 3 * time.Second
			},
			want:  []obsSuspicion{{3 * time.Second, true}},
			count: MemberCounts{Alive: 4},
		},
		{
			name: "left",
			end: func(h *mt) time.Duration {
				h.now = h.now.Add(time.Second)
				h.feedConfirmed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2), Left: true})
				return time.Second
			},
			want:  nil, // a graceful leave is no outcome of the suspicion
			count: MemberCounts{Alive: 3, Left: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rec := newObservedMT(t, mtConfig())
			h.now = mtStart.Add(time.Second)
			h.suspectPeer1()
			tc.end(h)
			require.Equal(t, tc.want, rec.suspicions)
			requireCounts(t, h.m, tc.count)
			require.Empty(t, h.m.suspectSince, "every ended suspicion is forgotten")
		})
	}
}

// TestObserverRTT: a direct probe's ack, the ack to a ping sent for a
// ping-req and an answered Ping each report their round trip.
func TestObserverRTT(t *testing.T) {
	t.Run("probe", func(t *testing.T) {
		h, rec := newObservedMT(t, mtConfig())
		ping, pkt, _ := h.firstProbe()
		h.now = h.now.Add(7 * time.Millisecond)
		h.feed(pkt.To, &wire.Ack{Seq: ping.Seq})
		require.Equal(t, []time.Duration{7 * time.Millisecond}, rec.rtts)
	})
	t.Run("ping-req", func(t *testing.T) {
		h, rec := newObservedMT(t, mtConfig())
		h.feed(mtPeerAddr(1), &wire.PingReq{Seq: 77, Target: mtPeer(2), TargetAddr: wire.EncodeAddr(mtPeerAddr(2)), From: mtPeer(1)})
		ps, _ := pingsTo(h.ready(), mtPeer(2))
		require.Len(t, ps, 1, "the relay pings the target")
		h.now = h.now.Add(5 * time.Millisecond)
		h.feed(mtPeerAddr(2), &wire.Ack{Seq: ps[0].Seq})
		require.Equal(t, []time.Duration{5 * time.Millisecond}, rec.rtts)
	})
	t.Run("Ping", func(t *testing.T) {
		h, rec := newObservedMT(t, mtConfig())
		_, err := h.m.Ping(h.now, mtPeer(3), time.Second)
		require.NoError(t, err)
		ps, _ := pingsTo(h.ready(), mtPeer(3))
		require.Len(t, ps, 1)
		h.now = h.now.Add(3 * time.Millisecond)
		h.feed(mtPeerAddr(3), &wire.Ack{Seq: ps[0].Seq})
		require.Equal(t, []time.Duration{3 * time.Millisecond}, rec.rtts)
	})
	t.Run("an ack from elsewhere", func(t *testing.T) {
		h, rec := newObservedMT(t, mtConfig())
		ping, _, _ := h.firstProbe()
		h.feed(mtStranger, &wire.Ack{Seq: ping.Seq})
		require.Empty(t, rec.rtts, "an ack the probe did not ask for is no round trip")
	})
}

// TestMemberCountsWithoutObserver: the counts are kept with no Observer
// too, through a suspicion, a refutation, a death and this member's leave.
func TestMemberCountsWithoutObserver(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	requireCounts(t, h.m, MemberCounts{Alive: 4})
	h.suspectPeer1()
	requireCounts(t, h.m, MemberCounts{Alive: 3, Suspect: 1})
	h.feed(mtPeerAddr(1), mtAlive(1, 2))
	requireCounts(t, h.m, MemberCounts{Alive: 4})
	h.feedConfirmed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: mtPeer(2)})
	requireCounts(t, h.m, MemberCounts{Alive: 3, Dead: 1})
	require.NoError(t, h.m.Leave(h.now))
	require.Equal(t, MemberCounts{Alive: 2, Dead: 1, Left: 1}, h.m.MemberCounts())
}

// TestObserverBroadcastDelay: a broadcast delivered for the first time
// gives one sample, from the origin's send time to now; a duplicate gives
// none, nor does a broadcast that does not say when it was sent, and a
// send time ahead of this member's clock (clocks apart) reads as 0.
func TestObserverBroadcastDelay(t *testing.T) {
	h, rec := newObservedMT(t, mtConfig())
	h.now = mtStart.Add(time.Second)
	sent := uint64(h.now.Add(-40 * time.Millisecond).UnixMilli())
	b := &wire.Broadcast{Origin: mtPeer(1), Epoch: 1, Seq: 1, Payload: []byte("x"), Sent: sent}
	h.feed(mtPeerAddr(1), b)
	h.feed(mtPeerAddr(2), b)
	require.Equal(t, []time.Duration{40 * time.Millisecond}, rec.delays)

	h.feed(mtPeerAddr(1), &wire.Broadcast{Origin: mtPeer(1), Epoch: 1, Seq: 2, Payload: []byte("y")})
	require.Len(t, rec.delays, 1, "no send time, no sample")

	ahead := uint64(h.now.Add(time.Second).UnixMilli())
	h.feed(mtPeerAddr(1), &wire.Broadcast{Origin: mtPeer(1), Epoch: 1, Seq: 3, Payload: []byte("z"), Sent: ahead})
	require.Equal(t, []time.Duration{40 * time.Millisecond, 0}, rec.delays)
}
