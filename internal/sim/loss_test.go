package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// quiet stops the fakes from tracing what they see, which is costly for
// tests that send many thousands of packets.
func (h *harness) quiet() {
	for _, all := range h.fakes {
		for _, f := range all {
			f.trace = nil
		}
	}
}

// lossRuns sends count pings from a to b at once and returns the fraction
// lost and the mean length of the runs of consecutive losses.
func lossRuns(t *testing.T, h *harness, from, to string, count int) (loss, burst float64) {
	t.Helper()
	base := h.fake(from).seq
	before := len(h.fake(to).gotKind(kindPing))
	h.send(from, to, count)
	h.Run(time.Second)
	arrived := make(map[uint32]bool)
	for _, p := range h.fake(to).gotKind(kindPing)[before:] {
		arrived[p.seq] = true
	}
	lost, runs, inRun := 0, 0, false
	for i := 1; i <= count; i++ {
		if arrived[base+uint32(i)] {
			inRun = false
			continue
		}
		lost++
		if !inRun {
			runs++
			inRun = true
		}
	}
	if runs == 0 {
		return 0, 0
	}
	return float64(lost) / float64(count), float64(lost) / float64(runs)
}

func TestBurstyLossModel(t *testing.T) {
	g := BurstyLoss(0.05, 4)
	require.InDelta(t, 0.05, g.MeanLoss(), 1e-12)
	require.InDelta(t, 4, g.MeanBurst(), 1e-12)
	require.InDelta(t, 0.05, g.BadShare(), 1e-12)
	require.False(t, g.IsZero())
	require.True(t, GilbertElliott{}.IsZero())
	require.True(t, BurstyLoss(0, 4).IsZero())
	require.Equal(t, 1.0, BurstyLoss(1, 4).MeanLoss())
	ge := GilbertElliott{GoodToBad: 0.1, BadToGood: 0.3, LossGood: 0.01, LossBad: 0.5}
	require.InDelta(t, 0.75*0.01+0.25*0.5, ge.MeanLoss(), 1e-12)
	require.Contains(t, ge.String(), "mean 0.1325")
}

// runStats returns the fraction of trues and the mean length of their runs.
func runStats(lost []bool) (rate, run float64) {
	n, runs := 0, 0
	for i, l := range lost {
		if l {
			n++
			if i == 0 || !lost[i-1] {
				runs++
			}
		}
	}
	if runs == 0 {
		return 0, 0
	}
	return float64(n) / float64(len(lost)), float64(n) / float64(runs)
}

// The chains themselves, without the event queue: the mean and the burst
// length hold on a busy link, and the mean holds on links that carry a few
// packets each (chains start in their stationary state).
func TestBurstyLossStatistics(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	n := newNetwork(ConstantLatency(0), 0, BurstyLoss(0.05, 4), GilbertElliott{})
	lost := make([]bool, 400_000)
	for i := range lost {
		_, cause := n.route(rng, 0, 1)
		lost[i] = cause == dropLoss
	}
	rate, run := runStats(lost)
	t.Logf("busy link: %.4f lost in runs of %.2f", rate, run)
	require.InDelta(t, 0.05, rate, 0.003)
	require.InDelta(t, 4, run, 0.2)

	sparse := 0
	for i := range int32(40_000) {
		for range 5 {
			if _, cause := n.route(rng, 2+i, 1); cause == dropLoss {
				sparse++
			}
		}
	}
	t.Logf("40,000 links of 5 packets: %.4f lost", float64(sparse)/200_000)
	require.InDelta(t, 0.05, float64(sparse)/200_000, 0.003)

	ge := GilbertElliott{GoodToBad: 0.02, BadToGood: 0.2, LossGood: 0.01, LossBad: 0.6}
	n = newNetwork(ConstantLatency(0), 0.1, ge, GilbertElliott{})
	for i := range lost {
		_, cause := n.route(rng, 0, 1)
		lost[i] = cause == dropLoss
	}
	rate, _ = runStats(lost)
	require.InDelta(t, 1-(1-ge.MeanLoss())*0.9, rate, 0.004, "uniform and bursty loss add up")
}

