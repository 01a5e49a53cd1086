package sim

import (
	"fmt"
	"math/rand/v2"
)

// linkKey names the directed link from one node index to another.
type linkKey uint64

func link(from, to int32) linkKey { return linkKey(uint64(uint32(from))<<32 | uint64(uint32(to))) }

// cut is one partition: nodes on different non-zero sides cannot talk.
// Listed nodes have sides 1..k; an unlisted node (including one added later)
// is on side rest, where 0 means "not part of this cut".
type cut struct {
	sides []int8
	rest  int8
}

func (c *cut) side(i int32) int8 {
	if int(i) < len(c.sides) && c.sides[i] != 0 {
		return c.sides[i]
	}
	return c.rest
}

func (c *cut) separates(a, b int32) bool {
	sa, sb := c.side(a), c.side(b)
	return sa != 0 && sb != 0 && sa != sb
}

// dropCause says why the network dropped a packet.
type dropCause uint8

const (
	dropNone dropCause = iota
	dropLoss
	dropPartition
)

// network holds the fault configuration. Faults apply to packets when they
// are sent: a packet already in flight when a partition starts still
// arrives, as it would on a real wire.
//
// Loss has two layers that both apply: uniform loss (loss, linkLoss) and
// bursty loss (burst, linkBurst), each a default with per-link overrides.
type network struct {
	latency     latencyModel
	loss        float64
	burst       burstModel
	linkLatency map[linkKey]latencyModel
	linkLoss    map[linkKey]float64
	linkBurst   map[linkKey]burstModel
	// chains holds the state of each link's Gilbert-Elliott chain (true:
	// bad), from the first packet the link carried under bursty loss.
	chains map[linkKey]bool
	// nodeBurst is the default bursty loss at every node's interface
	// (SimNode.burst overrides it).
	nodeBurst burstModel
	blocked   map[linkKey]struct{}
	cuts      []cut
}

func newNetwork(latency Latency, loss float64, burst, nodeBurst GilbertElliott) network {
	return network{
		latency:     latency.model(),
		loss:        clampProbability(loss),
		burst:       burst.model(),
		nodeBurst:   nodeBurst.model(),
		linkLatency: make(map[linkKey]latencyModel),
		linkLoss:    make(map[linkKey]float64),
		linkBurst:   make(map[linkKey]burstModel),
		chains:      make(map[linkKey]bool),
		blocked:     make(map[linkKey]struct{}),
	}
}

func clampProbability(p float64) float64 {
	switch {
	case p > 1:
		return 1
	case p > 0:
		return p
	}
	return 0 // also maps NaN to 0
}

// reachable reports whether packets from one node can reach another at all
// (partitions and one-way blocks; loss aside).
func (n *network) reachable(from, to int32) bool {
	if len(n.blocked) > 0 {
		if _, ok := n.blocked[link(from, to)]; ok {
			return false
		}
	}
	for i := range n.cuts {
		if n.cuts[i].separates(from, to) {
			return false
		}
	}
	return true
}

// route decides the fate of one packet: dropped, and why, or delivered
// after the returned delay in nanoseconds. The maps are consulted only when
// they are non-empty, which keeps the common case to a few comparisons.
func (n *network) route(rng *rand.Rand, from, to int32) (int64, dropCause) {
	if !n.reachable(from, to) {
		return 0, dropPartition
	}
	k := link(from, to)
	// The bursty chain steps for every packet the link carries, whatever
	// the uniform layer then decides.
	burst := &n.burst
	if len(n.linkBurst) > 0 {
		if b, ok := n.linkBurst[k]; ok {
			burst = &b
		}
	}
	lost := burst.on && n.burstLost(rng, k, burst)
	loss := n.loss
	if len(n.linkLoss) > 0 {
		if p, ok := n.linkLoss[k]; ok {
			loss = p
		}
	}
	// Draw only when loss is possible so that enabling loss on one link
	// does not shift the random sequence of runs without it elsewhere.
	if lost || (loss > 0 && rng.Float64() < loss) {
		return 0, dropLoss
	}
	return n.delay(rng, k), dropNone
}

// burstLost takes one step of link k's Gilbert-Elliott chain.
func (n *network) burstLost(rng *rand.Rand, k linkKey, b *burstModel) bool {
	bad, seen := n.chains[k]
	lost := b.step(rng, &bad, seen)
	n.chains[k] = bad
	return lost
}

func (n *network) delay(rng *rand.Rand, k linkKey) int64 {
	if len(n.linkLatency) > 0 {
		if l, ok := n.linkLatency[k]; ok {
			return l.sample(rng)
		}
	}
	return n.latency.sample(rng)
}

// SetLatency sets the default latency of every link without an override.
func (c *Cluster) SetLatency(l Latency) { c.net.latency = l.model() }

// SetLinkLatency overrides the latency of the one-way link from -> to.
func (c *Cluster) SetLinkLatency(from, to string, l Latency) error {
	k, err := c.linkOf(from, to)
	if err != nil {
		return err
	}
	c.net.linkLatency[k] = l.model()
	return nil
}

// SetLoss sets the probability, in [0, 1], that a packet on a link without an
// override is lost.
func (c *Cluster) SetLoss(p float64) { c.net.loss = clampProbability(p) }

