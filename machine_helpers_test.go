package swim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Helpers of the Machine tests: a Machine driven by hand with a fixed clock
// and a seeded *rand.Rand, packets built with the wire package, and its
// outputs decoded back into messages.

// mtStart is the time every test Machine is created at.
var mtStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const mtSelf = "self"

var (
	// mtSelfAddr is the address of the Machine under test.
	mtSelfAddr = netip.MustParseAddrPort("10.0.0.1:7946")
	// mtSeedAddr is the seed the test Machines join through.
	mtSeedAddr = netip.MustParseAddrPort("10.0.0.2:7946")
	// mtStranger is an address no member lives at: packets from it are
	// heard from nobody the Machine knows.
	mtStranger = netip.MustParseAddrPort("192.0.2.1:7946")
)

// mtPeer is the name of peer i (i >= 1), mtPeerAddr its address.
func mtPeer(i int) string { return fmt.Sprintf("p%03d", i) }

func mtPeerAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 7946)
}

// mtConfig returns a valid Config with the protocol parameters the tests
// rely on set explicitly, and every optional mechanism (periodic gossip,
// push-pull, reconnect, final and TCP checks, Lifeguard local health and
// nacks, any-traffic heartbeats, aligned probing) off; tests turn on what
// they exercise. PauseTolerance is 0 and SuspicionMaxTimeoutMult 1 so that
// the suspicion timeout is exactly SuspicionMult·max(1, log10 N)·
// ProbeInterval whatever the confirmations.
func mtConfig() *Config {
	c := DefaultLANConfig()
	c.Name = mtSelf
	c.BindAddr = "127.0.0.1"
	c.Meta = nil
	c.MaxMetaSize = 512
	c.ProbeInterval = time.Second
	c.ProbeTimeout = 500 * time.Millisecond
	c.IndirectChecks = 3
	c.SuspicionMult = 4
	c.SuspicionMaxTimeoutMult = 1
	c.RetransmitMult = 4
	c.GossipInterval = 0
	c.GossipNodes = 3
	c.GossipToDeadTime = time.Hour
	c.PushPullInterval = 0
	c.ReconnectInterval = 0
	c.PacketBudget = 1400
	c.DeltaQueueLimit = 4096
	c.Detection.BuddyPing = true
	c.Detection.FinalCheck = false
	c.Detection.TCPChecks = false
	c.Detection.TCPCheckFilter = nil
	c.AlignedProbing = false
	c.PauseTolerance = 0
	c.AwarenessMaxMultiplier = 1
	c.Detection.Nacks = false
	c.Detection.AnyTrafficHeartbeat = false
	return c
}

// mt is a Machine under test with its clock.
type mt struct {
	t   *testing.T
	m   *Machine
	cfg *Config
	now time.Time
}

