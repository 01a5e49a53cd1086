package swim

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// TestPairPositions: every round is a matching in which each position has
// a partner, partnership is mutual, only an odd ring has a member with two
// partners (the one after the odd one out), and in M consecutive rounds
// every pair of positions meets.
func TestPairPositions(t *testing.T) {
	for n := 2; n <= 41; n++ {
		modulus := n
		if n%2 == 0 {
			modulus = n - 1
		}
		met := map[[2]int]int{}
		for r := int64(1000); r < 1000+int64(modulus); r++ {
			twos := 0
			for pos := range n {
				a, b := pairPositions(n, pos, r)
				require.GreaterOrEqual(t, a, 0, "n=%d r=%d: position %d has no partner", n, r, pos)
				require.NotEqual(t, pos, a, "n=%d r=%d: paired with itself", n, r)
				for _, q := range []int{a, b} {
					if q < 0 {
						continue
					}
					qa, qb := pairPositions(n, q, r)
					require.True(t, qa == pos || qb == pos, "n=%d r=%d: %d pairs with %d, not back", n, r, pos, q)
					met[[2]int{min(pos, q), max(pos, q)}]++
				}
				if b >= 0 {
					twos++
					require.NotEqual(t, a, b)
				}
			}
			require.Equal(t, n%2, twos, "n=%d r=%d: members with two partners", n, r)
		}
		for i := range n {
			for j := i + 1; j < n; j++ {
				require.Positive(t, met[[2]int{i, j}], "n=%d: %d and %d never met in %d rounds", n, i, j, modulus)
			}
		}
	}
	a, b := pairPositions(1, 0, 7)
	require.Equal(t, [2]int{-1, -1}, [2]int{a, b}, "alone")
}

// pairedMember is peer i's state as a member that speaks protocol 4.
func pairedMember(i int) wire.MemberState {
	ms := mtMember(i, StateAlive, 1)
	ms.Versions = wire.Versions{ProtocolMin: wire.ProtocolMin, ProtocolMax: wire.ProtocolPaired}
	return ms
}

// pairedMT is a Machine joined to one paired peer (mtPeer(1)): a ring of
// two, so the peer is its partner in every round.
func pairedMT(t *testing.T, extra ...wire.MemberState) (*mt, *memberState) {
	return pairedMTWith(t, mtConfig(), extra...)
}

func pairedMTWith(t *testing.T, cfg *Config, extra ...wire.MemberState) (*mt, *memberState) {
	cfg.AlignedProbing = true
	cfg.PairedProbing = true
	cfg.Detection.AnyTrafficHeartbeat = true // pairing counts any packet
	h := newMT(t, cfg)
	h.join(append([]wire.MemberState{pairedMember(1)}, extra...)...)
	return h, h.m.lookup(mtPeer(1))
}

// warmRounds is how long a test lets a joined Machine run before it pairs:
// its ring must stay unchanged for stableRoundsToPair rounds first, counted
// by the round it is in when the join is done.
const warmRounds = stableRoundsToPair + 2

// driveRounds runs the Machine through rounds [from, to), the peer sending
// its Heartbeat at its phase in each round for which beats says so, and
// returns every packet the Machine sent.
func driveRounds(h *mt, peer *memberState, from, to int64, beats func(r int64) bool) []mtPkt {
	return driveRoundsWaking(h, peer, from, to, beats, nil)
}

