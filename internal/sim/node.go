package sim

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/swim-go/swim"
)

// SimNode is a stable handle on one simulated node; it survives crashes and
// restarts, while the Node behind it is replaced.
type SimNode struct {
	name  string
	addr  netip.AddrPort
	index int32
	node  Node // nil while down

	up bool
	// gen increases at every crash. Timers, stream replies and resumes carry
	// the generation they were created in and are ignored after it changed.
	gen uint32
	// The one timer that counts: the earliest one armed since the last fired.
	timerSet bool
	timerAt  int64

	paused      bool
	pausedUntil int64
	queued      []event // inputs that arrived during the pause, in order
	// held: a starvation stall (faults.go) holds back the node's inputs,
	// which wait in queued as in a pause, while its timers run on.
	held bool

	// starvation (faults.go): the node reads its inputs only starveActive
	// of every starvePeriod until starveUntil; starveFrom is when the
	// current period began; starveID tells stale events apart.
	starveID     uint64
	starveActive int64
	starvePeriod int64
	starveFrom   int64
	starveUntil  int64

	// burst (loss.go): the bursty loss at the node's interface when
	// burstOwn, else the network's nodeBurst; burstBad is its chain's
	// state once burstSeen. It outlives crashes.
	burst                         burstModel
	burstOwn, burstSeen, burstBad bool

	// slow (faults.go): an extra delay on every packet and stream to or
	// from the node, drawn from slowBy; it outlives crashes.
	slow   bool
	slowBy latencyModel

	restarts int
	counters NodeCounters
}

// Name is the node's name.
func (n *SimNode) Name() string { return n.name }

// Addr is the node's address.
func (n *SimNode) Addr() netip.AddrPort { return n.addr }

// Index is the node's position in Cluster.Nodes.
func (n *SimNode) Index() int { return int(n.index) }

// Node is the current Node, nil while crashed. Calling its input methods
// directly bypasses the simulator; use Cluster.Do for that.
func (n *SimNode) Node() Node { return n.node }

// Machine is the current Node as a *swim.Machine, nil if it is down or not a
// Machine.
func (n *SimNode) Machine() *swim.Machine {
	m, _ := n.node.(*swim.Machine)
	return m
}

// Up reports whether the node is running (paused counts as running).
func (n *SimNode) Up() bool { return n.up }

// Paused reports whether the node is in a Pause.
func (n *SimNode) Paused() bool { return n.paused }

// Restarts counts the node's restarts.
func (n *SimNode) Restarts() int { return n.restarts }

// Counters are the node's packet counts.
func (n *SimNode) Counters() NodeCounters { return n.counters }

// Crash stops the named node at once: its timers, queued inputs, pending
// streams and the packets arriving for it while it is down are discarded.
// Packets it already sent still arrive. Crashing a down node does nothing.
func (c *Cluster) Crash(name string) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	c.crash(n)
	return nil
}

func (c *Cluster) crash(n *SimNode) {
	if !n.up {
		return
	}
	for _, m := range c.metrics {
		m.crashing(n)
	}
	c.up--
	n.up = false
	n.gen++
	n.node = nil
	n.timerSet = false
	n.paused = false
	n.held = false
	n.starveUntil = 0
	// Inputs waiting out a pause die with the node: packets count as
	// dropped, and the node's own streams are resolved for good.
	for i := range n.queued {
		switch ev := &n.queued[i]; ev.kind {
		case evPacket:
			c.counters.DroppedDown++
		case evStreamResponse, evStreamTimeout:
			delete(c.streams, ev.id)
		}
	}
	n.queued = nil
}

// Restart replaces the named node with a fresh one from the NodeFactory, at
// the same name and address, crashing it first if it is up. Packets that
// arrive after the restart reach the new node.
func (c *Cluster) Restart(name string) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	c.crash(n)
	node, err := c.opts.NodeFactory(name, n.addr, c.nodeRand(), c.nowTime)
	if err != nil {
		return fmt.Errorf("sim: restart node %q: %w", name, err)
	}
	n.node = node
	n.up = true
	n.restarts++
	c.started(n)
	c.drain(n)
	return nil
}

// Pause freezes the named node for d, as a long GC pause or a stopped VM
// would: inputs arriving meanwhile wait, in order, and its timers fire late;
// all are processed when the pause ends. Pausing a paused node extends the
// pause if d ends later.
func (c *Cluster) Pause(name string, d time.Duration) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	if !n.up {
		return fmt.Errorf("%w: %q", ErrNodeDown, name)
	}
	c.pause(n, d)
	return nil
}

// pause freezes n for d from now, or extends its pause to that; it reports
// whether the pause now ends later than before.
func (c *Cluster) pause(n *SimNode, d time.Duration) bool {
	until := c.now + int64(d)
	if d <= 0 || (n.paused && n.pausedUntil >= until) {
		return false
	}
	n.paused = true
	n.pausedUntil = until
	c.q.push(event{at: until, kind: evResume, node: n.index, gen: n.gen})
	return true
}
