package sim

import (
	"time"

	"github.com/swim-go/swim"
)

// viewer is the part of *swim.Machine that ViewsAgree reads.
type viewer interface {
	LocalMember() swim.Member
	NumMembers() int
	Member(name string) (swim.Member, bool)
	Status() swim.Status
}

var _ viewer = (*swim.Machine)(nil)

// agreeCache remembers, per node index, the member-table version at which
// the node was last found to see exactly the current membership alive, and
// which membership that was (a hash of the members and their generations).
// A node whose table has not changed since is not checked again.
type agreeCache struct {
	version []uint64
	set     []uint64
	parts   []int32
}

// ViewsAgree reports whether the membership views agree: every member (a
// node that is up and, in its own view, alive: not left) sees every other
// member alive, and nobody else as alive or suspect. A node that is not a
// *swim.Machine (or does not offer its view the same way) makes it false.
//
// The check is cheap enough to run often on a large cluster: it first
// compares each member's NumMembers with the number of members, O(N), and
// checks a member's whole view, O(N), only if its table changed since the
// check last found it right.
func (c *Cluster) ViewsAgree() bool {
	a := &c.agree
	a.parts = a.parts[:0]
	h := uint64(14695981039346656037)
	for _, n := range c.nodes {
		if !n.up {
			continue
		}
		v, ok := n.node.(viewer)
		if !ok {
			return false
		}
		if v.LocalMember().State != swim.StateAlive {
			continue
		}
		a.parts = append(a.parts, n.index)
		h = (h ^ uint64(n.index)) * 1099511628211
		h = (h ^ uint64(n.gen)) * 1099511628211
	}
	for _, i := range a.parts {
		if c.nodes[i].node.(viewer).NumMembers() != len(a.parts) {
			return false
		}
	}
	for len(a.version) < len(c.nodes) {
		a.version = append(a.version, 0)
		a.set = append(a.set, 0)
	}
	for _, i := range a.parts {
		v := c.nodes[i].node.(viewer)
		ver := v.Status().Version
		if a.version[i] == ver && a.set[i] == h && ver != 0 {
			continue
		}
		for _, j := range a.parts {
			if j == i {
				continue
			}
			got, ok := v.Member(c.nodes[j].name)
			if !ok || got.State != swim.StateAlive {
				return false
			}
		}
		a.version[i], a.set[i] = ver, h
	}
	return true
}

// RunUntilAgree runs until ViewsAgree, for at most max, and returns how
// long that took and whether the views agree. Set Options.CheckInterval (or
// SetCheckInterval) to check less often on a large cluster.
func (c *Cluster) RunUntilAgree(max time.Duration) (time.Duration, bool) {
	start := c.now
	ok := c.RunUntil(c.ViewsAgree, max)
	return time.Duration(c.now - start), ok
}

// SetCheckInterval changes Options.CheckInterval: RunUntil evaluates its
// condition at most once per d of virtual time (zero: after every batch of
// simultaneous events).
func (c *Cluster) SetCheckInterval(d time.Duration) { c.opts.CheckInterval = max(d, 0) }
