package sim

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/wire"
)

// Converge hands every up Machine the whole membership at once, as a join
// through a seed that already knew everyone would, without simulating the
// join storm that gets there: afterwards each Machine sees every other up
// Machine alive. The joins' events are dropped (a 10,000-member cluster
// would report 10⁸ of them); the two early push-pulls that follow a join
// still happen, as the protocol runs them. It is how a large scenario
// starts from a running cluster; cold boots are scenarios of their own.
func (c *Cluster) Converge() error {
	var up []*SimNode
	state := &wire.PushPull{From: "sim"}
	for _, n := range c.nodes {
		if !n.up {
			continue
		}
		m, ok := n.node.(*swim.Machine)
		if !ok {
			return fmt.Errorf("sim: Converge: node %q is a %T, not a *swim.Machine", n.name, n.node)
		}
		self := m.LocalMember()
		state.Members = append(state.Members, wire.MemberState{
			Name: self.Name, Addr: wire.EncodeAddr(self.Addr), Incarnation: self.Incarnation, Meta: self.Meta,
			// What its alive announces: without it the others would
			// take it for a member of protocol 1 until they hear from
			// it, and not pair.
			Versions: wire.Versions(self.Versions),
		})
		up = append(up, n)
	}
	if len(up) < 2 {
		return nil
	}
	data, err := wire.AppendPacket(nil, state)
	if err != nil {
		return fmt.Errorf("sim: Converge: %w", err)
	}
	for i, n := range up {
		seed := up[(i+1)%len(up)].addr
		var mergeErr error
		err := c.DoMachine(n.name, func(m *swim.Machine, now time.Time) {
			ids := m.Join(now, []netip.AddrPort{seed})
			m.Ready() // the seed is not asked: its answer is data
			if len(ids) != 1 {
				mergeErr = errors.New("join started no exchange")
				return
			}
			mergeErr = m.HandleStreamResponse(now, ids[0], data, nil)
			m.Ready()
		})
		if err == nil {
			err = mergeErr
		}
		if err != nil {
			return fmt.Errorf("sim: Converge: %s: %w", n.name, err)
		}
	}
	return nil
}
