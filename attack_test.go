package swim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Attacks by a stranger on the network, each tried on the Machine as the
// packets or streams an attacker would send, with what must hold after it.
// Each of these tests failed on the code before the defence it checks. The
// attacks that read as a script of packets are scenarios instead:
// testdata/scenarios/attack_*.txt and tombstones.txt.

// mtInvented is the push-pull or gossip entry of a member nobody runs.
func mtInvented(i int) wire.MemberState {
	return wire.MemberState{
		Name:        "fake-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + string(rune('a'+i/17576%26)),
		Addr:        wire.EncodeAddr(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 7946)),
		Incarnation: 1,
	}
}

// inventedPushPull encodes a push-pull from a stranger announcing n
// invented members.
func inventedPushPull(t *testing.T, n int) []byte {
	t.Helper()
	w := wire.NewPushPullWriter(nil, "stranger", false, n)
	addr := netip.MustParseAddrPort("10.200.0.1:7946")
	var name [16]byte
	for i := range n {
		b := append(name[:0], "fake-"...)
		for v := i; ; v /= 36 {
			b = append(b, "0123456789abcdefghijklmnopqrstuvwxyz"[v%36])
			if v < 36 {
				break
			}
		}
		w.Add(string(b), addr, 1, uint8(StateAlive), nil, wire.Versions{})
	}
	data, err := w.Bytes()
	require.NoError(t, err)
	return data
}

// TestAttackHugePushPullRefused: a push-pull announcing 2^20 invented
// members (the wire limit), if merged, would crash the member when it
// encoded its reply. It is refused whole, before anything is merged.
func TestAttackHugePushPullRefused(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	data := inventedPushPull(t, wire.MaxPushPullMembers)
	start := time.Now()
	reply, err := h.m.HandleStream(h.now, mtStranger, data)
	took := time.Since(start)
	require.Error(t, err)
	require.Nil(t, reply)
	require.Equal(t, 4, h.m.NumMembers(), "nothing of it was merged")
	require.Equal(t, uint64(1), h.m.Stats().PushPullsRefused)
	t.Logf("refused in %v", took)
}

// TestAttackSharedRegistryFull: Machines sharing a Registry are bounded
// together by its versions (2^24), which MaxMembers alone does not keep
// them under; invented members arriving once it is full are refused and
// counted instead of panicking the process, and a full Registry makes no
// new Machine.
func TestAttackSharedRegistryFull(t *testing.T) {
	reg := NewRegistry()
	reg.maxVers = 8
	m, err := reg.NewMachine(mtConfig(), mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
	require.NoError(t, err)
	h := &mt{t: t, m: m, cfg: mtConfig(), now: mtStart}
	invented := make([]wire.MemberState, 0, 20)
	for i := range 20 {
		invented = append(invented, mtInvented(i))
	}
	// Announced by a key holder's push-pull (a stranger's news would be
	// checked first: newcomers.go).
	require.NotPanics(t, func() { h.join(invented...) })
	require.Equal(t, 7, h.m.NumMembers(), "self and six invented: one version kept back")
	require.Equal(t, uint64(20-6), h.m.Stats().MembersRefused)

	// A known member's new identity takes the version kept back.
	inv := mtInvented(0)
	require.NotPanics(t, func() {
		h.feed(mtStranger, &wire.Alive{Name: inv.Name, Addr: inv.Addr, Incarnation: inv.Incarnation + 1, Meta: []byte("new")})
	})
	mem, ok := h.m.Member(inv.Name)
	require.True(t, ok)
	require.Equal(t, []byte("new"), mem.Meta)

	_, err = reg.NewMachine(mtConfig(), mtPeerAddr(1), rand.New(rand.NewPCG(1, 2)), mtStart)
	require.ErrorIs(t, err, ErrRegistryFull)
}

// TestAttackTableCap: invented members arriving by gossip (255 fit in one
// compound packet) or push-pull fill the table only up to MaxMembers; the
// rest are refused and counted, and known members keep working.
func TestAttackTableCap(t *testing.T) {
	cfg := mtConfig()
	cfg.MaxMembers = 20
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	msgs := make([]wire.Message, 0, 200)
	for i := range 200 {
		inv := mtInvented(i)
		msgs = append(msgs, &wire.Alive{Name: inv.Name, Addr: inv.Addr, Incarnation: inv.Incarnation})
	}
	h.feed(mtPeerAddr(1), msgs...)
	require.Equal(t, 20, h.m.NumMembers(), "the table stops at MaxMembers")
	require.Equal(t, uint64(200-16), h.m.Stats().MembersRefused)

	// A known member's news still counts.
	h.feed(mtPeerAddr(1), &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(mtPeerAddr(1)), Incarnation: 5, Meta: []byte("new")})
	mem, ok := h.m.Member(mtPeer(1))
	require.True(t, ok)
	require.Equal(t, uint64(5), mem.Incarnation)

	// A push-pull announcing more than MaxMembers is refused whole.
	_, err := h.m.HandleStream(h.now, mtStranger, inventedPushPull(t, cfg.MaxMembers+1))
	require.Error(t, err)
	require.Equal(t, uint64(1), h.m.Stats().PushPullsRefused)
}

