package swim

import (
	"crypto/ed25519"
	"fmt"
	"net/netip"
	"strings"

	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/wire"
)

// Scenario commands that call a Machine's API: join, join-start, leave,
// leave-done and update-meta.

// cmdJoin: join NODE [peers=N inc=I [ver=V] [signed]] [via=NAME], with
// input member lines, joins NODE through via (default seed). A scripted
// via answers with a push-pull of the members given (pNNN for N of
// peers=, at incarnation inc=, announcing protocol V, their alives signed
// by their identities when signed is given; and the input lines); the join's own request and events are not
// printed, only the count of live members NODE then knows. A Machine via
// runs the exchange for real, printed in full.
func (w *scenWorld) cmdJoin(a *scenArgs, input []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	via := a.str("via", "seed")
	viaAddr, err := w.mustAddr(via)
	if err != nil {
		return err
	}
	if w.nodeAt(viaAddr) != nil {
		n.m.Join(w.now, []netip.AddrPort{viaAddr})
		return w.settle()
	}
	peers, err := a.num("peers", 0)
	if err != nil {
		return err
	}
	inc, err := a.num("inc", 0)
	if err != nil {
		return err
	}
	versions, err := versionsArg(a)
	if err != nil {
		return err
	}
	signed := a.flag("signed")
	pp := &wire.PushPull{From: via}
	for i := 1; i <= int(peers); i++ {
		ms := mtMember(i, StateAlive, inc)
		ms.Versions = versions
		if signed {
			k, err := w.keyOf(ms.Name)
			if err != nil {
				return err
			}
			ms.Key = k.Public().(ed25519.PublicKey)
			ms.Sig = claims.Sign(k, w.aliveClaim(ms.Name, ms.Addr, ms.Incarnation, ms.Life, ms.Meta, ms.Versions, ms.Key))
		}
		pp.Members = append(pp.Members, ms)
	}
	for _, line := range input {
		tokens, err := scenFields(line)
		if err != nil {
			return err
		}
		ms, err := w.parseMember(tokens, via)
		if err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		pp.Members = append(pp.Members, ms)
	}
	n.m.Ready()
	ids := n.m.Join(w.now, []netip.AddrPort{viaAddr})
	if len(ids) != 1 {
		return fmt.Errorf("join: %d streams", len(ids))
	}
	n.m.Ready() // the request, answered here
	reply, err := wire.AppendPacket(nil, pp)
	if err != nil {
		return err
	}
	if err := n.m.HandleStreamResponse(w.now, ids[0], reply, nil); err != nil {
		return err
	}
	r := n.m.Ready()
	if len(r.Packets) > 0 || len(r.Streams) > 0 {
		return fmt.Errorf("join: %d packets and %d streams out", len(r.Packets), len(r.Streams))
	}
	w.printf("%s knows %d live members", n.name, n.m.NumMembers())
	return nil
}

// cmdJoinStart: join-start NODE seeds=A,B,... calls Join and prints the
// requests, which reply answers.
func (w *scenWorld) cmdJoinStart(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	var seeds []netip.AddrPort
	for _, s := range a.list("seeds") {
		addr, err := netip.ParseAddrPort(s)
		if err != nil {
			if addr, err = w.mustAddr(s); err != nil {
				return err
			}
		}
		seeds = append(seeds, addr)
	}
	ids := n.m.Join(w.now, seeds)
	w.printf("ids %v", ids)
	w.collect(n)
	return nil
}

// cmdLeave: leave NODE calls Leave.
func (w *scenWorld) cmdLeave(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	w.printErr(n.name, n.m.Leave(w.now))
	w.collect(n)
	return nil
}

// cmdLeaveDone: leave-done NODE prints LeaveDone.
func (w *scenWorld) cmdLeaveDone(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	w.printf("leave done: %v", n.m.Status().LeaveDone)
	return nil
}

// cmdUpdateMeta: update-meta NODE meta=TEXT | size=N calls UpdateMeta
// with TEXT, or with N bytes of x.
func (w *scenWorld) cmdUpdateMeta(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	meta := []byte(a.str("meta", ""))
	if size, err := a.num("size", 0); err != nil {
		return err
	} else if size > 0 {
		meta = []byte(strings.Repeat("x", int(size)))
	}
	w.printErr(n.name, n.m.UpdateMeta(w.now, meta))
	w.collect(n)
	return nil
}

// cmdBroadcast: broadcast NODE [key=K] [payload=P] [size=N] calls
// Broadcast (a payload of N bytes of x with size=) and prints the ID its
// Outcome will carry, or the error.
func (w *scenWorld) cmdBroadcast(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	payload := []byte(a.str("payload", ""))
	if size, err := a.num("size", 0); err != nil {
		return err
	} else if size > 0 {
		payload = []byte(strings.Repeat("x", int(size)))
	}
	id, err := n.m.Broadcast(w.now, a.str("key", ""), payload)
	if err != nil {
		w.printErr(n.name, err)
	} else {
		w.printf("%s broadcast id=%d", n.name, id)
	}
	w.collect(n)
	return nil
}

// cmdDelivered: delivered NODE prints, in order, every message NODE has
// handed its application in the scenario (Ready.Messages).
func (w *scenWorld) cmdDelivered(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	w.collect(n)
	if len(n.delivered) == 0 {
		w.printf("%s delivered nothing", n.name)
	}
	for _, d := range n.delivered {
		w.printf("%s", d)
	}
	return nil
}
