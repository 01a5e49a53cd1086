package sim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"
	"weak"

	"github.com/swim-go/swim"
)

// Options configure a Cluster.
type Options struct {
	// Seed determines the whole run: latencies, losses and every node's
	// random source derive from it.
	Seed uint64
	// Latency is the default one-way latency of every link. Zero means
	// DefaultLatency; for none at all, call SetLatency(ConstantLatency(0)).
	Latency Latency
	// Loss is the probability, in [0, 1], that any packet is lost.
	Loss float64
	// BurstyLoss is the default bursty loss of every link, on top of
	// Loss (see SetBurstyLoss). The zero value loses nothing.
	BurstyLoss GilbertElliott
	// NodeBurstyLoss is the default bursty loss at every node's interface
	// (see SetAllNodesBurstyLoss).
	NodeBurstyLoss GilbertElliott
	// NodeFactory creates nodes for AddNode and Restart. Required.
	NodeFactory NodeFactory
	// StreamTimeout applies to a StreamRequest whose Timeout is not
	// positive. Zero means 10s.
	StreamTimeout time.Duration
	// CheckInterval makes RunUntil evaluate its condition at most once per
	// this much virtual time, for conditions that are costly on large
	// clusters. Zero checks after every batch of simultaneous events.
	CheckInterval time.Duration
	// DisableLog stops the Cluster from keeping Records (a 10,000-node
	// convergence reports 10^8 joins); OnEvent is still called.
	DisableLog bool
	// OnEvent, if set, is called with every Record as it happens.
	OnEvent func(Record)
	// OnHandleError, if set, is called with every error counted in
	// Counters.HandleErrors, to help debug a scenario.
	OnHandleError func(at time.Time, node string, err error)
	// OnMessage, if set, is called with every application message a node
	// receives (swim.Ready.Messages), and OnOutcome with the fate of every
	// SendReliable and Broadcast a node made (swim.Ready.Outcomes).
	OnMessage func(at time.Time, node string, msg swim.Message)
	OnOutcome func(at time.Time, node string, o swim.Outcome)
	// OnSend, if set, is called with every packet a node sends and every
	// stream request it starts (stream true), before the network decides
	// its fate: what an eavesdropper on the sender's link would capture.
	OnSend func(from, to netip.AddrPort, data []byte, stream bool)
}

// Cluster is a simulated network of Nodes in virtual time. It is not safe
// for concurrent use; a test drives it from one goroutine.
type Cluster struct {
	opts    Options
	rng     *rand.Rand
	q       eventQueue
	now     int64 // virtual nanoseconds since Epoch
	nowTime time.Time
	net     network

	nodes  []*SimNode
	byName map[string]*SimNode

	// streams maps the simulator's id of each unresolved stream to the id
	// its client's Machine gave it. Whichever of reply and timeout is
	// processed first removes the entry; the other is then ignored.
	streams    map[uint64]uint64
	nextStream uint64

	log      Log
	counters Counters
	digest   uint64

	// up counts the nodes that are up; metrics are told of every node
	// start and crash and of every event (metrics.go); churns are the
	// Churn processes, by id (churn.go); agree caches the views that
	// ViewsAgree checked (agree.go).
	up      int
	metrics []*Metrics
	churns  []*Churn
	agree   agreeCache
}

// New returns an empty Cluster at virtual time Epoch. It panics without a
// NodeFactory.
func New(opts Options) *Cluster {
	if opts.NodeFactory == nil {
		panic("sim: Options.NodeFactory is nil")
	}
	if opts.Latency == (Latency{}) {
		opts.Latency = DefaultLatency
	}
	if opts.StreamTimeout <= 0 {
		opts.StreamTimeout = 10 * time.Second
	}
	return &Cluster{
		opts:    opts,
		rng:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		nowTime: Epoch,
		net:     newNetwork(opts.Latency, opts.Loss, opts.BurstyLoss, opts.NodeBurstyLoss),
		byName:  make(map[string]*SimNode),
		streams: make(map[uint64]uint64),
	}
}

// Seed is the seed the Cluster was created with.
func (c *Cluster) Seed() uint64 { return c.opts.Seed }

