package swim

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// The queue pops by deadline, then by kind, then in the
// order armed.
func TestTimerQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var q timerQueue
	var in []timer
	for range 500 {
		tm := timer{at: mtStart.Add(time.Duration(rng.IntN(20)) * time.Millisecond), kind: timerKind(rng.IntN(int(timerKinds)))}
		q.push(tm)
		tm.order = q.pushed - 1
		in = append(in, tm)
	}
	var prev *timer
	for q.len() > 0 {
		tm := q.pop()
		if prev != nil {
			require.True(t, prev.before(&tm), "popped %+v after %+v", tm, *prev)
		}
		prev = &tm
	}
	require.Len(t, in, 500)
}

// An answered probe, relay or check leaves no deadline behind: the next
// deadline is that of pending work, not of timers whose work ended (the
// driver would otherwise wake for nothing).
func TestAnsweredTimersLeaveNoDeadline(t *testing.T) {
	cfg := mtConfig()
	cfg.Detection.Nacks = true
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	periodic := func() time.Time {
		// The earliest of the periodic timers, which stay armed.
		d := h.m.timers.due[timerProbe]
		for _, at := range []time.Time{h.m.timers.due[timerPushPull], h.m.timers.due[timerReconnect]} {
			if !at.IsZero() && at.Before(d) {
				d = at
			}
		}
		return d
	}

	// A ping-req we serve, whose target answers at once.
	h.feed(mtPeerAddr(1), &wire.PingReq{Seq: 9, Target: mtPeer(2), TargetAddr: wire.EncodeAddr(mtPeerAddr(2)), From: mtPeer(1)})
	pings, _ := h.ready().pings()
	require.Len(t, pings, 1)
	require.Equal(t, h.now.Add(cfg.ProbeTimeout*4/5), h.m.NextDeadline(), "the nack is due")
	h.feed(mtPeerAddr(2), &wire.Ack{Seq: pings[0].Seq})
	h.ready()
	require.Equal(t, periodic(), h.m.NextDeadline(), "the relay is over: its nack and expiry are not deadlines")

	// Our own probe, answered.
	ping, pkt, _ := h.firstProbe()
	require.Equal(t, h.now.Add(cfg.ProbeTimeout), h.m.NextDeadline(), "the probe's timeout is due")
	h.feed(pkt.To, &wire.Ack{Seq: ping.Seq})
	require.Equal(t, periodic(), h.m.NextDeadline(), "the probe is over")
}

// A stream request whose outcome the driver never reports fails after
// twice its Timeout instead of being kept forever.
func TestUnansweredStreamExpires(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
	require.Len(t, ids, 1)
	r := h.ready()
	require.Len(t, r.Streams, 1)
	timeout := r.Streams[0].Timeout

	h.tick(h.now.Add(timeout))
	require.Zero(t, h.m.Stats().StreamsExpired, "the driver's own timeout comes first")
	h.tick(mtStart.Add(streamExpiry(timeout)))
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.StreamsExpired)
	require.Equal(t, uint64(1), st.PushPullsFailed)
	require.ErrorIs(t, h.m.HandleStreamResponse(h.now, ids[0], nil, nil), ErrUnknownStream, "the exchange is forgotten")
	require.Empty(t, h.m.streams)
}

// A timer re-armed for an earlier time fires then, once: the entry armed
// for the later time no longer matches.
func TestRearmedTimerFiresOnce(t *testing.T) {
	cfg := mtConfig()
	cfg.SuspicionMaxTimeoutMult = 4
	h := newMT(t, cfg)
	h.joinPeers(5, 1)
	h.settle()
	// Two accusations: the second confirms the first, bringing the
	// deadline forward. The suspicion expires once, at the earlier time.
	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	first := h.m.suspicions[mtPeer(1)].deadline
	h.feed(mtPeerAddr(3), &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: mtPeer(3)})
	second := h.m.suspicions[mtPeer(1)].deadline
	require.True(t, second.Before(first), "a confirmation shortens the suspicion")
	queued := 0
	for _, tm := range h.m.timers.h {
		if tm.kind == timerSuspicion && tm.name == mtPeer(1) {
			queued++
		}
	}
	require.Equal(t, 2, queued, "the earlier entry is not removed, only outdated")
	h.tick(second)
	mem, _ := h.m.Member(mtPeer(1))
	require.NotEqual(t, StateSuspect, mem.State, "expired at the confirmed deadline")
	deaths := h.m.Stats().DeathsDeclared + h.m.Stats().FinalChecks
	h.tick(first)
	require.Equal(t, deaths, h.m.Stats().DeathsDeclared+h.m.Stats().FinalChecks, "the outdated entry does nothing")
}
