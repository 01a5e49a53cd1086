package sim

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

func TestAddressesEncodeTheIndex(t *testing.T) {
	c := New(Options{NodeFactory: func(string, netip.AddrPort, *rand.Rand, time.Time) (Node, error) { return nil, nil }})
	for _, i := range []int{0, 1, 254, 255, 256, 65535, 70000, 1<<24 - 2} {
		addr := addrOf(i)
		require.Equal(t, uint16(Port), addr.Port())
		c.nodes = make([]*SimNode, i+1)
		got, ok := c.indexOf(addr)
		require.True(t, ok, "%v", addr)
		require.Equal(t, int32(i), got)
	}
	require.Equal(t, "10.0.0.1:7946", addrOf(0).String())
	require.Equal(t, "10.0.1.0:7946", addrOf(255).String())

	c.nodes = make([]*SimNode, 3)
	for _, s := range []string{"10.0.0.4:7946", "10.0.0.0:7946", "10.0.0.1:7947", "11.0.0.1:7946", "[::1]:7946"} {
		_, ok := c.indexOf(netip.MustParseAddrPort(s))
		require.False(t, ok, s)
	}
}

func TestConstantLatency(t *testing.T) {
	h := newHarness(t, Options{Seed: 1, Latency: ConstantLatency(5 * time.Millisecond)})
	h.add("a", "b")
	h.send("a", "b", 1)
	h.Run(time.Second)

	pings := h.fake("b").gotKind(kindPing)
	require.Len(t, pings, 1)
	require.Equal(t, at(5*time.Millisecond), pings[0].at)
	require.Equal(t, h.Addr("a"), pings[0].from)
	acks := h.fake("a").gotKind(kindAck)
	require.Len(t, acks, 1)
	require.Equal(t, at(10*time.Millisecond), acks[0].at)
}

func TestUniformLatencyStaysInRangeAndAveragesOut(t *testing.T) {
	h := newHarness(t, Options{Seed: 2, Latency: UniformLatency(time.Millisecond, 9*time.Millisecond)})
	h.add("a", "b")
	h.send("a", "b", 4000)
	h.Run(time.Second)

	pings := h.fake("b").gotKind(kindPing)
	require.Len(t, pings, 4000)
	var sum, lo, hi time.Duration = 0, time.Hour, 0
	for _, p := range pings {
		d := p.at.Sub(p.sent)
		require.GreaterOrEqual(t, d, time.Millisecond)
		require.LessOrEqual(t, d, 9*time.Millisecond)
		sum += d
		lo, hi = min(lo, d), max(hi, d)
	}
	mean := sum / time.Duration(len(pings))
	require.InDelta(t, float64(5*time.Millisecond), float64(mean), float64(200*time.Microsecond))
	require.Less(t, lo, 1100*time.Microsecond, "the range is covered")
	require.Greater(t, hi, 8900*time.Microsecond, "the range is covered")
}

func TestLinkLatencyOverridesOneDirection(t *testing.T) {
	h := newHarness(t, Options{Seed: 3, Latency: ConstantLatency(time.Millisecond)})
	h.add("a", "b", "c")
	require.NoError(t, h.SetLinkLatency("a", "b", ConstantLatency(50*time.Millisecond)))
	h.send("a", "b", 1)
	h.send("a", "c", 1)
	h.Run(time.Second)

	require.Equal(t, at(50*time.Millisecond), h.fake("b").got[0].at, "a->b overridden")
	require.Equal(t, at(time.Millisecond), h.fake("c").got[0].at, "a->c default")
	var ackFromB, ackFromC received
	for _, r := range h.fake("a").got {
		if r.from == h.Addr("b") {
			ackFromB = r
		} else {
			ackFromC = r
		}
	}
	require.Equal(t, at(51*time.Millisecond), ackFromB.at, "b->a keeps the default")
	require.Equal(t, at(2*time.Millisecond), ackFromC.at)

	h.SetLatency(ConstantLatency(7 * time.Millisecond))
	h.ResetLinks()
	start := h.Now()
	h.send("a", "b", 1)
	h.Run(time.Second)
	require.Equal(t, start.Add(7*time.Millisecond), h.fake("b").got[1].at)

	require.ErrorIs(t, h.SetLinkLatency("a", "nobody", Latency{}), ErrUnknownNode)
}