// String identifies the run for failure messages: seed and virtual time.
func (c *Cluster) String() string {
	return fmt.Sprintf("sim seed=%d at +%v", c.opts.Seed, c.Elapsed())
}

// LogSeedOnFailure makes t log the seed and virtual time if the test fails,
// so the run can be replayed.
func (c *Cluster) LogSeedOnFailure(t TB) {
	t.Helper()
	// The testing package keeps finished cleanups reachable until the
	// parent test ends, so the closure holds the Cluster only weakly: a
	// test running many large clusters one after another must not keep
	// them all alive.
	seed, wc := c.opts.Seed, weak.Make(c)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if c := wc.Value(); c != nil {
			t.Logf("%s: replay with Options.Seed = %d", c, seed)
		} else {
			t.Logf("sim seed=%d: replay with Options.Seed = %d", seed, seed)
		}
	})
}

// Now is the virtual time.
func (c *Cluster) Now() time.Time { return c.nowTime }

// Elapsed is the virtual time since Epoch.
func (c *Cluster) Elapsed() time.Duration { return time.Duration(c.now) }

// Counters returns the network's counters.
func (c *Cluster) Counters() Counters { return c.counters }

// Log returns the Records so far, oldest first. Later events do not change
// the returned Log.
func (c *Cluster) Log() Log { return c.log[:len(c.log):len(c.log)] }

// Digest is a hash of every input the nodes have processed so far (time,
// kind, node, peer, size). Two runs processed the same inputs in the same
// order exactly when their digests match (barring collisions), which checks
// determinism without keeping a trace.
func (c *Cluster) Digest() uint64 { return c.digest }

// Pending is the number of queued events, stale ones included.
func (c *Cluster) Pending() int { return c.q.len() }

// Nodes returns every node in the order they were added. It shares the
// Cluster's array, so it is cheap to call; do not assign to its elements.
func (c *Cluster) Nodes() []*SimNode { return c.nodes[:len(c.nodes):len(c.nodes)] }

// NumUp is the number of nodes that are up (paused ones included).
func (c *Cluster) NumUp() int { return c.up }

// Node returns the named node, or nil.
func (c *Cluster) Node(name string) *SimNode { return c.byName[name] }

// Addr returns the named node's address, or the zero AddrPort.
func (c *Cluster) Addr(name string) netip.AddrPort {
	if n := c.byName[name]; n != nil {
		return n.addr
	}
	return netip.AddrPort{}
}

// NodeByAddr returns the node at addr, or nil.
func (c *Cluster) NodeByAddr(addr netip.AddrPort) *SimNode {
	if i, ok := c.indexOf(addr); ok {
		return c.nodes[i]
	}
	return nil
}

func (c *Cluster) lookup(name string) (*SimNode, error) {
	if n := c.byName[name]; n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownNode, name)
}

// indexOf inverts addrOf without a map lookup: the address encodes the index.
func (c *Cluster) indexOf(addr netip.AddrPort) (int32, bool) {
	ip := addr.Addr()
	if addr.Port() != Port || !ip.Is4() {
		return 0, false
	}
	b := ip.As4()
	i := (int(b[1])<<16 | int(b[2])<<8 | int(b[3])) - 1
	if b[0] != 10 || i < 0 || i >= len(c.nodes) {
		return 0, false
	}
	return int32(i), true
}

// nodeRand derives a node's random source from the Cluster's.
func (c *Cluster) nodeRand() *rand.Rand {
	return rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64()))
}

// AddNode creates a node with the next address and starts it now.
func (c *Cluster) AddNode(name string) (*SimNode, error) {
	if c.byName[name] != nil {
		return nil, fmt.Errorf("%w: %q", ErrDuplicateNode, name)
	}
	idx := len(c.nodes)
	addr := addrOf(idx)
	node, err := c.opts.NodeFactory(name, addr, c.nodeRand(), c.nowTime)
	if err != nil {
		return nil, fmt.Errorf("sim: create node %q: %w", name, err)
	}
	n := &SimNode{name: name, addr: addr, index: int32(idx), node: node, up: true}
	c.nodes = append(c.nodes, n)
	c.byName[name] = n
	c.started(n)
	c.drain(n)
	return n, nil
}