// TestAttackIncarnationWrap: a refutation that computed seen+1 would wrap
// to 0 at 2^64-1, so that one packet made a member dead for good; the next
// incarnation saturates instead. The attack itself, implausible deltas
// dropped, is testdata/scenarios/attack_incarnation.txt.
func TestAttackIncarnationWrap(t *testing.T) {
	require.Equal(t, uint64(math.MaxUint64), nextIncarnation(math.MaxUint64))
	require.Equal(t, uint64(8), nextIncarnation(7))
}

// TestAttackAckSpray: sequence numbers that counted up from 0 would let
// anyone spraying acks 1..255 keep a crashed member alive, so they start
// at a random value; that an ack counts only from the probed member or an
// asked relay is testdata/scenarios/attack_acks.txt.
func TestAttackAckSpray(t *testing.T) {
	a, err := NewMachine(mtConfig(), mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
	require.NoError(t, err)
	b, err := NewMachine(mtConfig(), mtSelfAddr, rand.New(rand.NewPCG(3, 4)), mtStart)
	require.NoError(t, err)
	require.NotEqual(t, a.nextSeq(), b.nextSeq())
	require.Greater(t, a.nextSeq(), uint32(256))
}

// TestAttackPingReqRate: a member's burst of ping-reqs is served up to
// maxRelayBurst, the rest refused and counted. The other amplification
// attacks are testdata/scenarios/attack_amplification.txt.
func TestAttackPingReqRate(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	for i := range 10 * maxRelayBurst {
		h.feed(mtPeerAddr(1), &wire.PingReq{Seq: uint32(i), Target: mtPeer(2), TargetAddr: wire.EncodeAddr(mtPeerAddr(2)), From: mtPeer(1)})
	}
	ps, _ := h.ready().pings()
	require.Len(t, ps, maxRelayBurst, "a burst is served up to its bound")
	require.Equal(t, uint64(9*maxRelayBurst), h.m.Stats().PingReqsRefused)
}

// TestLargeMergeInSlices: a push-pull of more than mergeSlice members is
// applied a slice per input, so a driver holding a lock while it feeds the
// Machine never holds it long; our own entry is applied first, so a
// refutation still rides on the reply.
func TestLargeMergeInSlices(t *testing.T) {
	cfg := mtConfig()
	cfg.MaxMembers = 10000
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	const n = 5000
	w := wire.NewPushPullWriter(nil, mtPeer(1), false, n+1)
	for i := range n {
		w.Add(mtPeer(100+i), mtPeerAddr(100+i), 1, uint8(StateAlive), nil, wire.Versions{})
	}
	w.Add(mtSelf, mtSelfAddr, 0, uint8(StateSuspect), nil, wire.Versions{}) // last: applied first all the same
	data, err := w.Bytes()
	require.NoError(t, err)

	reply, err := h.m.HandleStream(h.now, mtPeerAddr(1), data)
	require.NoError(t, err)
	require.Equal(t, 4+mergeSlice, h.m.NumMembers(), "one slice merged with the request")
	msgs, err := wire.DecodeStreamPacket(reply)
	require.NoError(t, err)
	var selfInReply *wire.MemberState
	for i, ms := range msgs[0].(*wire.PushPull).Members {
		if ms.Name == mtSelf {
			selfInReply = &msgs[0].(*wire.PushPull).Members[i]
		}
	}
	require.NotNil(t, selfInReply)
	require.Equal(t, uint64(1), selfInReply.Incarnation, "the reply carries the refutation")

	ticks := 0
	for h.m.NumMembers() < 4+n {
		d := h.m.NextDeadline()
		require.False(t, d.After(h.now), "the next slice is due at once")
		before := h.m.NumMembers()
		h.tick(h.now)
		require.LessOrEqual(t, h.m.NumMembers()-before, mergeSlice)
		ticks++
		require.Less(t, ticks, 10)
	}
	require.Equal(t, (n-mergeSlice+mergeSlice-1)/mergeSlice, ticks)
	require.True(t, h.m.NextDeadline().After(h.now), "no slice left to merge")
}

// TestOverlongNameInPushPull: a push-pull whose sender's name is 64 KiB is
// malformed, not refused for its member count: it is dropped and counted as
// such, and its error names the field and the limit (the runtime logs the
// refusals of push-pulls for their size as "over MaxMembers").
func TestOverlongNameInPushPull(t *testing.T) {
	h := newMT(t, mtConfig())
	w := wire.NewPushPullWriter(nil, "XXXX", true, 1)
	w.Add("XXXX", mtPeerAddr(1), 1, uint8(StateAlive), nil, wire.Versions{})
	data, err := w.Bytes()
	require.NoError(t, err)
	long := append([]byte{0xda, 0xff, 0xff}, bytes.Repeat([]byte("n"), 65535)...)
	data = bytes.ReplaceAll(data, []byte{0xa4, 'X', 'X', 'X', 'X'}, long)
	_, err = h.m.HandleStream(h.now, mtStranger, data)
	require.ErrorIs(t, err, wire.ErrTooLarge)
	require.ErrorContains(t, err, "From")
	require.ErrorContains(t, err, fmt.Sprintf("limit %d", wire.MaxNameLen))
	require.Zero(t, h.m.Stats().PushPullsRefused, "not a refusal for its size")
	require.Equal(t, uint64(1), h.m.Stats().PacketsDropped)
	require.Equal(t, 1, h.m.NumMembers())
}

// TestAttackIncarnationRatchet: one accuser's self-accusations of this
// member at 2^32 above its incarnation, 40 in 5 s (within its bucket's
// burst and refill), took the member to about 2^37 and held its local
// health at the worst. An accusation more than maxAccusationLead above the
// member's incarnation is implausible, to it as to every other member (none
// holds it higher), and not refuted; one within it raises the incarnation
// past it, so the incarnation rises by at most 65 per accusation; and
// accusations count against local health once per probe interval.
func TestAttackIncarnationRatchet(t *testing.T) {
	cfg := mtConfig()
	cfg.AwarenessMaxMultiplier = 8
	for _, lead := range []uint64{1 << 32, maxAccusationLead} {
		t.Run(fmt.Sprint(lead), func(t *testing.T) {
			h := newMT(t, cfg)
			h.joinPeers(3, 1)
			for range 40 {
				h.now = h.now.Add(125 * time.Millisecond)
				own := h.m.LocalMember()
				h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtSelf, Incarnation: own.Incarnation + lead, From: mtPeer(1), Life: own.Life})
				h.ready()
			}
			require.LessOrEqual(t, h.m.LocalMember().Incarnation, uint64(40*(maxAccusationLead+1)), "the incarnation ratcheted")
			require.LessOrEqual(t, h.m.Status().HealthScore, 5, "local health held at its worst by one accuser")
		})
	}
}

