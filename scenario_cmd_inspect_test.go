package swim

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Scenario commands that print a Machine's state: members, member,
// stats, health and gossip; and settle, which empties its broadcast queue
// the way gossip reads it.

// cmdMembers: members NODE prints NODE's table, one member a line.
func (w *scenWorld) cmdMembers(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	for _, m := range n.m.allMembers() {
		w.printf("%s", w.fmtMember(m))
	}
	return nil
}

// cmdMember: member NODE NAME... prints NODE's view of each name.
func (w *scenWorld) cmdMember(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	for _, name := range a.words {
		if m, ok := n.m.Member(name); ok {
			w.printf("%s", w.fmtMember(m))
		} else {
			w.printf("%s unknown", name)
		}
	}
	a.words = nil
	return nil
}

// cmdStats: stats NODE Field... prints the named counters of Stats.
func (w *scenWorld) cmdStats(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	st := reflect.ValueOf(n.m.Stats())
	var parts []string
	for _, f := range a.words {
		v := namedField(st, f)
		if !v.IsValid() {
			return fmt.Errorf("no Stats field %s", f)
		}
		parts = append(parts, fmt.Sprintf("%s=%v", f, v.Interface()))
	}
	a.words = nil
	w.printf("%s", strings.Join(parts, " "))
	return nil
}

// namedField is the field of the struct st (Stats, Config) named f: a
// field of st, a dotted path into its groups ("Trees.Redundant"), or the
// one field of that name in a group, so that the scripts read the same
// however the struct groups its fields. The zero Value when there is none
// or more than one.
func namedField(st reflect.Value, f string) reflect.Value {
	if path := strings.Split(f, "."); len(path) > 1 {
		v := st
		for _, p := range path {
			if v.Kind() != reflect.Struct {
				return reflect.Value{}
			}
			if v = v.FieldByName(p); !v.IsValid() {
				return v
			}
		}
		return v
	}
	if v := st.FieldByName(f); v.IsValid() {
		return v
	}
	var found reflect.Value
	for i := range st.NumField() {
		if g := st.Field(i); g.Kind() == reflect.Struct {
			if v := namedField(g, f); v.IsValid() {
				if found.IsValid() {
					return reflect.Value{}
				}
				found = v
			}
		}
	}
	return found
}

// cmdHealth: health NODE prints the local health score.
func (w *scenWorld) cmdHealth(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	w.printf("health %d", n.m.Status().HealthScore)
	return nil
}

// gossipOf prints NODE's pending outputs, then has a member it knows
// (the first live one by name, else the first dead or left one) ping it,
// and returns the deltas riding on the ack: what NODE has queued for
// gossip, as the next packet carries it.
func (w *scenWorld) gossipOf(n *scenNode) ([]wire.Message, error) {
	w.collect(n)
	var asker netip.AddrPort
	for _, live := range []bool{true, false} {
		for _, mem := range n.m.allMembers() {
			isLive := mem.State == StateAlive || mem.State == StateSuspect
			if mem.Name != n.name && isLive == live && !asker.IsValid() {
				asker = mem.Addr
			}
		}
	}
	if !asker.IsValid() {
		return nil, fmt.Errorf("%s knows nobody to ask for its gossip", n.name)
	}
	const seq = 0xfeed
	data, err := encodeMsgs([]wire.Message{&wire.Ping{Seq: seq, Target: n.name, From: "asker"}})
	if err != nil {
		return nil, err
	}
	if err := n.m.HandlePacket(w.now, asker, data); err != nil {
		return nil, err
	}
	r := n.m.Ready()
	var found [][]wire.Message
	for _, p := range r.Packets {
		if p.To == asker {
			msgs, err := wire.DecodePacket(p.Data)
			if err != nil {
				return nil, err
			}
			found = append(found, msgs)
		}
	}
	if len(found) != 1 || len(found[0]) == 0 || !reflect.DeepEqual(found[0][0], &wire.Ack{Seq: seq}) {
		return nil, fmt.Errorf("%s answered a ping with %d packets, not one ack", n.name, len(found))
	}
	return found[0][1:], nil
}

// cmdGossip: gossip NODE prints the deltas NODE's next packet carries
// (each is sent once more by it).
func (w *scenWorld) cmdGossip(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	deltas, err := w.gossipOf(n)
	if err != nil {
		return err
	}
	if len(deltas) == 0 {
		w.printf("no gossip")
	}
	for _, d := range deltas {
		w.printf("gossip %s", w.fmtMsg(d, false))
	}
	return nil
}

// cmdSettle: settle NODE empties NODE's broadcast queue, printing nothing.
func (w *scenWorld) cmdSettle(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	for range 10000 {
		deltas, err := w.gossipOf(n)
		if err != nil {
			return err
		}
		if len(deltas) == 0 {
			return nil
		}
	}
	return errors.New("the broadcast queue never drains")
}

// TestNamedField: a counter is found at the top, by a dotted path, or by
// its name alone in one group; a name two groups share is found by path
// only.
func TestNamedField(t *testing.T) {
	type tree struct{ Redundant, Shared uint64 }
	type other struct{ Shared uint64 }
	st := reflect.ValueOf(struct {
		Top   uint64
		Tree  tree
		Other other
		Plain int
	}{Top: 1, Tree: tree{Redundant: 2, Shared: 3}, Other: other{Shared: 4}})
	require.Equal(t, uint64(1), namedField(st, "Top").Interface())
	require.Equal(t, uint64(2), namedField(st, "Redundant").Interface())
	require.Equal(t, uint64(2), namedField(st, "Tree.Redundant").Interface())
	require.Equal(t, uint64(4), namedField(st, "Other.Shared").Interface())
	require.False(t, namedField(st, "Shared").IsValid(), "a name two groups share")
	require.False(t, namedField(st, "Missing").IsValid())
	require.False(t, namedField(st, "Plain.X").IsValid())
}
