package sim

import (
	"fmt"
	"time"
)

// Starve makes the named node slow, for d from now, as a process starved of
// CPU is: it reads its inputs (packets, stream requests and replies) only
// during active of every period, while its timers fire on time and what it
// sends leaves at once. This is the slow message processing of Lifeguard
// §IV-A: the starved member's probe timers expire while the acks wait
// unread, so it accuses healthy peers, and it answers their probes late.
//
// In each period the node reads for one slice of length active, placed at a
// random point of the period, so the stalls between slices vary from 0 to
// 2·(period-active), as a scheduler starving a process hands it its share
// at irregular times. Inputs that arrive during a stall wait, in order, as
// in a Pause. (A regular pattern would lock onto the protocol period and let
// every ack in just before its deadline.) The slices are drawn from the
// Cluster's random source, so a run stays reproducible from its seed, and
// starvation costs two events per period.
//
// Starvation ends after d, when the node crashes or restarts, or when
// Starve is called again for the node, which first ends the current one
// and its stall (d <= 0, or active >= period, just ends it).
func (c *Cluster) Starve(name string, active, period, d time.Duration) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	if !n.up {
		return fmt.Errorf("%w: %q", ErrNodeDown, name)
	}
	n.starveID++
	n.starveUntil = 0
	if n.held {
		n.held = false
		c.flush(n)
		if !n.up {
			return nil
		}
	}
	if d <= 0 || period <= 0 || active >= period {
		return nil
	}
	n.starveActive, n.starvePeriod = max(int64(active), 0), int64(period)
	n.starveFrom = c.now
	n.starveUntil = c.now + int64(d)
	c.holdUntilSlice(n)
	return nil
}

// Starving reports whether the named node is under a Starve now.
func (c *Cluster) Starving(name string) bool {
	n := c.byName[name]
	return n != nil && n.up && c.now < n.starveUntil
}

// holdUntilSlice stalls n's inputs from now until its slice of the period
// that began at starveFrom, drawn at random, or until the starvation ends.
func (c *Cluster) holdUntilSlice(n *SimNode) {
	slice := min(n.starveFrom+c.rng.Int64N(n.starvePeriod-n.starveActive+1), n.starveUntil)
	if slice <= c.now {
		c.q.push(event{at: c.now + n.starveActive, kind: evStarveHold, node: n.index, gen: n.gen, id: n.starveID})
		return
	}
	n.held = true
	c.q.push(event{at: slice, kind: evStarveRelease, node: n.index, gen: n.gen, id: n.starveID})
}

// starveHold runs at the end of a starved node's slice: the next stall
// starts.
func (c *Cluster) starveHold(n *SimNode, ev *event) {
	if !n.up || ev.gen != n.gen || ev.id != n.starveID || c.now >= n.starveUntil {
		return
	}
	n.starveFrom += n.starvePeriod
	c.holdUntilSlice(n)
}

// starveRelease runs when a starved node's slice begins: the inputs that
// waited are processed, and the end of the slice is scheduled.
func (c *Cluster) starveRelease(n *SimNode, ev *event) {
	if !n.up || ev.gen != n.gen || ev.id != n.starveID || !n.held {
		return
	}
	n.held = false
	c.flush(n)
	if !n.up || n.gen != ev.gen || n.starveID != ev.id {
		return
	}
	if end := c.now + n.starveActive; end < n.starveUntil {
		c.q.push(event{at: end, kind: evStarveHold, node: n.index, gen: n.gen, id: n.starveID})
	} else {
		n.starveUntil = c.now // this slice runs on: the starvation is over
	}
}

// SetSlow makes every packet and stream message to or from the named node
// arrive late by an extra delay drawn from extra, on top of the link's
// latency, as for a member on an overloaded host or a saturated NIC: a
// packet between two slow nodes is delayed twice. Unlike Starve, the node
// itself runs normally and packets from one sender may overtake each other
// when extra varies. A zero Latency ends it. Slowness belongs to the host:
// it outlives crashes and restarts.
func (c *Cluster) SetSlow(name string, extra Latency) error {
	n, err := c.lookup(name)
	if err != nil {
		return err
	}
	n.slowBy = extra.model()
	n.slow = !n.slowBy.isZero()
	return nil
}

// Slow reports whether the named node is slowed by SetSlow.
func (c *Cluster) Slow(name string) bool {
	n := c.byName[name]
	return n != nil && n.slow
}

// slowDelay is the extra delay, in nanoseconds, of a packet from -> to for
// slow ends; it draws nothing when neither end is slow.
func (c *Cluster) slowDelay(from, to int32) int64 {
	var d int64
	if f := c.nodes[from]; f.slow {
		d += f.slowBy.sample(c.rng)
	}
	if t := c.nodes[to]; t.slow {
		d += t.slowBy.sample(c.rng)
	}
	return d
}

// linkDelay is the delay of a stream message from -> to: the link's
// latency and the slowness of its ends.
func (c *Cluster) linkDelay(from, to int32) int64 {
	return c.net.delay(c.rng, link(from, to)) + c.slowDelay(from, to)
}