func newMT(t *testing.T, cfg *Config) *mt {
	t.Helper()
	m, err := NewMachine(cfg, mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
	require.NoError(t, err)
	return &mt{t: t, m: m, cfg: cfg, now: mtStart}
}

// mtMember is a peer's state as a seed reports it in a push-pull.
func mtMember(i int, state State, inc uint64) wire.MemberState {
	return wire.MemberState{Name: mtPeer(i), Addr: wire.EncodeAddr(mtPeerAddr(i)), Incarnation: inc, State: uint8(state)}
}

// join makes the Machine join through mtSeedAddr, whose push-pull reply
// holds members. A join's merge gossips nothing, so the broadcast queue is
// as empty afterwards as before. The outputs are discarded.
func (h *mt) join(members ...wire.MemberState) {
	h.t.Helper()
	ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
	require.Len(h.t, ids, 1)
	reply, err := wire.AppendPacket(nil, &wire.PushPull{From: "seed", Members: members})
	require.NoError(h.t, err)
	require.NoError(h.t, h.m.HandleStreamResponse(h.now, ids[0], reply, nil))
	// A large view is merged a slice per Tick, each due at once.
	for i := 0; !h.m.NextDeadline().IsZero() && !h.m.NextDeadline().After(h.now); i++ {
		require.Less(h.t, i, 10000, "the merge does not end")
		h.m.Tick(h.now)
	}
	h.m.Ready()
}

// joinPeers joins n alive peers p001..pn at incarnation inc.
func (h *mt) joinPeers(n int, inc uint64) {
	h.t.Helper()
	ms := make([]wire.MemberState, 0, n)
	for i := 1; i <= n; i++ {
		ms = append(ms, mtMember(i, StateAlive, inc))
	}
	h.join(ms...)
	require.Equal(h.t, n+1, h.m.NumMembers())
}

// mtPacket encodes msgs as one packet, compound when there are several.
func mtPacket(t *testing.T, msgs ...wire.Message) []byte {
	t.Helper()
	frames := make([][]byte, 0, len(msgs))
	for _, msg := range msgs {
		f, err := wire.AppendFrame(nil, msg)
		require.NoError(t, err)
		frames = append(frames, f)
	}
	return wire.AppendCompound(nil, frames)
}

// feed delivers one packet carrying msgs from the given address at h.now.
func (h *mt) feed(from netip.AddrPort, msgs ...wire.Message) {
	h.t.Helper()
	require.NoError(h.t, h.m.HandlePacket(h.now, from, mtPacket(h.t, msgs...)))
}

// tick moves the clock to at and fires the timers due.
func (h *mt) tick(at time.Time) {
	h.now = at
	h.m.Tick(at)
}

// mtPkt is one outgoing packet, decoded.
type mtPkt struct {
	At   time.Time
	To   netip.AddrPort
	Len  int
	Msgs []wire.Message
}

// mtOut is a decoded Ready.
type mtOut struct {
	Packets  []mtPkt
	Streams  []StreamRequest
	Events   []Event
	Messages []Message
	Outcomes []Outcome
}

// ready takes the Machine's outputs and decodes every packet, failing the
// test on a packet that does not decode.
func (h *mt) ready() mtOut {
	h.t.Helper()
	r := h.m.Ready()
	out := mtOut{Streams: r.Streams, Events: r.Events, Messages: r.Messages, Outcomes: r.Outcomes}
	for _, p := range r.Packets {
		msgs, err := wire.DecodePacket(p.Data)
		require.NoError(h.t, err, "the Machine sent a packet that does not decode")
		out.Packets = append(out.Packets, mtPkt{At: h.now, To: p.To, Len: len(p.Data), Msgs: msgs})
	}
	return out
}

// pings returns the pings sent, with the packets carrying them.
func (o mtOut) pings() ([]*wire.Ping, []mtPkt) {
	var ps []*wire.Ping
	var pkts []mtPkt
	for _, p := range o.Packets {
		for _, msg := range p.Msgs {
			if ping, ok := msg.(*wire.Ping); ok {
				ps = append(ps, ping)
				pkts = append(pkts, p)
			}
		}
	}
	return ps, pkts
}

// eventsAbout returns the events about name.
func (o mtOut) eventsAbout(name string) []Event {
	var evs []Event
	for _, e := range o.Events {
		if e.Member.Name == name {
			evs = append(evs, e)
		}
	}
	return evs
}

// isDelta reports whether msg is a membership delta (alive, suspect, dead).
func isDelta(msg wire.Message) bool {
	switch msg.(type) {
	case *wire.Alive, *wire.Suspect, *wire.Dead:
		return true
	}
	return false
}

// deltaName is the member a delta is about.
func deltaName(msg wire.Message) string {
	switch d := msg.(type) {
	case *wire.Alive:
		return d.Name
	case *wire.Suspect:
		return d.Name
	case *wire.Dead:
		return d.Name
	}
	return ""
}

// deltasAbout returns the membership deltas in msgs about name.
func deltasAbout(msgs []wire.Message, name string) []wire.Message {
	var out []wire.Message
	for _, msg := range msgs {
		if isDelta(msg) && deltaName(msg) == name {
			out = append(out, msg)
		}
	}
	return out
}

// deltas returns the membership deltas in msgs.
func deltas(msgs []wire.Message) []wire.Message {
	var out []wire.Message
	for _, msg := range msgs {
		if isDelta(msg) {
			out = append(out, msg)
		}
	}
	return out
}

// isGossipOnly reports whether a packet carries deltas and nothing else:
// a gossip packet rather than failure-detection traffic.
func (p mtPkt) isGossipOnly() bool {
	if len(p.Msgs) == 0 {
		return false
	}
	for _, msg := range p.Msgs {
		if !isDelta(msg) {
			return false
		}
	}
	return true
}

// piggyback makes the Machine send one packet (the ack of a ping from a
// member: a stranger's ping gets a bare ack) and returns the deltas riding
// on it: what is queued for gossip. Other outputs produced meanwhile are
// discarded. The Machine must know a live member besides itself.
func (h *mt) piggyback() []wire.Message {
	h.t.Helper()
	h.m.Ready()
	asker := h.asker()
	const seq = 0xfeed
	h.feed(asker, &wire.Ping{Seq: seq, Target: mtSelf, From: "asker"})
	out := h.ready()
	var found []mtPkt
	for _, p := range out.Packets {
		if p.To == asker {
			found = append(found, p)
		}
	}
	require.Len(h.t, found, 1, "one ack for one ping")
	require.NotEmpty(h.t, found[0].Msgs)
	require.Equal(h.t, &wire.Ack{Seq: seq}, found[0].Msgs[0], "the ack leads its packet")
	for _, msg := range found[0].Msgs[1:] {
		require.True(h.t, isDelta(msg), "unexpected %T on an ack", msg)
	}
	return found[0].Msgs[1:]
}

// asker is the address of a member the Machine knows, other than itself:
// the first live one by name, else the first dead or left one still in
// its table.
func (h *mt) asker() netip.AddrPort {
	h.t.Helper()
	self := h.m.LocalMember().Name
	for _, live := range []bool{true, false} {
		for _, mem := range h.m.allMembers() {
			isLive := mem.State == StateAlive || mem.State == StateSuspect
			if mem.Name != self && isLive == live {
				return mem.Addr
			}
		}
	}
	h.t.Fatal("piggyback needs a member to ask")
	return netip.AddrPort{}
}

// settle empties the broadcast queue by having the Machine send acks until
// one carries no delta, then discards the outputs.
func (h *mt) settle() {
	h.t.Helper()
	for i := 0; i < 10000; i++ {
		if len(h.piggyback()) == 0 {
			h.m.Ready()
			return
		}
	}
	h.t.Fatal("the broadcast queue never drained")
}

// firstProbe ticks at the Machine's deadlines until it sends a probe ping,
// and returns the ping and the outputs of that tick.
func (h *mt) firstProbe() (*wire.Ping, mtPkt, mtOut) {
	h.t.Helper()
	for i := 0; i < 10; i++ {
		d := h.m.NextDeadline()
		require.False(h.t, d.IsZero(), "no timer armed")
		if d.Before(h.now) {
			d = h.now
		}
		h.tick(d)
		out := h.ready()
		if ps, pkts := out.pings(); len(ps) > 0 {
			require.Len(h.t, ps, 1, "one probe at a time")
			return ps[0], pkts[0], out
		}
	}
	h.t.Fatal("no probe within 10 deadlines")
	return nil, mtPkt{}, mtOut{}
}

// respond collects the Machine's outputs and answers them as live peers
// would, until it has nothing more to say: every peer not in silent acks a
// ping sent to its address, and relays an ack for a ping-req whose target is
// not silent. Streams are not answered. It returns everything collected.
func (h *mt) respond(silent map[netip.AddrPort]bool) mtOut {
	h.t.Helper()
	var all mtOut
	for {
		out := h.ready()
		if len(out.Packets) == 0 && len(out.Events) == 0 && len(out.Streams) == 0 {
			return all
		}
		all.Packets = append(all.Packets, out.Packets...)
		all.Streams = append(all.Streams, out.Streams...)
		all.Events = append(all.Events, out.Events...)
		type reply struct {
			from netip.AddrPort
			ack  *wire.Ack
		}
		var replies []reply
		for _, p := range out.Packets {
			if silent[p.To] {
				continue
			}
			for _, msg := range p.Msgs {
				switch msg := msg.(type) {
				case *wire.Ping:
					replies = append(replies, reply{p.To, &wire.Ack{Seq: msg.Seq}})
				case *wire.PingReq:
					target, err := wire.DecodeAddr(msg.TargetAddr)
					require.NoError(h.t, err)
					if !silent[target] {
						replies = append(replies, reply{p.To, &wire.Ack{Seq: msg.Seq}})
					}
				}
			}
		}
		for _, r := range replies {
			h.feed(r.from, r.ack)
		}
	}
}

// step ticks at the Machine's next deadline (or now, if that is past) and
// answers as respond does; it returns that tick's outputs. It fails the
// test when no timer is armed or the deadline is after limit.
func (h *mt) step(limit time.Time, silent map[netip.AddrPort]bool) mtOut {
	h.t.Helper()
	d := h.m.NextDeadline()
	require.False(h.t, d.IsZero(), "no timer armed")
	require.False(h.t, d.After(limit), "nothing happens by %v", limit.Sub(mtStart))
	if d.Before(h.now) {
		d = h.now
	}
	h.tick(d)
	return h.respond(silent)
}

// run drives the Machine from its deadlines until until, as a driver would,
// with the peers answering as respond says. It returns every packet the
// Machine sent and every event.
func (h *mt) run(until time.Time, silent map[netip.AddrPort]bool) mtOut {
	h.t.Helper()
	all := h.respond(silent)
	for i := 0; ; i++ {
		require.Less(h.t, i, 100000, "NextDeadline does not advance")
		d := h.m.NextDeadline()
		if d.IsZero() || d.After(until) {
			break
		}
		out := h.step(until, silent)
		all.Packets = append(all.Packets, out.Packets...)
		all.Streams = append(all.Streams, out.Streams...)
		all.Events = append(all.Events, out.Events...)
	}
	h.now = until
	return all
}

// mtAlive is peer i's alive message at inc.
func mtAlive(i int, inc uint64) *wire.Alive {
	return &wire.Alive{Name: mtPeer(i), Addr: wire.EncodeAddr(mtPeerAddr(i)), Incarnation: inc}
}

// feedConfirmed feeds msgs as feed does, then confirms every claim check
// the Machine starts (a ping carrying a leave or a death reported by
// another) as confirmLeaves does, and returns all the outputs: the leave
// or death reported by hearsay, confirmed.
func (h *mt) feedConfirmed(from netip.AddrPort, msgs ...wire.Message) mtOut {
	h.t.Helper()
	h.feed(from, msgs...)
	return h.confirmLeaves(h.ready())
}

// confirmLeaves confirms the claim checks among out's packets and returns
// out with the outputs that followed: a leave check is answered with the
// bare ack of a member that did leave, and a death check gets the verdicts
// of a member that does not answer, given directly rather than by ticking
// to their deadlines, so that no other timer fires: the check's (a
// suspicion), then the suspicion's window and its final check (a death).
// The suspect events of that fast-forward are left out of the outputs: the
// tests that confirm a death are about the death.
func (h *mt) confirmLeaves(out mtOut) mtOut {
	h.t.Helper()
	for _, p := range out.Packets {
		var ping *wire.Ping
		var claim *wire.Dead
		for _, msg := range p.Msgs {
			switch msg := msg.(type) {
			case *wire.Ping:
				ping = msg
			case *wire.Dead:
				if ping != nil && msg.Name == ping.Target {
					claim = msg
				}
			}
		}
		if ping == nil || claim == nil {
			continue
		}
		if claim.Left {
			h.feed(p.To, &wire.Ack{Seq: ping.Seq})
		} else if fc := h.m.finalChecks[ping.Seq]; fc != nil && fc.dead {
			h.m.expireCheck(h.now, h.now, fc)
			h.expireSuspicionNow(claim.Name)
		} else {
			continue
		}
		more := h.ready()
		out.Packets = append(out.Packets, more.Packets...)
		out.Streams = append(out.Streams, more.Streams...)
		for _, e := range more.Events {
			if e.Kind != EventSuspect || e.Member.Name != claim.Name {
				out.Events = append(out.Events, e)
			}
		}
	}
	return out
}

// expireSuspicionNow ends name's suspicion as if its window had run out
// with no answer, and its final check too.
func (h *mt) expireSuspicionNow(name string) {
	h.t.Helper()
	sp, ok := h.m.suspicions[name]
	if !ok {
		return
	}
	h.m.expireSuspicion(h.now, sp)
	for _, fc := range h.m.finalChecks {
		if fc.name == name && !fc.isClaim() {
			h.m.expireCheck(h.now, h.now, fc)
		}
	}
}

// feedAnswered feeds msgs as feed does, then answers every newcomer check
// the Machine starts (newcomers.go) with an ack from the address it
// pinged, as a member really living there does, and returns all the
// outputs.
func (h *mt) feedAnswered(from netip.AddrPort, msgs ...wire.Message) mtOut {
	h.t.Helper()
	h.feed(from, msgs...)
	return h.answerNewcomers(h.ready())
}

// answerNewcomers answers the newcomer checks among out's packets and
// returns out with the outputs that followed.
func (h *mt) answerNewcomers(out mtOut) mtOut {
	h.t.Helper()
	for _, p := range out.Packets {
		ping, ok := p.Msgs[0].(*wire.Ping)
		if !ok || len(p.Msgs) != 1 || h.m.addrChecks[ping.Seq].kind != addrCheckNewcomer {
			continue
		}
		h.feed(p.To, &wire.Ack{Seq: ping.Seq})
		more := h.ready()
		out.Packets = append(out.Packets, more.Packets...)
		out.Events = append(out.Events, more.Events...)
	}
	return out
}