// AddNodes adds count nodes named prefix0, prefix1, ... and returns them.
func (c *Cluster) AddNodes(prefix string, count int) ([]*SimNode, error) {
	out := make([]*SimNode, 0, count)
	for i := range count {
		n, err := c.AddNode(fmt.Sprintf("%s%d", prefix, i))
		if err != nil {
			return out, err
		}
		out = append(out, n)
	}
	return out, nil
}

// Do calls fn with the named node at the current virtual time, then acts on
// the node's outputs as after any input. Use it for API calls such as Join
// and Leave. It works on a paused node too: the test acts as its owner.
func (c *Cluster) Do(name string, fn func(n Node, now time.Time)) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	if !n.up {
		return fmt.Errorf("%w: %q", ErrNodeDown, name)
	}
	fn(n.node, c.nowTime)
	c.drain(n)
	return nil
}

// DoMachine is Do for a node that is a *swim.Machine.
func (c *Cluster) DoMachine(name string, fn func(m *swim.Machine, now time.Time)) error {
	return c.Do(name, func(n Node, now time.Time) {
		m, ok := n.(*swim.Machine)
		if !ok {
			panic(fmt.Sprintf("sim: node %q is a %T, not a *swim.Machine", name, n))
		}
		fn(m, now)
	})
}

// Run processes every event due in the next d of virtual time and leaves
// the clock at Now()+d.
func (c *Cluster) Run(d time.Duration) {
	c.runTo(c.now+int64(d), nil)
}

// RunUntil runs until cond returns true, which it reports, or until max
// has passed. cond is checked first, then after each batch of simultaneous
// events (or per Options.CheckInterval), and once more at the end; the
// clock stays where cond became true. cond runs often: keep it cheap.
func (c *Cluster) RunUntil(cond func() bool, max time.Duration) bool {
	if cond() {
		return true
	}
	if c.runTo(c.now+int64(max), cond) {
		return true
	}
	return cond()
}

// runTo processes events due up to end and reports whether cond (if any)
// became true, in which case the clock stays at that batch's time.
func (c *Cluster) runTo(end int64, cond func() bool) bool {
	end = max(end, c.now) // the clock never goes back
	nextCheck := c.now
	for c.q.len() > 0 && c.q.peekAt() <= end {
		at := c.q.peekAt()
		c.setNow(at)
		for c.q.len() > 0 && c.q.peekAt() == at {
			ev := c.q.pop()
			c.dispatch(&ev)
		}
		if cond != nil && at >= nextCheck {
			if cond() {
				return true
			}
			nextCheck = at + int64(c.opts.CheckInterval)
		}
	}
	c.setNow(end)
	return false
}

func (c *Cluster) setNow(at int64) {
	if at != c.now {
		c.now = at
		c.nowTime = Epoch.Add(time.Duration(at))
	}
}

func (c *Cluster) nanos(t time.Time) int64 { return int64(t.Sub(Epoch)) }

func (c *Cluster) dispatch(ev *event) {
	c.counters.Events++
	if ev.kind == evChurnJoin || ev.kind == evChurnCrash {
		c.churnStep(ev)
		return
	}
	n := c.nodes[ev.node]
	switch ev.kind {
	case evTimer:
		c.fireTimer(n, ev)
	case evResume:
		c.resume(n, ev)
	case evStarveHold:
		c.starveHold(n, ev)
	case evStarveRelease:
		c.starveRelease(n, ev)
	case evPacket:
		if !n.up {
			c.counters.DroppedDown++
			return
		}
		c.input(n, ev)
	case evStreamRequest:
		// A request to a crashed node goes unanswered; the client's
		// timeout resolves the stream.
		if n.up {
			c.input(n, ev)
		}
	case evStreamResponse, evStreamTimeout:
		if !n.up || ev.gen != n.gen {
			delete(c.streams, ev.id) // the client that opened it is gone
			return
		}
		c.input(n, ev)
	}
}

// input hands ev to n now, or queues it until n's pause (or starvation
// stall) ends.
func (c *Cluster) input(n *SimNode, ev *event) {
	if n.paused || n.held {
		n.queued = append(n.queued, *ev)
		return
	}
	switch ev.kind {
	case evPacket:
		c.deliverPacket(n, ev)
	case evStreamRequest:
		c.serveStream(n, ev)
	case evStreamResponse, evStreamTimeout:
		c.resolveStream(n, ev)
	}
}

