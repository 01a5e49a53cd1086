package swim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// digestMT is a paired Machine with its one peer, p001,
// with anti-entropy on (a digest asks through a push-pull).
func digestMT(t *testing.T) (*mt, *memberState) {
	cfg := mtConfig()
	cfg.PushPullInterval = 30 * time.Second
	cfg.AlignedProbing = true
	cfg.PairedProbing = true
	cfg.AnyTrafficHeartbeat = true
	h := newMT(t, cfg)
	h.join(pairedMember(1))
	return h, h.m.lookup(mtPeer(1))
}

// viewDigestOf is the digest of a view holding names.
func viewDigestOf(names ...string) wire.ViewDigest {
	d := wire.ViewDigest{Live: uint32(len(names))}
	for _, n := range names {
		d.Digest ^= uint32(ringKeyOf(n))
	}
	return d
}

// TestViewDigestRidesHeartbeats: once the view has stood still for
// stableRoundsToPair rounds, each Heartbeat carries this member's digest, which is what any member holding the
// same live members computes; after digestRounds of stillness, none.
func TestViewDigestRidesHeartbeats(t *testing.T) {
	h, peer := digestMT(t)
	r0 := h.m.roundOf(h.now)
	sent := driveRounds(h, peer, r0, r0+digestRounds+10, func(int64) bool { return true })
	want := viewDigestOf(mtSelf, mtPeer(1))
	var with, without []int64
	for _, p := range sent {
		if p.To != mtPeerAddr(1) {
			continue
		}
		hasBeat, hasDigest := false, false
		for _, msg := range p.Msgs {
			switch m := msg.(type) {
			case *wire.Heartbeat:
				hasBeat = true
			case *wire.ViewDigest:
				hasDigest = true
				require.Equal(t, want, *m)
			}
		}
		if !hasBeat {
			continue
		}
		if hasDigest {
			with = append(with, h.m.roundOf(p.At))
		} else {
			without = append(without, h.m.roundOf(p.At))
		}
	}
	require.NotEmpty(t, with, "no Heartbeat carried the digest")
	require.NotEmpty(t, without, "the digest never stopped")
	require.Less(t, with[len(with)-1], without[len(without)-1], "digests stop once the view has stood still")
	require.LessOrEqual(t, with[len(with)-1]-with[0], int64(digestRounds))
	require.Equal(t, uint64(len(with)), h.m.Stats().ViewDigestsSent)
}

// TestViewDigestFindsAHole: a partner whose digest says it holds a member
// this one lacks is asked for its state by a push-pull, at once; a digest
// equal to this member's view, one that arrives while the view still
// changes, and one from a stranger ask nothing.
func TestViewDigestFindsAHole(t *testing.T) {
	h, peer := digestMT(t)
	r0 := h.m.roundOf(h.now)
	driveRounds(h, peer, r0, r0+warmRounds, func(int64) bool { return true })
	h.ready()

	same := viewDigestOf(mtSelf, mtPeer(1))
	h.feed(mtPeerAddr(1), &wire.Heartbeat{From: mtPeer(1)}, &same)
	require.Empty(t, h.ready().Streams, "equal views: nothing to ask")

	// From an address that is no member's: ignored.
	more := viewDigestOf(mtSelf, mtPeer(1), "p777")
	h.feed(mtStranger, &more)
	require.Empty(t, h.ready().Streams, "a stranger's digest asked for something")
	require.Zero(t, h.m.Stats().ViewDigestsDiffering)

	h.feed(mtPeerAddr(1), &wire.Heartbeat{From: mtPeer(1)}, &more)
	streams := holeStreams(t, h.ready())
	require.Len(t, streams, 1, "a partner holds a member this one lacks: ask it")
	require.True(t, streams[0].pushPull)
	require.Equal(t, mtPeerAddr(1), streams[0].req.To, "the push-pull goes to the partner")
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.ViewDigestsDiffering)
	require.Equal(t, uint64(1), st.HolePushPulls)

	// Again at once: the hole asks' rate holds.
	h.feed(mtPeerAddr(1), &wire.Heartbeat{From: mtPeer(1)}, &more)
	require.Empty(t, h.ready().Streams)
	require.Equal(t, uint64(1), h.m.Stats().HoleAsksRefused)

	// While this member's view is changing, a differing digest is
	// news in flight, not a hole.
	h2, _ := digestMT(t)
	h2.feed(mtPeerAddr(1), &wire.Heartbeat{From: mtPeer(1)}, &more)
	require.Empty(t, h2.ready().Streams)
	require.Zero(t, h2.m.Stats().ViewDigestsDiffering)
}

// TestViewDigestTracksTheRing: the digest follows joins, deaths and
// returns, as a view built from scratch with the same live members would.
func TestViewDigestTracksTheRing(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(5, 1)
	require.Equal(t, viewDigestOf(mtSelf, mtPeer(1), mtPeer(2), mtPeer(3), mtPeer(4), mtPeer(5)), h.m.viewDigest())
	h.feed(mtPeerAddr(1), &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: mtPeer(1)})
	require.Equal(t, viewDigestOf(mtSelf, mtPeer(1), mtPeer(2), mtPeer(4), mtPeer(5)), h.m.viewDigest())
	h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtPeer(4), Incarnation: 1, From: mtPeer(1)})
	require.Equal(t, viewDigestOf(mtSelf, mtPeer(1), mtPeer(2), mtPeer(4), mtPeer(5)), h.m.viewDigest(), "a suspect is live")
	h.feed(mtPeerAddr(3), mtAlive(3, 2))
	require.Equal(t, viewDigestOf(mtSelf, mtPeer(1), mtPeer(2), mtPeer(3), mtPeer(4), mtPeer(5)), h.m.viewDigest())
}