func TestLossDropsTheConfiguredFraction(t *testing.T) {
	h := newHarness(t, Options{Seed: 4, Loss: 0.3})
	h.add("a", "b")
	h.send("a", "b", 10000)
	h.Run(time.Second)

	got := len(h.fake("b").gotKind(kindPing))
	require.InDelta(t, 7000, got, 250, "about 70%% of pings arrive")
	acks := len(h.fake("a").gotKind(kindAck))
	require.InDelta(t, 0.7*float64(got), acks, 250, "about 70%% of acks arrive")

	cs := h.Counters()
	require.Equal(t, uint64(10000+got), cs.PacketsSent)
	require.Equal(t, uint64(got+acks), cs.PacketsDelivered)
	require.Equal(t, cs.PacketsSent-cs.PacketsDelivered, cs.DroppedLoss)
	require.Equal(t, cs.DroppedLoss, cs.Dropped())
	require.Equal(t, cs.PacketsDelivered*13, cs.BytesDelivered)
	require.Equal(t, uint64(10000), h.Node("a").Counters().PacketsSent)
	require.Equal(t, uint64(got), h.Node("b").Counters().PacketsReceived)
}

func TestLinkLossOverridesOneDirection(t *testing.T) {
	h := newHarness(t, Options{Seed: 5, Loss: 0})
	h.add("a", "b", "c")
	require.NoError(t, h.SetLinkLoss("a", "b", 1))
	h.send("a", "b", 100)
	h.send("c", "b", 100)
	h.send("b", "a", 100)
	h.Run(time.Second)

	for _, r := range h.fake("b").got {
		require.NotEqual(t, h.Addr("a"), r.from, "a->b loses everything")
	}
	require.Equal(t, 100, len(h.fake("b").got), "c's pings; a's pings and acks are lost")
	require.Equal(t, 100, len(h.fake("a").gotKind(kindPing)), "b->a keeps no loss")
	require.Equal(t, uint64(200), h.Counters().DroppedLoss)
}

// deliveredFrom counts the pings name received from from.
func (h *harness) deliveredFrom(name, from string) int {
	n := 0
	for _, r := range h.fake(name).gotKind(kindPing) {
		if r.from == h.Addr(from) {
			n++
		}
	}
	return n
}

// sendAll makes every ordered pair of names exchange one ping and runs.
func (h *harness) sendAll(names ...string) {
	for _, from := range names {
		for _, to := range names {
			if from != to {
				h.send(from, to, 1)
			}
		}
	}
	h.Run(time.Second)
}

func TestPartitionDropsBothWaysBetweenGroupsOnly(t *testing.T) {
	h := newHarness(t, Options{Seed: 6})
	h.add("a", "b", "c", "d")
	require.NoError(t, h.Partition([]string{"a", "b"}, []string{"c"}))
	h.sendAll("a", "b", "c", "d")

	require.Equal(t, 1, h.deliveredFrom("b", "a"), "same group")
	require.Zero(t, h.deliveredFrom("c", "a"))
	require.Zero(t, h.deliveredFrom("a", "c"))
	require.Zero(t, h.deliveredFrom("c", "b"))
	require.Zero(t, h.deliveredFrom("b", "c"))
	for _, n := range []string{"a", "b", "c"} {
		require.Equal(t, 1, h.deliveredFrom("d", n), "d is in no group")
		require.Equal(t, 1, h.deliveredFrom(n, "d"), "d is in no group")
	}
	require.Equal(t, uint64(4), h.Counters().DroppedPartition)
	require.False(t, h.Reachable("a", "c"))
	require.False(t, h.Reachable("c", "a"))
	require.True(t, h.Reachable("a", "d"))

	h.Heal()
	require.True(t, h.Reachable("a", "c"))
	h.sendAll("a", "c")
	require.Equal(t, 1, h.deliveredFrom("c", "a"))
	require.Equal(t, 1, h.deliveredFrom("a", "c"))
	require.ErrorIs(t, h.Partition([]string{"a"}, []string{"zz"}), ErrUnknownNode)
}

func TestPartitionsAddUp(t *testing.T) {
	h := newHarness(t, Options{Seed: 7})
	h.add("a", "b", "c")
	require.NoError(t, h.Partition([]string{"a"}, []string{"b"}))
	require.NoError(t, h.Partition([]string{"b"}, []string{"c"}))
	require.False(t, h.Reachable("a", "b"))
	require.False(t, h.Reachable("c", "b"))
	require.True(t, h.Reachable("a", "c"))
	h.Heal()
	require.True(t, h.Reachable("a", "b"))
	require.True(t, h.Reachable("b", "c"))
}