// TestAttackVersionDowngrade: one alive forged for a member at its held
// incarnation and life, announcing protocol 1, made every member take it
// for a member of an old release (on real sockets it then got no
// broadcast over the trees, and paired heartbeats fell from 272 to 63). A
// member's versions are its own word: within a life, versions other than
// those held are taken only from its own address or under its signature;
// the rest keep the held ones (VersionsRefused). At a higher incarnation
// (a forged refutation) likewise.
func TestAttackVersionDowngrade(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinLivePeers(4)
	held, _ := h.m.Member(mtPeer(1))
	old := wire.Versions{ProtocolMin: 1, ProtocolMax: 1}
	for i, inc := range []uint64{1, 2} {
		a := lifeAlive(1, mtLife(1, 0), mtPeerAddr(1), inc)
		a.Versions = old
		h.feed(mtPeerAddr(2), a) // relayed by another member
		h.ready()
		mb, _ := h.m.Member(mtPeer(1))
		require.Equal(t, held.Versions, mb.Versions, "downgraded by another's word")
		require.Equal(t, uint64(i+1), h.m.Stats().VersionsRefused)
	}
	// From the member's own address: its word.
	a := lifeAlive(1, mtLife(1, 0), mtPeerAddr(1), 3)
	a.Versions = old
	h.feed(mtPeerAddr(1), a)
	h.ready()
	mb, _ := h.m.Member(mtPeer(1))
	require.Equal(t, uint8(1), mb.Versions.ProtocolMax)
}
