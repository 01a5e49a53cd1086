// Package sim is a deterministic network simulator for swim.Machine.
//
// A Cluster drives many Nodes (normally *swim.Machine) over a virtual network
// in virtual time: one event queue, one clock, one seeded random source, no
// goroutines and no wall clock. The same seed and the same calls therefore
// give the same run, event for event, which is what makes a failing protocol
// scenario reproducible from the seed it prints (see Cluster.LogSeedOnFailure).
//
// Fault models:
//
//   - Latency (latency.go): a one-way delay distribution per link and as
//     the default: constant, uniform, or lognormal given its median and
//     99th percentile (LognormalLatency).
//   - Loss (loss.go): uniform (SetLoss, SetLinkLoss) and bursty, a
//     Gilbert-Elliott chain per link (SetBurstyLoss, SetLinkBurstyLoss) or
//     at a node's interface (SetAllNodesBurstyLoss, SetNodeBurstyLoss).
//   - Partitions (network.go): group partitions (Partition, Isolate) and
//     one-way blocks (BlockOneWay), until Heal.
//   - Nodes (node.go, faults.go): crash (everything pending for the node is
//     discarded), restart with fresh state at the same name and address,
//     pause (inputs wait and are processed late, as in a GC pause), starve
//     (inputs are read only in short slices while timers run on, as in a
//     process short of CPU; see Cluster.Starve), and slow (every packet to
//     or from the node takes an extra delay; SetSlow).
//   - Churn (churn.go): members join through a random running member and
//     running members crash, at given rates (StartChurn).
//
// Streams (the TCP exchanges of join and push-pull) succeed when the peer is
// up and reachable and time out otherwise; they are immune to loss.
//
// Measurements (metrics.go, agree.go): a Metrics, attached with NewMetrics,
// follows a run without keeping its event log: the detection latency of
// each crash (first suspicion, first death, last survivor to learn), false
// suspicions and deaths per member-hour, the dissemination curve of a
// tracked change (TrackSpread), traffic per member and second, and
// broadcast drops. ViewsAgree and RunUntilAgree tell when the membership
// views agree, e.g. after a partition heals.
package sim

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/swim-go/swim"
)

// Node is what the simulator drives; *swim.Machine implements it. A Node is
// owned by the Cluster: after every input the Cluster drains Ready and
// rearms the Node's timer from NextDeadline.
type Node interface {
	HandlePacket(now time.Time, from netip.AddrPort, data []byte) error
	HandleStream(now time.Time, from netip.AddrPort, req []byte) ([]byte, error)
	HandleStreamResponse(now time.Time, id uint64, resp []byte, err error) error
	Tick(now time.Time)
	NextDeadline() time.Time
	Ready() swim.Ready
}

var _ Node = (*swim.Machine)(nil)

// NodeFactory creates the Node called name, reachable at addr, at virtual
// time now. rng is the Node's own random source, derived from the Cluster's
// seed; the Node must use no other.
type NodeFactory func(name string, addr netip.AddrPort, rng *rand.Rand, now time.Time) (Node, error)

// MachineFactory returns a NodeFactory that creates a *swim.Machine from the
// Config that config returns for each name. The Config's Name is set to the
// node's name; config may return a shared Config, which is copied first.
//
// The Machines a factory makes share one swim.Registry, so each member's
// name, address and metadata are stored once, not once per Machine: that is
// what lets 10,000 members fit in one process. A Registry is not safe for
// concurrent use, so give each Cluster its own factory. opts are passed to
// every Machine (swim.WatchClock, for a scenario that models stalls by late
// ticks).
func MachineFactory(config func(name string) *swim.Config, opts ...swim.MachineOption) NodeFactory {
	reg := swim.NewRegistry()
	return func(name string, addr netip.AddrPort, rng *rand.Rand, now time.Time) (Node, error) {
		cfg := *config(name)
		cfg.Name = name
		return reg.NewMachine(&cfg, addr, rng, now, opts...)
	}
}

// Epoch is the virtual time at which every Cluster starts. A fixed date keeps
// timestamps (and so traces) identical across runs.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// Port is the port of every simulated node; nodes differ by IP address.
const Port = 7946

// Errors returned by Cluster methods.
var (
	ErrUnknownNode   = errors.New("sim: unknown node")
	ErrDuplicateNode = errors.New("sim: duplicate node name")
	ErrNodeDown      = errors.New("sim: node is down")
)

// Errors passed to Node.HandleStreamResponse.
var (
	// ErrStreamTimeout: the peer was down, unreachable or did not answer
	// within the request's Timeout.
	ErrStreamTimeout = errors.New("sim: stream timed out")
	// ErrStreamClosed: the peer's HandleStream failed, so it closed the
	// stream without a reply. The peer's error is wrapped too.
	ErrStreamClosed = errors.New("sim: stream closed by peer")
)

// addrOf gives node index i the address 10.a.b.c:7946 with a.b.c = i+1, so
// addresses are stable, distinct for 16M nodes and readable in traces.
func addrOf(i int) netip.AddrPort {
	n := i + 1
	ip := netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
	return netip.AddrPortFrom(ip, Port)
}

// TB is the part of testing.TB the Cluster uses, so that this package does
// not import testing.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
}