func TestIsolateCutsOffEveryoneIncludingLaterNodes(t *testing.T) {
	h := newHarness(t, Options{Seed: 8})
	h.add("a", "b", "c")
	require.NoError(t, h.Isolate("a"))
	h.add("d")
	h.sendAll("a", "b", "c", "d")
	for _, n := range []string{"b", "c", "d"} {
		require.Zero(t, h.deliveredFrom(n, "a"))
		require.Zero(t, h.deliveredFrom("a", n))
	}
	require.Equal(t, 1, h.deliveredFrom("b", "d"))
	require.Equal(t, 1, h.deliveredFrom("d", "c"))
	h.Heal()
	require.True(t, h.Reachable("a", "d"))
}

func TestBlockOneWayDropsOnlyThatDirection(t *testing.T) {
	h := newHarness(t, Options{Seed: 9})
	h.add("a", "b")
	require.NoError(t, h.BlockOneWay("a", "b"))
	h.send("a", "b", 1)
	h.send("b", "a", 1)
	h.Run(time.Second)

	require.Empty(t, h.fake("b").got, "a->b blocked: b gets neither a's ping nor the ack of its own")
	require.Len(t, h.fake("a").gotKind(kindPing), 1, "b->a open")
	require.Equal(t, uint64(2), h.Counters().DroppedPartition, "a's ping and a's ack")
	require.False(t, h.Reachable("a", "b"))
	require.True(t, h.Reachable("b", "a"))

	require.NoError(t, h.Unblock("a", "b"))
	require.True(t, h.Reachable("a", "b"))
	require.NoError(t, h.BlockOneWay("a", "b"))
	h.Heal()
	require.True(t, h.Reachable("a", "b"), "Heal lifts one-way blocks")
}

func TestFaultsApplyAtSendTime(t *testing.T) {
	h := newHarness(t, Options{Seed: 10, Latency: ConstantLatency(10 * time.Millisecond)})
	h.add("a", "b")
	h.send("a", "b", 1)
	h.Run(5 * time.Millisecond)
	require.NoError(t, h.Partition([]string{"a"}, []string{"b"}))
	h.Run(time.Second)
	require.Len(t, h.fake("b").got, 1, "the ping was on the wire before the partition")
	require.Empty(t, h.fake("a").got, "the ack was sent after it")
}

func TestUnknownDestinationIsDropped(t *testing.T) {
	h := newHarness(t, Options{Seed: 11})
	h.add("a")
	h.do("a", func(f *fake, now time.Time) {
		f.ping(now, netip.MustParseAddrPort("10.0.0.99:7946"))
		f.ping(now, netip.MustParseAddrPort("10.0.0.1:1"))
	})
	h.Run(time.Second)
	require.Equal(t, uint64(2), h.Counters().DroppedUnknown)
	require.Equal(t, h.Counters().PacketsSent, h.Counters().Dropped())
}

func TestSetLossTakesEffectForLaterPackets(t *testing.T) {
	h := newHarness(t, Options{Seed: 12})
	h.add("a", "b")
	h.SetLoss(1)
	h.send("a", "b", 100)
	h.SetLoss(0)
	h.send("a", "b", 100)
	h.Run(time.Second)
	require.Len(t, h.fake("b").got, 100)
	require.Equal(t, uint64(100), h.Counters().DroppedLoss)
	h.SetLoss(-3)
	require.Zero(t, h.net.loss)
	h.SetLoss(7)
	require.Equal(t, 1.0, h.net.loss)
}

func TestMalformedPacketCountsAHandleError(t *testing.T) {
	var errs []error
	h := newHarness(t, Options{Seed: 13, OnHandleError: func(_ time.Time, _ string, err error) { errs = append(errs, err) }})
	h.add("a", "b")
	h.do("a", func(f *fake, _ time.Time) {
		f.out.Packets = append(f.out.Packets, swim.Packet{To: h.Addr("b"), Data: []byte("bad")})
	})
	h.Run(time.Second)
	require.Equal(t, uint64(1), h.Counters().HandleErrors)
	require.Equal(t, uint64(1), h.Counters().PacketsDelivered, "delivered, then rejected by the node")
	require.Len(t, errs, 1)
}
