package swim

import (
	"bytes"
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Newcomers. News of a member this one does not know is believed at once
// only from a source that could not have invented it unnoticed: a live
// member's packet from that member's own address, a live member's
// push-pull from that member's host, or the answer to an exchange this
// member started (a join, a push-pull, a TCP ping). Anything else (a
// packet from an address that is no member's, a push-pull from a process
// not known) may come from a stranger filling the table with members that
// do not exist, or pointing the cluster at a third party's address:
//
//   - A process may announce itself: news of a member at the very address
//     it came from (a joiner's push-pull to its seed, a newcomer's first
//     ping) is checked. The address is pinged in the announced name (an
//     address check, addrcheck.go), alone, with no gossip; the member is
//     admitted when that address answers, and forgotten, counted, when it
//     stays silent for a probe timeout. Until then it has no event, no
//     place in the probe order, no gossip and no part in local health.
//   - It may not announce others: their news is dropped and counted. A
//     real member reaches this one anyway, from the members that know it.
//     A push-pull from a process being checked (a joiner's exchanges with
//     members that have not heard of it yet, which is how a booting
//     cluster converges in a quarter of a second) is held, and merged
//     once the process was admitted: a member's news is believed.
//
// What checks cost is bounded: one per address at a time, none of an
// address that stayed silent within the last probe interval (so news sent
// from a spoofed source gets that address at most one small packet an
// interval, fewer bytes than the news cost), and maxNewcomerChecks in all.
//
// A seed checks the member that joins through it: one round trip before
// the seed gossips it. The rest of the cluster hears of it from members,
// and believes them.

// maxNewcomerChecks bounds the newcomer checks in flight: a thousand
// members booting through one seed at once are as many checks there.
const maxNewcomerChecks = 4096

// maxHeldBytes bounds the bytes of the push-pulls held until their
// senders are admitted.
const maxHeldBytes = 8 << 20

// maxSilentAddrs bounds the addresses remembered as silent to a check.
const maxSilentAddrs = 1024

// teller is who passed news on, as far as this member can tell: it decides
// whether news of a member not known is believed at once or checked.
type teller struct {
	// from is the packet's source address, or the stream's remote
	// address.
	from netip.AddrPort
	// member: it came from a live member at its own address, or answers
	// an exchange this member started.
	member bool
	// stream: it came in a push-pull, whose source port is new each time;
	// sender is the name the push-pull came in.
	stream bool
	sender string
	// signer: the push-pull's sender signs its own entry, and so leaves
	// out the proofs of entries it deems known (proofWanted, pushpull.go).
	signer bool
}

// vouched is the teller of news no stranger can have passed on.
var vouched = teller{member: true}

// pendingNewcomer is a member not known, being checked at its announced
// address: the news that announced it, kept (copied: it may alias a
// packet) to be applied if the address answers.
type pendingNewcomer struct {
	alive wire.Alive
	// datagram: announced by UDP (not a push-pull's TCP handshake), and
	// counted so in newcomers.datagrams and byNetwork under network.
	datagram bool
	network  netip.Prefix
	// held: the member's push-pull, merged once it was admitted, and
	// the stream's address it came from
	held     []byte
	heldPeer netip.AddrPort
}

// newcomers is the state of the newcomer checks.
type newcomers struct {
	// byAddr: the newcomers being checked, by the address pinged
	byAddr map[netip.AddrPort]*pendingNewcomer
	// heldBytes counts the bytes of the push-pulls held
	heldBytes int
	// silent holds, for an address that did not answer a check, until
	// when it is not checked again.
	silent map[netip.AddrPort]time.Time
	// datagrams counts the checks of announcements that came by UDP, and
	// byNetwork those by source network (sourceNetwork).
	datagrams int
	byNetwork map[netip.Prefix]int
}

func (n *newcomers) init() {
	n.byAddr = make(map[netip.AddrPort]*pendingNewcomer)
	n.silent = make(map[netip.AddrPort]time.Time)
	n.byNetwork = make(map[netip.Prefix]int)
}

// newcomerChecksPerNetwork bounds the checks in flight of announcements
// that came by UDP from one source network, and maxNewcomerChecks/2 all of
// them: a UDP source is easy to forge, and one that announced a member at
// each of thousands of addresses (20,000 a second) kept every check taken,
// so that real joiners through this member were refused. A joiner's own
// push-pull took a TCP handshake from its host, and is checked in the
// half left to streams.
const newcomerChecksPerNetwork = 64

// ownNews reports whether news of the member called name at addr, passed
// on by o, is the member's own: it came from that address, or in a
// push-pull in that member's name. A push-pull's source is not its
// sender's address (its port is new each time, and a member that
// advertises another address than the one it dials from, behind NAT or on
// a host of several networks, would never be admitted), but it took a
// TCP handshake from wherever it came, and all it can cost a third party
// named as its address is one check.
func ownNews(o teller, name string, addr netip.AddrPort) bool {
	return o.from == addr || (o.stream && (o.from.Addr() == addr.Addr() || name == o.sender))
}

// checkNewcomer starts the check of a's news that a member not known lives
// at addr, passed on by o (see above), or drops it.
func (m *Machine) checkNewcomer(now time.Time, a *wire.Alive, addr netip.AddrPort, o teller) {
	nc := &m.newcomers
	if !ownNews(o, a.Name, addr) {
		m.stats.Admission.NewcomersRefused++
		return
	}
	if c := nc.byAddr[addr]; c != nil {
		switch {
		case c.alive.Name != a.Name:
			// Another name at an address being checked: one at a time.
			m.stats.Admission.NewcomersRefused++
		case a.Incarnation > c.alive.Incarnation:
			// Newer news of the member being checked: admit that.
			c.alive = cloneAlive(a)
		}
		return
	}
	if until, ok := nc.silent[addr]; (ok && now.Before(until)) || len(nc.byAddr) >= maxNewcomerChecks {
		m.stats.Admission.NewcomersRefused++
		return
	}
	datagram := !o.stream
	network := sourceNetwork(o.from.Addr())
	if datagram && (nc.datagrams >= maxNewcomerChecks/2 || nc.byNetwork[network] >= newcomerChecksPerNetwork) {
		m.stats.Admission.NewcomersRefused++
		return
	}
	if datagram {
		nc.datagrams++
		nc.byNetwork[network]++
	}
	nc.byAddr[addr] = &pendingNewcomer{alive: cloneAlive(a), datagram: datagram, network: network}
	m.stats.Admission.NewcomersChecked++
	m.startAddrCheck(now, m.nextSeq(), addrCheck{kind: addrCheckNewcomer, addr: addr, name: a.Name, life: a.Life}, nil)
}

// cloneAlive copies an alive out of the packet it may alias.
func cloneAlive(a *wire.Alive) wire.Alive {
	return wire.Alive{Name: a.Name, Addr: cloneBytes(a.Addr), Incarnation: a.Incarnation,
		Meta: cloneBytes(a.Meta), Versions: a.Versions, Life: a.Life,
		Key: cloneBytes(a.Key), Sig: cloneBytes(a.Sig), Cert: cloneBytes(a.Cert)}
}

// holdForNewcomer applies the sender's own entry of pp, a push-pull (data)
// passed on by o from a process not known as a live member, and reports
// whether the sender is now being checked: then the push-pull is held until
// the check ends, within maxHeldBytes (past them, or with one held
// already, it is dropped and counted), and nothing else of it is applied
// now. Only a peer's own exchange (mergePushPull) comes from a process not
// known, so that is how it is merged later.
func (m *Machine) holdForNewcomer(now time.Time, pp *wire.PushPullView, data []byte, o teller) bool {
	var v wire.MemberView
	var addr netip.AddrPort
	for c := pp.Cursor(); c.Next(&v); {
		if string(v.Name) == pp.From && pp.From != m.selfName {
			m.mergeMember(now, &v, pp.From, mergePushPull, o)
			addr, _ = wire.DecodeAddr(v.Addr)
			break
		}
	}
	nc := &m.newcomers
	c := nc.byAddr[addr]
	if c == nil || c.alive.Name != pp.From {
		return false
	}
	if c.held == nil && nc.heldBytes+len(data) <= maxHeldBytes {
		c.held, c.heldPeer = bytes.Clone(data), o.from
		nc.heldBytes += len(data)
	} else {
		m.stats.Admission.NewcomersRefused++
	}
	return true
}

// endNewcomer forgets the newcomer being checked at addr and returns it.
func (m *Machine) endNewcomer(addr netip.AddrPort) *pendingNewcomer {
	nc := &m.newcomers
	c := nc.byAddr[addr]
	delete(nc.byAddr, addr)
	nc.heldBytes -= len(c.held)
	if c.datagram {
		nc.datagrams--
		if nc.byNetwork[c.network]--; nc.byNetwork[c.network] <= 0 {
			delete(nc.byNetwork, c.network)
		}
	}
	return c
}

// newcomerAnswered admits the newcomer whose address, addr, answered its
// check.
func (m *Machine) newcomerAnswered(now time.Time, addr netip.AddrPort) {
	c := m.endNewcomer(addr)
	m.handleAlive(now, &c.alive, mergeChecked, vouched)
	if c.held != nil {
		// Its view, now that it is a member. An error was one already
		// (the push-pull was parsed when it came).
		_, _ = m.mergeStateHeld(now, c.held, mergePushPull, c.heldPeer, true)
	}
}

// newcomerSilent ends a check its address, addr, did not answer: the
// member is not admitted, and the address is not checked again for a
// while.
func (m *Machine) newcomerSilent(now time.Time, addr netip.AddrPort) {
	m.endNewcomer(addr)
	m.stats.Admission.NewcomersRefused++
	nc := &m.newcomers
	if len(nc.silent) >= maxSilentAddrs {
		for a, until := range nc.silent {
			if !now.Before(until) {
				delete(nc.silent, a)
			}
		}
	}
	if len(nc.silent) < maxSilentAddrs {
		nc.silent[addr] = now.Add(m.cfg.ProbeInterval)
	}
}