// Through the Cluster: a link's own bursty loss applies to that link only,
// and the default to every link, each with its own chain.
func TestBurstyLossOnLinks(t *testing.T) {
	h := newHarness(t, Options{Seed: 6, Latency: ConstantLatency(time.Millisecond)})
	h.add("a", "b", "c")
	h.quiet()
	require.NoError(t, h.SetLinkBurstyLoss("a", "b", BurstyLoss(0.2, 4)))
	loss, burst := lossRuns(t, h, "a", "b", 10_000)
	t.Logf("a->b: %.4f lost, in runs of %.2f", loss, burst)
	require.InDelta(t, 0.2, loss, 0.04)
	require.InDelta(t, 4, burst, 0.8)
	// The other links, and the way back, lose nothing.
	loss, _ = lossRuns(t, h, "a", "c", 2_000)
	require.Zero(t, loss)
	require.Len(t, h.fake("a").gotKind(kindAck), len(h.fake("b").got)+len(h.fake("c").got))
	require.Equal(t, h.Counters().PacketsSent-h.Counters().PacketsDelivered, h.Counters().DroppedLoss)

	h.ResetLinks()
	loss, _ = lossRuns(t, h, "a", "b", 2_000)
	require.Zero(t, loss)
	h.SetBurstyLoss(BurstyLoss(0.2, 4))
	lb, _ := lossRuns(t, h, "a", "b", 10_000)
	lc, _ := lossRuns(t, h, "a", "c", 10_000)
	t.Logf("default: a->b %.4f, a->c %.4f", lb, lc)
	require.InDelta(t, 0.2, lb, 0.04)
	require.InDelta(t, 0.2, lc, 0.04)
	require.NoError(t, h.SetLinkBurstyLoss("a", "b", GilbertElliott{}))
	loss, _ = lossRuns(t, h, "a", "b", 2_000)
	require.Zero(t, loss, "a link's own setting (off) wins")

	require.ErrorIs(t, h.SetLinkBurstyLoss("a", "nobody", BurstyLoss(0.1, 2)), ErrUnknownNode)
}

// A bursty model that never loses draws no random numbers: a run with it
// replays exactly as one without.
func TestLosslessBurstyModelDrawsNothing(t *testing.T) {
	run := func(g GilbertElliott) []string {
		h := newHarness(t, Options{Seed: 9, Loss: 0.2, Latency: UniformLatency(time.Millisecond, 5*time.Millisecond), BurstyLoss: g})
		h.add("a", "b")
		h.send("a", "b", 1000)
		h.Run(time.Second)
		return h.trace
	}
	require.Equal(t, run(GilbertElliott{}), run(GilbertElliott{GoodToBad: 0.5, BadToGood: 0.5}))
	require.NotEqual(t, run(GilbertElliott{}), run(BurstyLoss(0.01, 2)))
}

// Bursty loss at a node's interface hits every packet to and from it,
// whatever the link: a burst drops the packets of different senders
// together. The chains alone first, then through the Cluster.
func TestNodeBurstyLossCorrelatesItsLinks(t *testing.T) {
	h := newHarness(t, Options{Seed: 8, Latency: ConstantLatency(time.Millisecond)})
	h.add("a", "b", "c")
	h.quiet()
	require.NoError(t, h.SetNodeBurstyLoss("b", BurstyLoss(0.1, 5)))
	a, b, c := h.Node("a"), h.Node("b"), h.Node("c")
	const rounds = 100_000
	lostA, lostBoth := 0, 0
	for range rounds {
		la := h.nodeBurstLost(a, b)
		lc := h.nodeBurstLost(c, b)
		if la {
			lostA++
			if lc {
				lostBoth++
			}
		}
	}
	// Each pair of packets is two steps of b's chain.
	pLost := float64(lostA) / rounds
	pBoth := float64(lostBoth) / float64(lostA)
	t.Logf("a->b lost %.4f; c's packet lost with a's: %.2f", pLost, pBoth)
	require.InDelta(t, 0.1, pLost, 0.008)
	require.InDelta(t, 0.8, pBoth, 0.02, "a burst hits both senders")

	// Through the Cluster, both ways.
	loss, _ := lossRuns(t, h, "a", "b", 5_000)
	require.InDelta(t, 0.1, loss, 0.03)
	acks := len(h.fake("a").gotKind(kindAck))
	require.InDelta(t, 0.9, float64(acks)/float64(len(h.fake("b").got)), 0.03, "the way out too")

	// Off for that node, and the default for all.
	require.NoError(t, h.SetNodeBurstyLoss("b", GilbertElliott{}))
	loss, _ = lossRuns(t, h, "a", "b", 2_000)
	require.Zero(t, loss)
	h.SetAllNodesBurstyLoss(BurstyLoss(0.2, 3))
	require.NoError(t, h.SetNodeBurstyLoss("a", GilbertElliott{}))
	loss, _ = lossRuns(t, h, "a", "b", 2_000)
	require.Zero(t, loss, "the nodes' own settings (off) win")
	require.NoError(t, h.ResetNodeBurstyLoss("b"))
	loss, _ = lossRuns(t, h, "a", "b", 5_000)
	require.InDelta(t, 0.2, loss, 0.04, "the default at b")
	require.NoError(t, h.ResetNodeBurstyLoss("a"))
	loss, _ = lossRuns(t, h, "a", "b", 5_000)
	require.InDelta(t, 1-0.8*0.8, loss, 0.05, "the default at both ends")
	require.ErrorIs(t, h.SetNodeBurstyLoss("nobody", BurstyLoss(0.1, 2)), ErrUnknownNode)
	require.ErrorIs(t, h.ResetNodeBurstyLoss("nobody"), ErrUnknownNode)
}