// driveRoundsWaking is driveRounds, calling wake with every deadline the
// Machine is woken for.
func driveRoundsWaking(h *mt, peer *memberState, from, to int64, beats func(r int64) bool, wake func(time.Time)) []mtPkt {
	h.t.Helper()
	var sent []mtPkt
	advance := func(until time.Time) {
		for i := 0; ; i++ {
			require.Less(h.t, i, 10000)
			d := h.m.NextDeadline()
			if d.IsZero() || d.After(until) {
				break
			}
			if wake != nil {
				wake(d)
			}
			h.tick(maxTime(d, h.now))
			sent = append(sent, h.ready().Packets...)
		}
		h.now = until
	}
	for r := from; r < to; r++ {
		phase := h.m.roundTime(r, peer)
		advance(phase)
		if beats(r) {
			h.feed(mtPeerAddr(1), &wire.Heartbeat{From: mtPeer(1)})
			sent = append(sent, h.ready().Packets...)
		}
	}
	advance(h.m.roundTime(to, peer))
	return sent
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// kinds counts the messages of each type the packets to addr carry.
func kinds(pkts []mtPkt, addr netip.AddrPort) map[string]int {
	n := map[string]int{}
	for _, p := range pkts {
		if p.To != addr {
			continue
		}
		for _, msg := range p.Msgs {
			n[fmt.Sprintf("%T", msg)]++
		}
	}
	return n
}

// TestPairedProbingOnePacketPerRound: partners that hear each other's
// Heartbeats exchange one packet each per round and nothing else: no ping,
// no ack, every check passed without a probe.
func TestPairedProbingOnePacketPerRound(t *testing.T) {
	h, peer := pairedMT(t)
	r0 := h.m.roundOf(h.now) + warmRounds
	driveRounds(h, peer, r0-warmRounds, r0, func(int64) bool { return true })
	before := h.m.Stats()
	sent := driveRounds(h, peer, r0, r0+20, func(int64) bool { return true })
	got := kinds(sent, mtPeerAddr(1))
	// The view digest of the rounds after the join rides in the
	// Heartbeat's packet (repair.go).
	require.Equal(t, int(h.m.Stats().ViewDigestsSent-before.ViewDigestsSent), got["*wire.ViewDigest"])
	delete(got, "*wire.ViewDigest")
	require.Equal(t, map[string]int{"*wire.Heartbeat": 20}, got)
	require.Len(t, sent, 20, "one packet per round")
	for _, p := range sent {
		r := h.m.roundOf(p.At)
		require.Equal(t, h.m.roundTime(r, h.m.self), p.At, "a Heartbeat goes out at the sender's own phase")
	}
	st := h.m.Stats()
	require.Equal(t, uint64(20), st.PairChecks-before.PairChecks)
	require.Zero(t, st.Probes-before.Probes)
	require.Zero(t, st.PairFallbacks-before.PairFallbacks)
}

// TestPairedProbingWakesOnceARound: a partner heard from passes its check
// without the check's timer waking the member, so that a paired member's
// own timers wake it once a round, for its Heartbeat; the partner's
// Heartbeat is the other wake-up. A member always woken for the check
// wakes twice.
func TestPairedProbingWakesOnceARound(t *testing.T) {
	h, peer := pairedMT(t)
	r0 := h.m.roundOf(h.now) + warmRounds
	driveRounds(h, peer, r0-warmRounds, r0, func(int64) bool { return true })
	before := h.m.Stats()
	wakes := map[time.Time]bool{}
	driveRoundsWaking(h, peer, r0, r0+20, func(int64) bool { return true }, func(d time.Time) { wakes[d] = true })
	for r := r0; r < r0+20; r++ {
		require.False(t, wakes[h.m.checkDue(r, peer)], "round %d: woken for the check of a partner heard from", r-r0)
	}
	require.Len(t, wakes, 20, "wake-ups in 20 rounds")
	require.Equal(t, uint64(20), h.m.Stats().PairChecks-before.PairChecks, "checks passed")
	require.Zero(t, h.m.Stats().PairFallbacks-before.PairFallbacks)
}

// TestPairedProbingSilentPartner: a partner whose Heartbeat does not come is
// pinged half a ProbeTimeout after its phase and suspected at its phase
// plus ProbeInterval: when aligned probing, which pings at the phase, would
// suspect it too. Pairing saves packets, never detection time.
func TestPairedProbingSilentPartner(t *testing.T) {
	h, peer := pairedMT(t)
	r0 := h.m.roundOf(h.now) + warmRounds
	driveRounds(h, peer, r0-warmRounds, r0, func(int64) bool { return true })
	require.True(t, pairedNow(h))
	phase := h.m.roundTime(r0, peer)
	var firstPing time.Time
	var suspectAt time.Time
	for i := 0; i < 1000 && suspectAt.IsZero(); i++ {
		d := h.m.NextDeadline()
		require.False(t, d.IsZero())
		h.tick(maxTime(d, h.now))
		out := h.ready()
		for _, p := range out.Packets {
			for _, msg := range p.Msgs {
				if _, ok := msg.(*wire.Ping); ok && p.To == mtPeerAddr(1) && firstPing.IsZero() {
					firstPing = p.At
				}
			}
		}
		for _, e := range out.Events {
			if e.Kind == EventSuspect && e.Member.Name == mtPeer(1) {
				suspectAt = h.now
			}
		}
	}
	require.Equal(t, phase.Add(h.cfg.ProbeTimeout/2), firstPing, "the fallback ping")
	require.Equal(t, phase.Add(h.cfg.ProbeInterval), suspectAt, "the suspicion, as under aligned probing")
	require.Equal(t, uint64(1), h.m.Stats().PairFallbacks)
}

// TestPairedProbingDeafMemberFallsSilent: a member that hears from no one
// for two rounds stops sending Heartbeats, so that its partners probe it
// and it is judged as under probing, by whether it answers.
func TestPairedProbingDeafMemberFallsSilent(t *testing.T) {
	cfg := mtConfig()
	cfg.PauseTolerance = time.Minute // the silent peer stays a suspect, and our partner
	h, peer := pairedMTWith(t, cfg)
	r0 := h.m.roundOf(h.now) + warmRounds
	driveRounds(h, peer, r0-warmRounds, r0, func(int64) bool { return true })
	sent := driveRounds(h, peer, r0, r0+6, func(int64) bool { return false })
	require.Positive(t, h.m.Stats().HeartbeatsWithheld)
	beats := kinds(sent, mtPeerAddr(1))["*wire.Heartbeat"]
	require.LessOrEqual(t, beats, deafRounds+1, "Heartbeats sent while hearing no one")
	// Heard again: the Heartbeats resume in the next round.
	sent = driveRounds(h, peer, r0+6, r0+10, func(int64) bool { return true })
	require.GreaterOrEqual(t, kinds(sent, mtPeerAddr(1))["*wire.Heartbeat"], 3)
}

// TestPairedProbingMixedCluster: while one live member speaks a protocol
// before Heartbeats, every member probes as aligned probing does (pings,
// no Heartbeats), and pairs again once that member is gone.
func TestPairedProbingMixedCluster(t *testing.T) {
	old := mtMember(2, StateAlive, 1)
	old.Versions = wire.Versions{ProtocolMin: 1, ProtocolMax: 3}
	cfg := mtConfig()
	cfg.PauseTolerance = time.Minute // the silent old member stays live
	h, peer := pairedMTWith(t, cfg, old)
	r0 := h.m.roundOf(h.now) + 1
	sent := driveRounds(h, peer, r0, r0+8, func(int64) bool { return true })
	require.False(t, pairedNow(h))
	require.Zero(t, kinds(sent, mtPeerAddr(1))["*wire.Heartbeat"]+kinds(sent, mtPeerAddr(2))["*wire.Heartbeat"])
	require.Positive(t, kinds(sent, mtPeerAddr(1))["*wire.Ping"]+kinds(sent, mtPeerAddr(2))["*wire.Ping"])

	// The old member upgrades: it announces protocol 4 at a new
	// incarnation.
	up := mtAlive(2, 2)
	up.Versions = wire.Versions{ProtocolMin: 1, ProtocolMax: wire.ProtocolPaired}
	h.feed(mtPeerAddr(2), up)
	h.ready()
	driveRounds(h, peer, r0+8, r0+8+warmRounds, func(int64) bool { return true })
	require.True(t, pairedNow(h))
}

// TestPairedProbingProbesWhileTheRingChanges: a member whose ring changed
// probes from that moment through the round stableRoundsToPair after it,
// sends no Heartbeats in the rounds between, and in that last round pairs
// as well: a boot or a wave of failures, when rings disagree, costs no
// Heartbeats sent to members that do not expect them, and members that
// learn of the change at different moments leave no round unchecked.
func TestPairedProbingProbesWhileTheRingChanges(t *testing.T) {
	cfg := mtConfig()
	cfg.PauseTolerance = time.Minute // the new, silent member stays live
	h, peer := pairedMTWith(t, cfg)
	r0 := h.m.roundOf(h.now) + warmRounds
	driveRounds(h, peer, r0-warmRounds, r0, func(int64) bool { return true })
	require.True(t, pairedNow(h))
	h.feed(mtPeerAddr(1), pairedAlive(2))
	h.ready()
	c := h.m.roundOf(h.now)
	sent := driveRounds(h, peer, c, c+stableRoundsToPair+2, func(int64) bool { return true })
	beats, pings := map[int64]int{}, map[int64]int{}
	for _, p := range sent {
		for _, msg := range p.Msgs {
			switch msg.(type) {
			case *wire.Heartbeat:
				beats[h.m.roundOf(p.At)]++
			case *wire.Ping:
				pings[h.m.roundOf(p.At)]++
			}
		}
	}
	for r := c + 1; r < c+stableRoundsToPair; r++ {
		require.Zero(t, beats[r], "round %d after the change: a Heartbeat", r-c)
		require.Positive(t, pings[r], "round %d after the change: no probe", r-c)
	}
	last := c + stableRoundsToPair
	require.Positive(t, beats[last], "the first paired round after the change: no Heartbeat")
	require.Positive(t, pings[last], "the first paired round after the change: no probe")
	require.True(t, h.m.pairingIn(last) && h.m.probingIn(last))
	require.Positive(t, beats[last+1], "paired again once the ring is stable")
	require.True(t, pairedNow(h) && !h.m.probingIn(h.m.roundOf(h.now)), "paired, not probing, once the ring is stable")
}

// pairedAlive is peer i's alive at incarnation 1, announcing protocol 4.
func pairedAlive(i int) *wire.Alive {
	a := mtAlive(i, 1)
	a.Versions = wire.Versions{ProtocolMin: wire.ProtocolMin, ProtocolMax: wire.ProtocolPaired}
	return a
}

// pairedNow reports whether the Machine's present round is a paired one.
func pairedNow(h *mt) bool { return h.m.pairingIn(h.m.roundOf(h.now)) }
