package swim

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// holeConfig is mtConfig with anti-entropy on, which the push-pull asks
// follow: without it a member expects holes.
func holeConfig() *Config {
	cfg := mtConfig()
	cfg.PushPullInterval = 30 * time.Second
	return cfg
}

// holeStream is a stream request the Machine started, decoded: the
// push-pull's sender, or the TCP ping's messages.
type holeStream struct {
	req      StreamRequest
	pushPull bool
	msgs     []wire.Message
}

func holeStreams(t *testing.T, out mtOut) []holeStream {
	t.Helper()
	var got []holeStream
	for _, r := range out.Streams {
		hs := holeStream{req: r, pushPull: wire.IsPushPull(r.Data)}
		if !hs.pushPull {
			msgs, err := wire.DecodeStreamPacket(r.Data)
			require.NoError(t, err)
			hs.msgs = msgs
		}
		got = append(got, hs)
	}
	return got
}

// A stranger's ping in a name this member never heard of: the member it
// lacks is talking to it. It asks one of its own members for its state,
// never the stranger's address, at most once per holePushPullEvery
// ProbeIntervals, and the same peer at most once per push-pull interval.
func TestHoleStrangerAsksAMember(t *testing.T) {
	h := newMT(t, holeConfig())
	h.joinPeers(4, 1)
	h.feed(mtStranger, &wire.Ping{Seq: 1, Target: mtSelf, From: "newcomer"})
	streams := holeStreams(t, h.ready())
	require.Len(t, streams, 1)
	require.True(t, streams[0].pushPull)
	asked := streams[0].req.To
	require.NotEqual(t, mtStranger, asked, "a stranger chose the address")
	_, known := h.m.Member(mtPeerNameAt(asked))
	require.True(t, known, "the push-pull goes to a member")
	require.Equal(t, uint64(1), h.m.Stats().HolePushPulls)

	// Another, too soon: refused and counted.
	h.now = h.now.Add(holePushPullEvery*h.cfg.ProbeInterval - time.Millisecond)
	h.feed(mtStranger, &wire.Ping{Seq: 2, Target: mtSelf, From: "another"})
	require.Empty(t, h.ready().Streams)
	require.Equal(t, uint64(1), h.m.Stats().HoleAsksRefused)

	// Then the peer asked first relays a name it holds: it was asked
	// within the push-pull interval, refused; another peer is asked.
	h.now = h.now.Add(time.Millisecond)
	h.feed(asked, &wire.Suspect{Name: "another", Incarnation: 1, From: mtPeerNameAt(asked)})
	require.Empty(t, h.ready().Streams)
	require.Equal(t, uint64(2), h.m.Stats().HoleAsksRefused)
	other := mtPeerAddr(1)
	if other == asked {
		other = mtPeerAddr(2)
	}
	h.feed(other, &wire.Suspect{Name: "another", Incarnation: 1, From: mtPeerNameAt(other)})
	streams = holeStreams(t, h.ready())
	require.Len(t, streams, 1)
	require.Equal(t, other, streams[0].req.To)
	require.Equal(t, uint64(2), h.m.Stats().HolePushPulls)
}

// mtPeerNameAt is the name of the peer at addr.
func mtPeerNameAt(addr netip.AddrPort) string {
	b := addr.Addr().As4()
	return mtPeer(int(b[2])<<8 | int(b[3]))
}

// A member that relays news of one this member never heard of holds it:
// it is the one asked, for a suspicion's subject or accuser and for a
// ping-req's target alike.
func TestHoleAsksTheMemberThatNamedIt(t *testing.T) {
	for name, msg := range map[string]wire.Message{
		"subject": &wire.Suspect{Name: "unknown", Incarnation: 1, From: mtPeer(2)},
		"accuser": &wire.Suspect{Name: mtPeer(3), Incarnation: 1, From: "unknown"},
		"target":  &wire.PingReq{Seq: 9, Target: "unknown", TargetAddr: wire.EncodeAddr(mtStranger), From: mtPeer(2)},
	} {
		t.Run(name, func(t *testing.T) {
			h := newMT(t, holeConfig())
			h.joinPeers(4, 1)
			h.feed(mtPeerAddr(2), msg)
			streams := holeStreams(t, h.ready())
			require.Len(t, streams, 1)
			require.True(t, streams[0].pushPull)
			require.Equal(t, mtPeerAddr(2), streams[0].req.To)
			require.Equal(t, uint64(1), h.m.Stats().HolePushPulls)
		})
	}
}