func (c *Cluster) deliverPacket(n *SimNode, ev *event) {
	size := uint64(len(ev.data))
	c.counters.PacketsDelivered++
	c.counters.BytesDelivered += size
	n.counters.PacketsReceived++
	n.counters.BytesReceived += size
	c.trace(evPacket, n.index, ev.peer, len(ev.data))
	if err := n.node.HandlePacket(c.nowTime, c.nodes[ev.peer].addr, ev.data); err != nil {
		c.handleError(n, err)
	}
	c.drain(n)
}

func (c *Cluster) serveStream(n *SimNode, ev *event) {
	c.trace(evStreamRequest, n.index, ev.peer, len(ev.data))
	resp, err := n.node.HandleStream(c.nowTime, c.nodes[ev.peer].addr, ev.data)
	if err != nil {
		c.handleError(n, err)
		resp, err = nil, fmt.Errorf("%w: %w", ErrStreamClosed, err)
	}
	c.drain(n)
	// A reply that cannot get back is as good as none: the client times out.
	if !c.net.reachable(n.index, ev.peer) {
		return
	}
	c.q.push(event{
		at:   c.now + c.linkDelay(n.index, ev.peer),
		kind: evStreamResponse,
		node: ev.peer,
		gen:  ev.peerGen,
		id:   ev.id,
		data: resp,
		err:  err,
	})
}

func (c *Cluster) resolveStream(n *SimNode, ev *event) {
	id, ok := c.streams[ev.id]
	if !ok {
		return // the other outcome came first
	}
	delete(c.streams, ev.id)
	err := ev.err
	if ev.kind == evStreamTimeout {
		err = ErrStreamTimeout
		c.counters.StreamTimeouts++
	}
	if err != nil {
		c.counters.StreamsFailed++
	} else {
		c.counters.StreamsSucceeded++
	}
	c.trace(ev.kind, n.index, ev.peer, len(ev.data))
	herr := n.node.HandleStreamResponse(c.nowTime, id, ev.data, err)
	if herr != nil && err == nil {
		c.handleError(n, herr)
	}
	c.drain(n)
}

func (c *Cluster) fireTimer(n *SimNode, ev *event) {
	if !n.up || ev.gen != n.gen || !n.timerSet || ev.at != n.timerAt {
		return // superseded by an earlier timer, or from before a crash
	}
	n.timerSet = false
	if n.paused {
		return // resume rearms it, late
	}
	// The deadline may have moved later since this timer was armed; then
	// there is nothing to do but rearm.
	if dl := n.node.NextDeadline(); !dl.IsZero() && c.nanos(dl) <= c.now {
		c.trace(evTimer, n.index, n.index, 0)
		n.node.Tick(c.nowTime)
	}
	c.drain(n)
}

func (c *Cluster) resume(n *SimNode, ev *event) {
	if !n.up || ev.gen != n.gen || !n.paused || ev.at != n.pausedUntil {
		return // crashed meanwhile, or the pause was extended
	}
	n.paused = false
	gen := n.gen
	c.flush(n)
	if n.up && n.gen == gen {
		c.armTimer(n)
	}
}

// flush hands n the inputs that waited for its pause (or starvation stall)
// to end, in order. A callback that crashes the node ends it; one that
// pauses it again leaves the rest waiting, in order.
func (c *Cluster) flush(n *SimNode) {
	queued := n.queued
	n.queued = nil
	gen := n.gen
	for i := range queued {
		if !n.up || n.gen != gen {
			return
		}
		if n.paused || n.held {
			n.queued = append(queued[i:], n.queued...)
			return
		}
		c.input(n, &queued[i])
	}
}

