package swim

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"time"
)

// Scenario commands that move the clock and the network: time, tick,
// next, deadline, run, deliver, drop and heal.

// cmdTime: time T sets the clock without ticking anyone.
func (w *scenWorld) cmdTime(a *scenArgs, _ []string) error {
	if len(a.words) != 1 {
		return errors.New("time T")
	}
	at, err := w.when(a.words[0])
	a.words = nil
	if err != nil {
		return err
	}
	if at.Before(w.now) {
		return fmt.Errorf("time %s is before now (%s)", w.since(at), w.since(w.now))
	}
	w.now = at
	return nil
}

// cmdTick: tick NODE [T] moves the clock to T (default: now) and ticks
// NODE.
func (w *scenWorld) cmdTick(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	if len(a.words) > 0 {
		if err := w.cmdTime(a, nil); err != nil {
			return err
		}
	}
	n.m.Tick(w.now)
	w.collect(n)
	return nil
}

// cmdNext: next NODE ticks NODE at its NextDeadline (now, if that is
// past) and prints the time, then what it sent.
func (w *scenWorld) cmdNext(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	d := n.m.NextDeadline()
	if d.IsZero() {
		w.printf("no deadline")
		return nil
	}
	from := w.now
	if d.After(w.now) {
		w.now = d
	}
	w.printf("at %s (+%v)", w.since(w.now), w.now.Sub(from))
	n.m.Tick(w.now)
	w.collect(n)
	return nil
}

// cmdDeadline: deadline NODE prints NODE's NextDeadline.
func (w *scenWorld) cmdDeadline(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	if d := n.m.NextDeadline(); d.IsZero() {
		w.printf("none")
	} else {
		sign := "+"
		if d.Before(w.now) {
			sign = ""
		}
		w.printf("%s (now%s%v)", w.since(d), sign, d.Sub(w.now))
	}
	return nil
}

// cmdRun: run [NODE...] until=T [silent=NAME,...] [answer=false]
// [streams=fail] [stop=Stat] drives the
// Machines (default: all) from their deadlines up to T, as a driver would:
// packets between Machines are delivered at once, scripted peers ack the
// pings sent to them and relay acks for the ping-reqs whose target is not
// silent (unless silent themselves, or answer=false), and their streams
// stay open (or fail at once: streams=fail). It prints what happened
// under the time it happened at. With stop= it
// ends early, after the step in which that Stats counter of a Machine
// changed.
func (w *scenWorld) cmdRun(a *scenArgs, _ []string) error {
	nodes := w.nodes
	if len(a.words) > 0 {
		nodes = nil
		for len(a.words) > 0 {
			n, err := w.node(a)
			if err != nil {
				return err
			}
			nodes = append(nodes, n)
		}
	}
	v, ok := a.get("until")
	if !ok {
		return errors.New("run: until= missing")
	}
	until, err := w.when(v)
	if err != nil {
		return err
	}
	w.silent = map[netip.AddrPort]bool{}
	for _, name := range a.list("silent") {
		addr, err := w.mustAddr(name)
		if err != nil {
			return err
		}
		w.silent[addr] = true
	}
	w.answer = a.str("answer", "true") == "true"
	w.failOpen = a.str("streams", "open") == "fail"
	stop := a.str("stop", "")
	if stop != "" {
		if !namedField(reflect.ValueOf(Stats{}), stop).IsValid() {
			return fmt.Errorf("no Stats field %s", stop)
		}
	}
	before := statOf(nodes, stop)
	w.running, w.stamped, w.stampFrom = true, time.Time{}, w.now
	defer func() { w.running = false }()
	if err := w.settle(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		if i > 100000 {
			return errors.New("run: NextDeadline does not advance")
		}
		var d time.Time
		for _, n := range nodes {
			if nd := n.m.NextDeadline(); !nd.IsZero() && (d.IsZero() || nd.Before(d)) {
				d = nd
			}
		}
		if d.IsZero() || d.After(until) {
			break
		}
		if d.After(w.now) {
			w.now = d
		}
		for _, n := range nodes {
			if nd := n.m.NextDeadline(); !nd.IsZero() && !nd.After(w.now) {
				n.m.Tick(w.now)
			}
		}
		if err := w.settle(); err != nil {
			return err
		}
		if stop != "" && stopped(nodes, stop, before) {
			w.printf("stopped: %s changed", stop)
			return nil
		}
	}
	w.now = until
	return nil
}

// statOf is the Stats field named f of each node (nothing when f is
// empty).
func statOf(nodes []*scenNode, f string) []any {
	if f == "" {
		return nil
	}
	vals := make([]any, len(nodes))
	for i, n := range nodes {
		vals[i] = namedField(reflect.ValueOf(n.m.Stats()), f).Interface()
	}
	return vals
}

// stopped reports whether a node's Stats field f differs from before.
func stopped(nodes []*scenNode, f string, before []any) bool {
	return !reflect.DeepEqual(statOf(nodes, f), before)
}

// cmdDeliver: deliver hands the packets and streams in flight between
// Machines to their receivers, and what those answer, until none is left.
func (w *scenWorld) cmdDeliver(*scenArgs, []string) error { return w.settle() }

// cmdDrop: drop NAME... cuts Machines off: every packet to or from them is
// lost and every stream fails, until heal.
func (w *scenWorld) cmdDrop(a *scenArgs, _ []string) error {
	for _, name := range a.words {
		w.cut[name] = true
	}
	a.words = nil
	return nil
}

// cmdHeal: heal NAME... ends drop.
func (w *scenWorld) cmdHeal(a *scenArgs, _ []string) error {
	for _, name := range a.words {
		delete(w.cut, name)
	}
	a.words = nil
	return nil
}