// SetLinkLoss overrides the loss probability of the one-way link from -> to.
func (c *Cluster) SetLinkLoss(from, to string, p float64) error {
	k, err := c.linkOf(from, to)
	if err != nil {
		return err
	}
	c.net.linkLoss[k] = clampProbability(p)
	return nil
}

// SetBurstyLoss sets the bursty loss of every link without an override of
// its own; it adds to the uniform loss of SetLoss. The zero GilbertElliott
// turns it off. Each link keeps its chain's state across calls.
func (c *Cluster) SetBurstyLoss(g GilbertElliott) { c.net.burst = g.model() }

// SetLinkBurstyLoss overrides the bursty loss of the one-way link from ->
// to; the zero GilbertElliott turns it off on that link.
func (c *Cluster) SetLinkBurstyLoss(from, to string, g GilbertElliott) error {
	k, err := c.linkOf(from, to)
	if err != nil {
		return err
	}
	c.net.linkBurst[k] = g.model()
	return nil
}

// SetAllNodesBurstyLoss sets the bursty loss at the interface of every node
// without an override of its own (see GilbertElliott); it adds to the
// losses of the links. The zero GilbertElliott turns it off.
func (c *Cluster) SetAllNodesBurstyLoss(g GilbertElliott) { c.net.nodeBurst = g.model() }

// SetNodeBurstyLoss overrides the bursty loss at the named node's
// interface: every packet it sends or is sent (a partition aside) steps
// its chain, and is lost if the chain says so. The zero GilbertElliott
// turns it off for the node; ResetNodeBurstyLoss returns it to the
// default. It outlives crashes.
func (c *Cluster) SetNodeBurstyLoss(name string, g GilbertElliott) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	n.burst, n.burstOwn = g.model(), true
	return nil
}

// ResetNodeBurstyLoss removes the named node's own bursty loss: the
// default of SetAllNodesBurstyLoss applies again.
func (c *Cluster) ResetNodeBurstyLoss(name string) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	n.burst, n.burstOwn = burstModel{}, false
	return nil
}

// nodeBurstLost steps the interface chains of both ends of a packet, the
// sender's first, and reports whether either lost it.
func (c *Cluster) nodeBurstLost(from, to *SimNode) bool {
	lost := false
	for _, n := range [2]*SimNode{from, to} {
		b := &c.net.nodeBurst
		if n.burstOwn {
			b = &n.burst
		}
		if b.on {
			lost = b.step(c.rng, &n.burstBad, n.burstSeen) || lost
			n.burstSeen = true
		}
	}
	return lost
}

// ResetLinks removes every per-link latency, loss and bursty loss override.
func (c *Cluster) ResetLinks() {
	clear(c.net.linkLatency)
	clear(c.net.linkLoss)
	clear(c.net.linkBurst)
}

// BlockOneWay drops everything sent from -> to (packets, and streams, which
// need both directions); to -> from is unaffected. Heal or Unblock lifts it.
func (c *Cluster) BlockOneWay(from, to string) error {
	k, err := c.linkOf(from, to)
	if err != nil {
		return err
	}
	c.net.blocked[k] = struct{}{}
	return nil
}

// Unblock lifts a BlockOneWay(from, to).
func (c *Cluster) Unblock(from, to string) error {
	k, err := c.linkOf(from, to)
	if err != nil {
		return err
	}
	delete(c.net.blocked, k)
	return nil
}

// Partition splits the listed groups from each other, both ways. Nodes not
// listed keep talking to every group. Partitions add up: each call is one
// more cut, and Heal removes them all.
func (c *Cluster) Partition(groups ...[]string) error {
	if len(groups) > 127 {
		return fmt.Errorf("sim: partition into %d groups, at most 127", len(groups))
	}
	k := cut{sides: make([]int8, len(c.nodes))}
	for g, names := range groups {
		for _, name := range names {
			n, err := c.lookup(name)
			if err != nil {
				return err
			}
			k.sides[n.index] = int8(g + 1)
		}
	}
	c.net.cuts = append(c.net.cuts, k)
	return nil
}

// Isolate cuts name off from every other node, including nodes added later,
// both ways, until Heal.
func (c *Cluster) Isolate(name string) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	k := cut{sides: make([]int8, len(c.nodes)), rest: 2}
	k.sides[n.index] = 1
	c.net.cuts = append(c.net.cuts, k)
	return nil
}

// Heal removes every partition and one-way block. Loss and latency settings
// stay.
func (c *Cluster) Heal() {
	c.net.cuts = nil
	clear(c.net.blocked)
}

// Reachable reports whether a packet sent now from -> to could arrive (it may
// still be lost). Unknown names are unreachable.
func (c *Cluster) Reachable(from, to string) bool {
	k, err := c.linkOf(from, to)
	if err != nil {
		return false
	}
	return c.net.reachable(int32(uint64(k)>>32), int32(uint32(k)))
}

func (c *Cluster) linkOf(from, to string) (linkKey, error) {
	f, err := c.lookup(from)
	if err != nil {
		return 0, err
	}
	t, err := c.lookup(to)
	if err != nil {
		return 0, err
	}
	return link(f.index, t.index), nil
}
