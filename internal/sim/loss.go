package sim

import (
	"fmt"
	"math/rand/v2"
)

// GilbertElliott is a bursty loss model: a two-state Markov chain (Gilbert
// 1960, Elliott 1963) that takes one step per packet: the packet is lost
// with the loss probability of the current state, then the chain moves
// good -> bad with probability GoodToBad, or bad -> good with probability
// BadToGood. Losses therefore come in bursts of 1/BadToGood packets on
// average, at an average rate of MeanLoss. A chain starts in a state drawn
// from its stationary distribution, so the rate holds from the first
// packet.
//
// The Cluster applies it at two scopes, which add up (with uniform loss):
//
//   - per link (SetBurstyLoss, SetLinkBurstyLoss): each directed link has
//     its own chain, stepped by the packets it carries. As SWIM's probes
//     and their retries take different links, per-link bursts hurt it
//     little more than uniform loss of the same mean. The state of every
//     link that carried a packet takes a map entry (about 20 bytes).
//   - per node (SetAllNodesBurstyLoss, SetNodeBurstyLoss): each member's
//     network interface has one chain, stepped by every packet it sends or
//     is sent, as when a host's NIC or kernel drops everything for a
//     moment. A burst then hits a direct probe and its indirect probes
//     together.
//
// The zero value loses nothing. All probabilities are clamped to [0, 1].
type GilbertElliott struct {
	GoodToBad, BadToGood float64 // per-packet transition probabilities
	LossGood, LossBad    float64 // loss probability in each state
}

// BurstyLoss is the simple Gilbert model with the given average loss rate
// and mean burst length in packets (at least 1): nothing is lost in the good
// state, everything in the bad one, and a bad spell lasts burst packets on
// average. BurstyLoss(0.05, 4) loses 5% of packets, four in a row on
// average.
func BurstyLoss(mean, burst float64) GilbertElliott {
	mean = clampProbability(mean)
	if mean == 0 {
		return GilbertElliott{}
	}
	if mean >= 1 {
		return GilbertElliott{GoodToBad: 1, LossBad: 1}
	}
	burst = max(burst, 1)
	bg := 1 / burst
	// Stationary share of bad: gb/(gb+bg) = mean.
	gb := min(mean*bg/(1-mean), 1)
	return GilbertElliott{GoodToBad: gb, BadToGood: bg, LossBad: 1}
}

// BadShare is the long-run fraction of packets sent in the bad state.
func (g GilbertElliott) BadShare() float64 {
	g = g.clamped()
	switch {
	case g.GoodToBad == 0:
		return 0
	case g.BadToGood == 0:
		return 1 // absorbed by the bad state
	}
	return g.GoodToBad / (g.GoodToBad + g.BadToGood)
}

// MeanLoss is the long-run fraction of packets lost.
func (g GilbertElliott) MeanLoss() float64 {
	g = g.clamped()
	b := g.BadShare()
	return (1-b)*g.LossGood + b*g.LossBad
}

// MeanBurst is the mean length, in packets, of a stay in the bad state
// (+Inf if it is never left).
func (g GilbertElliott) MeanBurst() float64 {
	return 1 / g.clamped().BadToGood
}

// IsZero reports whether the model never loses a packet.
func (g GilbertElliott) IsZero() bool {
	g = g.clamped()
	return g.LossGood == 0 && (g.LossBad == 0 || g.GoodToBad == 0)
}

func (g GilbertElliott) String() string {
	return fmt.Sprintf("gilbert-elliott(good->bad %.4g, bad->good %.4g, loss %.4g/%.4g: mean %.4g, bursts of %.3g)",
		g.GoodToBad, g.BadToGood, g.LossGood, g.LossBad, g.MeanLoss(), g.MeanBurst())
}

func (g GilbertElliott) clamped() GilbertElliott {
	return GilbertElliott{
		GoodToBad: clampProbability(g.GoodToBad),
		BadToGood: clampProbability(g.BadToGood),
		LossGood:  clampProbability(g.LossGood),
		LossBad:   clampProbability(g.LossBad),
	}
}

// burstModel is a clamped GilbertElliott as the network keeps it; on is
// false for a model that never loses anything, which then costs nothing
// and draws no random numbers.
type burstModel struct {
	GilbertElliott
	on bool
}

func (g GilbertElliott) model() burstModel {
	g = g.clamped()
	return burstModel{GilbertElliott: g, on: !g.IsZero()}
}

// step takes one step of a chain in state *bad: it decides the packet's
// loss in the current state, then moves the chain. A chain not seen before
// starts in a state drawn from the stationary distribution, so that links
// that carry few packets lose as many as busy ones.
func (b *burstModel) step(rng *rand.Rand, bad *bool, seen bool) bool {
	if !seen {
		*bad = chance(rng, b.BadShare())
	}
	if *bad {
		lost := chance(rng, b.LossBad)
		if chance(rng, b.BadToGood) {
			*bad = false
		}
		return lost
	}
	lost := chance(rng, b.LossGood)
	if chance(rng, b.GoodToBad) {
		*bad = true
	}
	return lost
}

// chance draws against probability p, without a draw when p is 0 or 1.
func chance(rng *rand.Rand, p float64) bool {
	switch {
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	return rng.Float64() < p
}
