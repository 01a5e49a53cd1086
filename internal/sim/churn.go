package sim

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/swim-go/swim"
)

// ChurnOptions configure a Churn process.
type ChurnOptions struct {
	// JoinsPerMinute and CrashesPerMinute are the mean rates, in virtual
	// time, at which the process adds a new member and crashes a running
	// one. Either may be zero.
	JoinsPerMinute, CrashesPerMinute float64
	// Regular spaces the joins (and the crashes) evenly, 1/rate apart
	// from the start; otherwise they form Poisson processes (exponential
	// gaps drawn from the Cluster's random source).
	Regular bool
	// Duration ends the process that long after it starts; zero runs it
	// until Stop.
	Duration time.Duration
	// Prefix names the new members: Prefix0, Prefix1, ... skipping names
	// already taken. Empty means "churn".
	Prefix string
	// Protect lists members never to crash (seeds, or members a test
	// watches).
	Protect []string
	// MinUp keeps at least this many nodes up: a crash that would leave
	// fewer is skipped. Zero means 1.
	MinUp int
	// Join makes a new member join the cluster through the running member
	// at via (the zero AddrPort when none is up). It runs as Cluster.Do
	// does. Nil means: if the node is a *swim.Machine, Join(now, via).
	Join func(n Node, now time.Time, via netip.AddrPort)
}

// Churn adds and crashes members at random, at given rates, as the events of
// the Cluster's own queue, so Run and RunUntil drive it. Every choice (when,
// who crashes, which running member a newcomer joins through) comes from the
// Cluster's random source, so a run with churn replays from its seed.
//
// A new member joins through a running member chosen uniformly at random
// (not paused, when one can be found). A crash picks a running member
// uniformly at random among those not protected. Crashed members stay down;
// restarting them is up to the caller.
type Churn struct {
	c       *Cluster
	id      uint64
	opts    ChurnOptions
	end     int64 // 0: no end
	protect map[int32]bool
	next    int // suffix of the next new member's name
	stopped bool

	joined, crashed []string
	skipped         int
}

// StartChurn starts a Churn process now. It returns an error for a
// negative rate or an unknown protected name.
func (c *Cluster) StartChurn(opts ChurnOptions) (*Churn, error) {
	if opts.JoinsPerMinute < 0 || opts.CrashesPerMinute < 0 {
		return nil, fmt.Errorf("sim: negative churn rate (%v joins, %v crashes per minute)", opts.JoinsPerMinute, opts.CrashesPerMinute)
	}
	if opts.Prefix == "" {
		opts.Prefix = "churn"
	}
	if opts.MinUp <= 0 {
		opts.MinUp = 1
	}
	ch := &Churn{c: c, id: uint64(len(c.churns)), opts: opts, protect: make(map[int32]bool)}
	for _, name := range opts.Protect {
		n, err := c.lookup(name)
		if err != nil {
			return nil, err
		}
		ch.protect[n.index] = true
	}
	if opts.Duration > 0 {
		ch.end = c.now + int64(opts.Duration)
	}
	c.churns = append(c.churns, ch)
	ch.schedule(evChurnJoin, c.now)
	ch.schedule(evChurnCrash, c.now)
	return ch, nil
}

// Stop ends the process; nothing more joins or crashes.
func (ch *Churn) Stop() { ch.stopped = true }

// Joined returns the names of the members the process added, in order.
func (ch *Churn) Joined() []string { return ch.joined[:len(ch.joined):len(ch.joined)] }

// Crashed returns the names of the members the process crashed, in order.
func (ch *Churn) Crashed() []string { return ch.crashed[:len(ch.crashed):len(ch.crashed)] }

// Skipped counts the crashes skipped because of MinUp or because every
// running member was protected.
func (ch *Churn) Skipped() int { return ch.skipped }

// schedule queues the next join or crash after from, if the rate allows
// one before the end.
func (ch *Churn) schedule(kind eventKind, from int64) {
	rate := ch.opts.JoinsPerMinute
	if kind == evChurnCrash {
		rate = ch.opts.CrashesPerMinute
	}
	if ch.stopped || rate <= 0 {
		return
	}
	mean := float64(time.Minute) / rate
	gap := mean
	if !ch.opts.Regular {
		gap = ch.c.rng.ExpFloat64() * mean
	}
	at := from + max(int64(gap), 1)
	if ch.end > 0 && at > ch.end {
		return
	}
	ch.c.q.push(event{at: at, kind: kind, id: ch.id})
}

func (c *Cluster) churnStep(ev *event) {
	ch := c.churns[ev.id]
	if ch.stopped {
		return
	}
	if ev.kind == evChurnJoin {
		ch.join()
	} else {
		ch.crash()
	}
	ch.schedule(ev.kind, c.now)
}

func (ch *Churn) join() {
	c := ch.c
	var via netip.AddrPort
	if n := ch.pick(func(n *SimNode) bool { return !n.paused }); n != nil {
		via = n.addr
	} else if n := ch.pick(nil); n != nil {
		via = n.addr
	}
	name := fmt.Sprintf("%s%d", ch.opts.Prefix, ch.next)
	for ch.next++; c.byName[name] != nil; ch.next++ {
		name = fmt.Sprintf("%s%d", ch.opts.Prefix, ch.next)
	}
	n, err := c.AddNode(name)
	if err != nil {
		return // the factory refused: nothing joined
	}
	ch.joined = append(ch.joined, name)
	join := ch.opts.Join
	if join == nil {
		join = joinMachine
	}
	join(n.node, c.nowTime, via)
	c.drain(n)
}

func joinMachine(n Node, now time.Time, via netip.AddrPort) {
	if m, ok := n.(*swim.Machine); ok && via.IsValid() {
		m.Join(now, []netip.AddrPort{via})
	}
}

func (ch *Churn) crash() {
	c := ch.c
	if c.up <= ch.opts.MinUp {
		ch.skipped++
		return
	}
	n := ch.pick(func(n *SimNode) bool { return !ch.protect[n.index] })
	if n == nil {
		ch.skipped++
		return
	}
	ch.crashed = append(ch.crashed, n.name)
	c.crash(n)
}

// pick returns a node that is up and passes ok (nil: any), uniformly at
// random, or nil if there is none. It tries random indexes first, which is
// O(1) while most nodes qualify, then falls back to a scan.
func (ch *Churn) pick(ok func(*SimNode) bool) *SimNode {
	c := ch.c
	if len(c.nodes) == 0 {
		return nil
	}
	fits := func(n *SimNode) bool { return n.up && (ok == nil || ok(n)) }
	for range 32 {
		if n := c.nodes[c.rng.IntN(len(c.nodes))]; fits(n) {
			return n
		}
	}
	var cands []*SimNode
	for _, n := range c.nodes {
		if fits(n) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[c.rng.IntN(len(cands))]
}