// The packet that names a member may carry its alive too, in any order:
// then there is no hole, and nothing to ask.
func TestHoleFilledByThePacketItself(t *testing.T) {
	h := newMT(t, holeConfig())
	h.joinPeers(4, 1)
	h.feed(mtPeerAddr(2),
		&wire.Suspect{Name: mtPeer(3), Incarnation: 1, From: mtPeer(9)},
		&wire.Alive{Name: mtPeer(9), Addr: wire.EncodeAddr(mtPeerAddr(9)), Incarnation: 1})
	require.Empty(t, h.ready().Streams)
	require.Zero(t, h.m.Stats().HolePushPulls)
}

// A member held dead that acts (it sends a packet, pings, accuses another
// member) is asked directly, at the address held for it, by a TCP ping
// that carries its death; its alive in the reply brings it back. Asked
// once per holePingEvery periods.
func TestHoleDeadActorIsPinged(t *testing.T) {
	for name, evidence := range map[string]func(h *mt){
		"packet from it": func(h *mt) { h.feed(mtPeerAddr(1), mtAlive(3, 1)) },
		"accusation by it": func(h *mt) {
			h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(3), Incarnation: 1, From: mtPeer(1)})
		},
		"ping-req from it": func(h *mt) {
			h.feed(mtPeerAddr(1), &wire.PingReq{Seq: 5, Target: mtPeer(3), TargetAddr: wire.EncodeAddr(mtPeerAddr(3)), From: mtPeer(1)})
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newMT(t, holeConfig())
			h.joinPeers(4, 1)
			h.feedConfirmed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
			h.ready()
			evidence(h)
			streams := holeStreams(t, h.ready())
			require.Len(t, streams, 1)
			s := streams[0]
			require.False(t, s.pushPull)
			require.Equal(t, mtPeerAddr(1), s.req.To)
			require.Len(t, s.msgs, 2)
			ping := s.msgs[0].(*wire.Ping)
			require.Equal(t, mtPeer(1), ping.Target)
			require.Equal(t, &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtSelf}, s.msgs[1], "the ping carries the death, to be refuted")
			require.Equal(t, uint64(1), h.m.Stats().HolePings)

			// Asked again within holePingEvery: nothing, and no refusal.
			evidence(h)
			require.Empty(t, h.ready().Streams)
			require.Zero(t, h.m.Stats().HoleAsksRefused)

			// It answers as handleStreamPing does, having refuted.
			reply := wire.AppendCompound(nil, [][]byte{mtFrame(t, &wire.Ack{Seq: ping.Seq}), mtFrame(t, mtAlive(1, 2))})
			require.NoError(t, h.m.HandleStreamResponse(h.now, s.req.ID, reply, nil))
			got, _ := h.m.Member(mtPeer(1))
			require.Equal(t, StateAlive, got.State)
			require.Equal(t, uint64(2), got.Incarnation)
		})
	}
}

func mtFrame(t *testing.T, msg wire.Message) []byte {
	t.Helper()
	f, err := wire.AppendFrame(nil, msg)
	require.NoError(t, err)
	return f
}