// drain acts on n's outputs: packets go on the network, streams start,
// events are recorded, and the timer is rearmed.
func (c *Cluster) drain(n *SimNode) {
	if !n.up {
		return
	}
	r := n.node.Ready()
	for i := range r.Packets {
		c.sendPacket(n, r.Packets[i].To, r.Packets[i].Data)
	}
	for i := range r.Streams {
		c.startStream(n, &r.Streams[i])
	}
	for _, e := range r.Events {
		c.record(n, e)
	}
	if c.opts.OnMessage != nil {
		for _, msg := range r.Messages {
			c.opts.OnMessage(c.nowTime, n.name, msg)
		}
	}
	if c.opts.OnOutcome != nil {
		for _, o := range r.Outcomes {
			c.opts.OnOutcome(c.nowTime, n.name, o)
		}
	}
	c.armTimer(n)
}

// armTimer schedules n's timer at NextDeadline unless an earlier one is
// already scheduled; a later deadline is found when that one fires.
func (c *Cluster) armTimer(n *SimNode) {
	if !n.up || n.paused {
		return
	}
	dl := n.node.NextDeadline()
	if dl.IsZero() {
		return
	}
	at := max(c.nanos(dl), c.now)
	if n.timerSet && n.timerAt <= at {
		return
	}
	n.timerSet = true
	n.timerAt = at
	c.q.push(event{at: at, kind: evTimer, node: n.index, gen: n.gen})
}

func (c *Cluster) sendPacket(n *SimNode, to netip.AddrPort, data []byte) {
	if c.opts.OnSend != nil {
		c.opts.OnSend(n.addr, to, data, false)
	}
	size := uint64(len(data))
	c.counters.PacketsSent++
	c.counters.BytesSent += size
	n.counters.PacketsSent++
	n.counters.BytesSent += size
	dst, ok := c.indexOf(to)
	if !ok {
		c.counters.DroppedUnknown++
		return
	}
	delay, cause := c.net.route(c.rng, n.index, dst)
	if cause != dropPartition && c.nodeBurstLost(n, c.nodes[dst]) {
		cause = dropLoss
	}
	switch cause {
	case dropLoss:
		c.counters.DroppedLoss++
		return
	case dropPartition:
		c.counters.DroppedPartition++
		return
	}
	c.q.push(event{at: c.now + delay + c.slowDelay(n.index, dst), kind: evPacket, node: dst, peer: n.index, data: data})
}

// startStream models a TCP exchange: it needs both directions open when it
// starts and when the reply is sent, is immune to packet loss (TCP
// retransmits), and otherwise ends at its timeout.
func (c *Cluster) startStream(n *SimNode, req *swim.StreamRequest) {
	if c.opts.OnSend != nil {
		c.opts.OnSend(n.addr, req.To, req.Data, true)
	}
	c.counters.StreamsStarted++
	sid := c.nextStream
	c.nextStream++
	c.streams[sid] = req.ID
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = c.opts.StreamTimeout
	}
	c.q.push(event{at: c.now + int64(timeout), kind: evStreamTimeout, node: n.index, gen: n.gen, id: sid})
	dst, ok := c.indexOf(req.To)
	if !ok || !c.net.reachable(n.index, dst) || !c.net.reachable(dst, n.index) {
		return
	}
	c.q.push(event{
		at:      c.now + c.linkDelay(n.index, dst),
		kind:    evStreamRequest,
		node:    dst,
		peer:    n.index,
		peerGen: n.gen,
		id:      sid,
		data:    req.Data,
	})
}

func (c *Cluster) record(n *SimNode, e swim.Event) {
	r := Record{At: c.nowTime, Observer: n.name, Event: e}
	if !c.opts.DisableLog {
		c.log = append(c.log, r)
	}
	if c.opts.OnEvent != nil {
		c.opts.OnEvent(r)
	}
	for _, m := range c.metrics {
		m.event(n, &r)
	}
}

func (c *Cluster) handleError(n *SimNode, err error) {
	c.counters.HandleErrors++
	if c.opts.OnHandleError != nil {
		c.opts.OnHandleError(c.nowTime, n.name, err)
	}
}

// trace folds one processed input into the digest (FNV-1a over words).
func (c *Cluster) trace(kind eventKind, node, peer int32, size int) {
	const prime = 1099511628211
	h := c.digest
	if h == 0 {
		h = 14695981039346656037
	}
	for _, w := range [...]uint64{uint64(c.now), uint64(kind), uint64(uint32(node)), uint64(uint32(peer)), uint64(size)} {
		h = (h ^ w) * prime
	}
	c.digest = h
}