// A member forgotten (a tombstone) that acts is asked at the address its
// tombstone holds; one that left, or left and was forgotten, is not: it
// announces a rejoin itself.
func TestHoleForgottenActorIsPinged(t *testing.T) {
	cfg := holeConfig()
	cfg.GossipToDeadTime = time.Second
	cfg.ReconnectTimeout = time.Hour
	h := newMT(t, cfg)
	h.joinPeers(6, 1)
	h.feedConfirmed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	h.feedConfirmed(mtPeerAddr(3), &wire.Dead{Name: mtPeer(3), Incarnation: 2, From: mtPeer(3), Left: true})
	h.feedConfirmed(mtPeerAddr(4), &wire.Dead{Name: mtPeer(4), Incarnation: 2, From: mtPeer(4), Left: true})
	h.run(h.now.Add(3*time.Second), nil)
	_, inTable := h.m.Member(mtPeer(1))
	require.False(t, inTable, "forgotten")
	require.NotNil(t, h.m.tombByName[mtPeer(1)])
	h.ready()

	// The left ones, one forgotten, one still in the table.
	h.feedConfirmed(mtPeerAddr(5), &wire.Dead{Name: mtPeer(5), Incarnation: 2, From: mtPeer(5), Left: true})
	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(6), Incarnation: 1, From: mtPeer(3)})
	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(6), Incarnation: 1, From: mtPeer(5)})
	require.Empty(t, h.ready().Streams, "a member that left is not asked")

	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(6), Incarnation: 1, From: mtPeer(1)})
	streams := holeStreams(t, h.ready())
	require.Len(t, streams, 1)
	require.Equal(t, mtPeerAddr(1), streams[0].req.To)
	require.Equal(t, &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtSelf}, streams[0].msgs[1])
}

// The TCP pings are bounded: holePingBurst at once, then holePingRefill
// per ProbeInterval; the rest are refused and counted.
func TestHolePingsAreBounded(t *testing.T) {
	h := newMT(t, holeConfig())
	const n = 10
	h.joinPeers(n, 1)
	for i := 1; i <= n-1; i++ {
		h.feedConfirmed(mtPeerAddr(n), &wire.Dead{Name: mtPeer(i), Incarnation: 1, From: mtPeer(n)})
	}
	h.ready()
	for i := 1; i <= n-1; i++ {
		h.feed(mtPeerAddr(i), &wire.Ping{Seq: uint32(i), Target: mtSelf, From: mtPeer(i)})
	}
	require.Len(t, h.ready().Streams, holePingBurst)
	st := h.m.Stats()
	require.Equal(t, uint64(holePingBurst), st.HolePings)
	require.Equal(t, uint64(n-1-holePingBurst), st.HoleAsksRefused)

	h.now = h.now.Add(h.cfg.ProbeInterval)
	for i := 1; i <= n-1; i++ {
		h.feed(mtPeerAddr(i), &wire.Ping{Seq: uint32(100 + i), Target: mtSelf, From: mtPeer(i)})
	}
	require.Len(t, h.ready().Streams, holePingRefill)
}

// A member whose table is full cannot take what it would be told: it
// does not ask.
func TestHoleNotAskedWithAFullTable(t *testing.T) {
	cfg := holeConfig()
	cfg.MaxMembers = 5
	h := newMT(t, cfg)
	h.joinPeers(4, 1)
	h.feed(mtStranger, &wire.Ping{Seq: 1, Target: mtSelf, From: "newcomer"})
	require.Empty(t, h.ready().Streams)
	require.Zero(t, h.m.Stats().HolePushPulls)
}

// digestMT is a paired Machine with its one peer, p001,
// with anti-entropy on (a digest asks through a push-pull).
func digestMT(t *testing.T) (*mt, *memberState) {
	cfg := mtConfig()
	cfg.PushPullInterval = 30 * time.Second
	cfg.AlignedProbing = true
	cfg.PairedProbing = true
	cfg.Detection.AnyTrafficHeartbeat = true
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
	h.feedConfirmed(mtPeerAddr(1), &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: mtPeer(1)})
	require.Equal(t, viewDigestOf(mtSelf, mtPeer(1), mtPeer(2), mtPeer(4), mtPeer(5)), h.m.viewDigest())
	h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtPeer(4), Incarnation: 1, From: mtPeer(1)})
	require.Equal(t, viewDigestOf(mtSelf, mtPeer(1), mtPeer(2), mtPeer(4), mtPeer(5)), h.m.viewDigest(), "a suspect is live")
	h.feed(mtPeerAddr(3), mtAlive(3, 2))
	require.Equal(t, viewDigestOf(mtSelf, mtPeer(1), mtPeer(2), mtPeer(3), mtPeer(4), mtPeer(5)), h.m.viewDigest())
}
