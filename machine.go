package swim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/plumtree"
	"github.com/swim-go/swim/internal/wire"
)

// Machine is the pure protocol core of one member: SWIM probing, suspicion,
// incarnations, dissemination and state merge. It does no I/O, reads no
// clock, starts no goroutine and draws randomness only from the *rand.Rand it
// is given, so a run is reproducible from its inputs. Every input carries
// now; every output (packets to send, stream exchanges to run, events, the
// next deadline) is data the caller acts on, as with etcd raft's RawNode.
//
// Memberlist drives a Machine over real sockets; internal/sim drives
// thousands in virtual time. Use Machine directly to bring your own I/O or to
// simulate your whole system deterministically. A Machine is not safe for
// concurrent use: its driver feeds it one input at a time (Memberlist under
// a mutex, from whichever goroutine the input arrives on; the simulator from
// its one event loop).
//
// The driver's loop: feed inputs (HandlePacket, HandleStream,
// HandleStreamResponse, Tick and the API calls), then act on Ready, then wait
// until NextDeadline or the next input.
type Machine struct {
	machineState
}

// Packet is a UDP packet the driver must send.
type Packet struct {
	To   netip.AddrPort
	Data []byte
}

// StreamRequest is a TCP exchange the driver must run: dial To, write Data
// as one stream message, read one reply message, and report the outcome with
// HandleStreamResponse(ID, ...). Timeout bounds the whole exchange.
type StreamRequest struct {
	ID      uint64
	To      netip.AddrPort
	Data    []byte
	Timeout time.Duration
}

// Ready holds the outputs accumulated since the last call.
type Ready struct {
	Packets []Packet
	Streams []StreamRequest
	Events  []Event
	// Messages are the applications' messages received, for the
	// application (Memberlist hands them to Config.Messages).
	Messages []Message
	// Outcomes say what became of SendReliable and Broadcast calls.
	Outcomes []Outcome
	// States are the applications' states peers sent in push-pulls.
	States []RemoteState
	// Acks are the answers to direct probes and Pings, with the payload
	// the peer's application attached, for Config.Pings.
	Acks []AckInfo
}

// IsEmpty reports whether there is nothing to act on.
func (r *Ready) IsEmpty() bool {
	return len(r.Packets) == 0 && len(r.Streams) == 0 && len(r.Events) == 0 &&
		len(r.Messages) == 0 && len(r.Outcomes) == 0 && len(r.States) == 0 && len(r.Acks) == 0
}

// NewMachine returns the core of the member cfg describes, reachable at
// addr. cfg is validated and must not be changed afterwards. rng is the only
// source of randomness.
func NewMachine(cfg *Config, addr netip.AddrPort, rng *rand.Rand, now time.Time, opts ...MachineOption) (*Machine, error) {
	return NewRegistry().NewMachine(cfg, addr, rng, now, opts...)
}

// MachineOption sets a property of a Machine's driver rather than of the
// protocol (those are in Config).
type MachineOption func(*Machine)

// WatchClock tells the Machine that its driver feeds it real time, and
// calls Tick as soon as it can after NextDeadline: a decision taken well
// after its deadline then means this member was not running (a GC or VM
// pause, CPU starvation), and the decision is deferred instead of accusing
// a peer (health.go). Memberlist sets it. A simulator that models a stalled
// member by ticking it late can set it too; one that ticks at times of its
// choosing for other reasons must not, or it will see lateness everywhere.
func WatchClock() MachineOption { return func(m *Machine) { m.watchClock = true } }

// IndexNames has the Machine keep its members in name order as they come
// and go, so that Members lists them without sorting, at the cost of an
// index as large as the ring. Memberlist sets it, for Members; a simulator
// of many Machines that rarely lists them should not.
func IndexNames() MachineOption { return func(m *Machine) { m.indexNames() } }

type streamKind uint8

const (
	streamJoin streamKind = iota + 1
	streamPushPull
	streamReconnect
	streamPing
	streamUser     // SendReliable
	streamFollowUp // the first exchange after a join, back with the seed
)

// pendingStream is an exchange the driver is running for us.
type pendingStream struct {
	kind streamKind
	to   netip.AddrPort
}

// machineState is the Machine's private state, fed one input at a time.
type machineState struct {
	cfg      *Config
	rng      *rand.Rand
	self     *memberState
	selfName string

	// the member table (table.go)
	reg   *Registry
	table []*chunk // entries by name id
	epoch time.Time
	// dead holds members declared dead or left that are still in the table,
	// in the order they died, until GossipToDeadTime passes (deadlist.go).
	dead deadList
	// tombs holds the tombstones oldest first, tombByName the current one
	// of each name; deadTombs counts those of members that did not leave
	// (the reconnect targets).
	tombs      []*tombstone
	tombByName map[string]*tombstone
	deadTombs  int
	version    uint64

	// probing (probe.go)
	// ring holds the live members by ring key, this one always included
	// (even once it has left): the order of aligned probing, and the pool
	// of random choices.
	ring       ringList
	byName     *ringList // the live members by name, once indexNames was called (table.go)
	watchClock bool      // a real-time driver: a decision taken late means we were not running (health.go)
	selfPos    int       // this member's index in ring, cached
	selfPosAt  uint64    // ring.mods+1 when selfPos was computed; 0: never
	probeRound int64     // the aligned round of the next probe
	probeOrder []uint32
	probeNext  int
	// probeQueued holds the members with an entry in probeOrder not yet
	// passed (probeOrder[probeNext:]), at most one each: a member that
	// comes back must not be queued twice, and looking for its old entry
	// in the order would cost O(N) per comeback.
	probeQueued idSet
	probes      []*probeRound // in flight; aligned rounds can overlap
	// Paired rounds (pairing.go): the round of the next Heartbeat (due at
	// timers.due[timerHeartbeat]), the first round whose partners are still to be
	// checked, the last round whose checks were planned, and the members
	// on the ring that cannot pair.
	beatRound     int64
	checkRound    int64
	checksPlanned int64
	unpaired      map[uint32]struct{}
	// ringChanged is the round in which the ring, or who on it can pair,
	// last changed (pairing.go, repair.go); pairFrom the first round in
	// which it may pair again; ringXor the XOR of the ring's name hashes.
	ringChanged int64
	pairFrom    int64
	ringXor     uint32
	// lastHeardAny is when a packet from any member last arrived.
	lastHeardAny time.Time
	seq          uint32
	relays       map[uint32]*relay
	// accusedAt is when an accusation of this member last counted against
	// its local health (selfClaimed).
	accusedAt time.Time
	// verifies is each source's budget of signature verifications
	// (signatures.go).
	verifies verifyBudget
	// strikes holds, by member name, the accusers whose accusations of it
	// were refuted lately (repeats.go).
	strikes map[string][]strike
	// silences holds, by member name, when this member's relayed ping of
	// it went unanswered (witness.go).
	silences map[string]time.Time
	// the application's pings in flight, by seq, and the smoothed round
	// trips measured, by name (userping.go)
	userPings map[uint32]*userPing
	rtts      map[string]time.Duration
	// the ack payloads of the packet being handled (userping.go)
	ackPayloads []*wire.AckPayload
	// dec decodes each packet into the memory of the last: the messages
	// live only while HandlePacket runs.
	dec wire.PacketDecoder
	// the address checks in flight, by seq (addrcheck.go)
	addrChecks map[uint32]addrCheck
	// the addresses a name-conflict address check pings, and
	// (conflictsReported) those found to run a second process of this
	// name (admission.go)
	conflictPings map[netip.AddrPort]struct{}
	moves         map[string]*pendingMove // moves.go, by name
	life          uint64                  // this member's (lives.go)
	sigs          claims.Table            // signed claims (signatures.go)
	// members Admit refused a change of (Config.Admission.Updates), held dead
	// here and left out of push-pulls (admission.go)
	refusedChanges    map[uint32]struct{}
	lives             lives
	newcomers         newcomers   // newcomers.go
	claimSpares       claimSpares // gates.go
	conflictsReported map[netip.AddrPort]bool
	// relayTokens is a token bucket bounding the ping-reqs served: one
	// token each, maxRelayBurst at most, refilled at maxRelayBurst per
	// ProbeInterval (probe.go).
	relayTokens   float64
	relayTokensAt time.Time

	// suspicion (suspicion.go)
	suspicions  map[string]*suspicion
	finalChecks map[uint32]*finalCheck
	// claimChecks is the sequence number of each member's claim check (a
	// leave or a death reported by another, being checked with the member)
	// in finalChecks, by name: at most one runs per member, and during a
	// mass leave every packet carries leaves, so finding it must not scan
	// the checks in flight.
	claimChecks map[string]uint32
	deathChecks int // the death checks among them, bounded by maxClaimChecks

	// dissemination (broadcast.go): membership deltas in bq, the
	// applications' broadcasts in uq (usermsg.go)
	bq *piggybackQueue
	uq *piggybackQueue
	// lastMemberGossip is when the last gossip round carried membership
	// news (queueNews); lastGossipRound when the last round went out.
	lastMemberGossip time.Time
	lastGossipRound  time.Time
	// lastJoinNews is when the alive of a newcomer was last queued: the
	// pace of a join storm (joinstorm.go).
	lastJoinNews time.Time
	// ownNews is set while news this member is the source of (its
	// refutation, its leave, an accusation or death it declared) waits
	// for the next gossip round: a storm does not pace it (joinstorm.go).
	ownNews bool
	// applications' broadcasts (usermsg.go): this member's epoch and
	// last sequence number
	bcastEpoch uint64
	bcastSeq   uint32
	// the receive rule and the epidemic broadcast trees (tree.go,
	// internal/plumtree)
	tree *plumtree.Tree
	// this member's broadcasts pushed since the last flush, whose Outcome
	// is due
	treeNotify []uint64
	// live members below ProtocolTree, by name id: while there are any,
	// broadcasts also go by gossip, to them alone
	treeOld map[uint32]struct{}

	// anti-entropy and join (pushpull.go)
	streams       map[uint64]pendingStream
	joinedVia     netip.AddrPort         // the seed whose answer joined us, for the first follow-up
	streamChecks  map[uint64]*finalCheck // TCP pings of final checks in flight
	streamID      uint64
	joinFollowUps int // extra early push-pulls left after a join
	seeds         []netip.AddrPort
	seedsUntil    time.Time

	leaveNews *queued
	// the leave notices waiting for an ack, by seq (lifecycle.go)
	leaveNotices map[uint32]*leaveNotice

	// large push-pulls being applied a slice per Tick (pushpull.go)
	merges []*pendingMerge

	// every pending timeout, and when the periodic work is due
	// (timers.go)
	timers timerQueue

	partition partitionAlarm // partition.go
	holes     holeAsks       // asks for the members rumors missed (repair.go)

	health int  // local health score, Lifeguard §IV-A (health.go)
	urgent bool // widen the next gossip round (a death we declared)

	// suspects counts the members held suspect; with an Observer,
	// suspectSince holds when each became suspect, by name id, and is
	// nil without one (observer.go).
	suspects     int
	obs          Observer
	suspectSince map[uint32]time.Time

	out      Ready
	eventSeq uint64 // the Seq of the last event
	stats    Stats
	// scratch buffers reused between packets
	holeNotes   []holeNote // names the packet being handled shows acting or names as subjects (repair.go)
	frames      [][]byte
	frameBuf    []byte
	pickScratch []*memberState
}

func (m *Machine) init(cfg *Config, reg *Registry, addr netip.AddrPort, rng *rand.Rand, now time.Time) {
	m.cfg = cfg
	m.rng = rng
	m.reg = reg
	m.epoch = now
	m.armAt(timerHeardSweep, now.Add(heardSweepEvery))
	m.relays = make(map[uint32]*relay)
	m.silences = make(map[string]time.Time)
	m.strikes = make(map[string][]strike)
	m.userPings = make(map[uint32]*userPing)
	m.addrChecks = make(map[uint32]addrCheck)
	m.conflictPings = make(map[netip.AddrPort]struct{})
	m.moves = make(map[string]*pendingMove)
	m.lives.init()
	m.sigs.Init(claimsConfig(cfg))
	m.refusedChanges = make(map[uint32]struct{})
	m.newcomers.init()
	m.conflictsReported = make(map[netip.AddrPort]bool)
	m.rtts = make(map[string]time.Duration)
	m.suspicions = make(map[string]*suspicion)
	m.finalChecks = make(map[uint32]*finalCheck)
	m.claimChecks = make(map[string]uint32)
	m.holes.pinged = make(map[string]time.Time)
	m.holes.pushed = make(map[netip.AddrPort]time.Time)
	m.holes.deferred = make(map[string]deferredHole)
	m.streams = make(map[uint64]pendingStream)
	m.streamChecks = make(map[uint64]*finalCheck)
	m.tombByName = make(map[string]*tombstone)
	m.bq = newPiggybackQueue(cfg.DeltaQueueLimit, 0)
	m.uq = newPiggybackQueue(cfg.Broadcasts.QueueLimit, cfg.Broadcasts.QueueBytes)
	m.bcastEpoch = epochOf(now)
	m.selfName = cfg.Name
	if cfg.Observer != nil {
		m.obs = cfg.Observer
		m.suspectSince = make(map[uint32]time.Time)
	}
	m.life = newLife(now, addr, cfg.Name)
	m.self = m.addEntry(cfg.Name, addr, cfg.Meta, cfg.versions(), m.life, StateAlive, 0, now)
	m.newTree()
	m.version = 1
	m.unpaired = make(map[uint32]struct{})
	m.memberChanged(now, m.self, memberAdded, StateAlive)
	// Spread the periodic work of members started together over one
	// interval, so they do not probe and exchange state in lockstep.
	if cfg.AlignedProbing {
		m.probeRound = m.roundOf(now)
		m.scheduleNextProbe(now)
		m.scheduleHeartbeats(now)
	} else {
		m.timers.due[timerProbe] = now.Add(m.jitter(cfg.ProbeInterval))
	}
	m.timers.due[timerGossip] = now
	// Sequence numbers start at a random point, so that a stranger cannot
	// answer probes it never saw by spraying small numbers.
	m.seq = m.rng.Uint32()
	m.relayTokens = maxRelayBurst
	m.relayTokensAt = now
	if cfg.PushPullInterval > 0 {
		m.timers.due[timerPushPull] = now.Add(cfg.PushPullInterval/2 + m.jitter(cfg.PushPullInterval))
	}
	if cfg.ReconnectInterval > 0 {
		m.timers.due[timerReconnect] = now.Add(m.jitter(cfg.ReconnectInterval) + cfg.ReconnectInterval/2)
	}
}

// jitter returns a uniformly random duration in [0, d).
func (m *Machine) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(m.rng.Int64N(int64(d)))
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// Ready returns and clears the outputs accumulated so far.
func (m *Machine) Ready() Ready {
	m.out.Outcomes = append(m.out.Outcomes, m.uq.takeDone()...)
	r := m.out
	m.out = Ready{}
	return r
}

// LocalMember returns this member.
func (m *Machine) LocalMember() Member { return m.export(m.self) }

// NumMembers counts the live (alive or suspect) members, this one included
// while it has not left.
func (m *Machine) NumMembers() int {
	if m.self.live() {
		return m.ring.len()
	}
	return m.ring.len() - 1
}

// numOthers counts the live members other than this one.
func (m *Machine) numOthers() int { return m.ring.len() - 1 }

// Member returns the named member as this one sees it.
func (m *Machine) Member(name string) (Member, bool) {
	s := m.lookup(name)
	if s == nil {
		return Member{}, false
	}
	return m.export(s), true
}

// allMembers returns every member in the table, this one included, dead
// and left ones not yet forgotten included, sorted by name.
func (m *Machine) allMembers() []Member {
	out := make([]Member, 0, m.tableSize())
	m.ring.each(func(id uint32) { out = append(out, m.export(m.entry(id))) })
	m.dead.each(func(d deadEntry) { out = append(out, m.export(m.entry(d.id))) })
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// HandlePacket processes one received UDP packet from the given address.
// A malformed packet is dropped, counted, and reported as an error.
func (m *Machine) HandlePacket(now time.Time, from netip.AddrPort, data []byte) error {
	m.stats.PacketsReceived++
	m.stats.BytesReceived += uint64(len(data))
	msgs, unknownFields, err := m.dec.Decode(data)
	if err != nil {
		m.stats.PacketsDropped++
		return fmt.Errorf("swim: packet from %s: %w", from, err)
	}
	// A newer peer's additions (wire.ProtocolMax): skipped, counted.
	m.stats.UnknownFields += uint64(unknownFields)
	m.ackPayloads = m.ackPayloads[:0]
	sender := m.byAddr(from)
	if sender == m.self {
		sender = nil
	}
	if sender != nil {
		// Geode: any message from a member counts as a heartbeat.
		m.markHeard(sender, now)
		m.lastHeardAny = now
		if sender.state() == StateDead {
			// And one we declared dead is alive after all (repair.go).
			m.addHoleNote(holeNote{actor: true, entry: sender})
		}
	}
	// Deltas first, answers and requests last: a ping that carries a
	// suspicion of us (buddy ping, final check) must see the refutation it
	// provokes queued before its ack is built, so the refutation rides on
	// that ack; and an ack that carries its sender's refutation must find
	// the refutation applied, so that a check it answers (a final check, a
	// leave check) sees the member's new incarnation.
	for _, msg := range msgs {
		switch msg := msg.(type) {
		case *wire.Ping, *wire.PingReq, *wire.Ack, *wire.Nack, *wire.User, *wire.Broadcast, *wire.Heartbeat, *wire.ViewDigest,
			*wire.IHave, *wire.Graft, *wire.Prune:
			continue
		case *wire.AckPayload:
			m.ackPayloads = append(m.ackPayloads, msg)
		case *wire.Unknown:
			m.stats.UnknownMessages++
		case *wire.Alive:
			m.handleAlive(now, msg, mergeGossip, teller{from: from, member: sender != nil && sender.live()})
		case *wire.Suspect:
			if m.accusationFromStranger(msg.Name, sender) {
				continue
			}
			if m.handleSuspect(now, msg) {
				m.addHoleNote(holeNote{name: msg.Name})
			}
			m.noteNames(sender, msg.From, "")
		case *wire.Dead:
			if m.accusationFromStranger(msg.Name, sender) {
				continue
			}
			m.handleDead(now, msg, sender)
			if !msg.Left {
				// The member that declared the death ran the final
				// check: it was alive then. (A leave's From may be the
				// member leaving.)
				m.noteNames(sender, msg.From, "")
			}
		default:
			// A push-pull belongs on a stream, a compound was flattened.
			m.stats.PacketsDropped++
			return fmt.Errorf("swim: packet from %s: unexpected %T", from, msg)
		}
	}
	for _, msg := range msgs {
		switch msg := msg.(type) {
		case *wire.User:
			m.handleUser(from, sender, msg)
		case *wire.Broadcast:
			m.handleBroadcast(now, sender, msg)
		case *wire.IHave, *wire.Graft, *wire.Prune:
			m.treeInput(now, sender, msg)
		case *wire.Ack:
			m.handleAck(now, from, msg)
		case *wire.Nack:
			m.handleNack(now, from, msg)
		case *wire.Ping:
			m.handlePing(now, from, sender, msg, len(data))
			if sender == nil {
				// A ping from a member's address is that member (the
				// heartbeat above); from elsewhere, its From is a
				// name to know (repair.go).
				m.noteNames(nil, msg.From, "")
			}
		case *wire.PingReq:
			m.handlePingReq(now, from, sender, msg, len(data))
			actor := msg.From
			if sender != nil {
				actor = ""
			}
			m.noteNames(sender, actor, msg.Target)
		case *wire.ViewDigest:
			m.handleViewDigest(now, sender, msg)
		case *wire.Heartbeat:
			m.handleHeartbeat(now, from, msg)
			if sender == nil {
				m.noteNames(nil, msg.From, "")
			}
		}
	}
	if len(m.holeNotes) > 0 {
		// Once the whole packet is applied: it may carry the very alive
		// that fills the hole, and make its sender known.
		m.askHoles(now, from)
	}
	return nil
}

// send queues a packet carrying msg and as many pending deltas as fit
// (SWIM §4: dissemination piggybacks on failure-detection traffic).
func (m *Machine) send(to netip.AddrPort, msg wire.Message) { m.sendWith(to, msg) }

// sendWith is send with further messages riding right after msg (an ack's
// payload, a suspicion, a view digest); nil ones are skipped.
func (m *Machine) sendWith(to netip.AddrPort, msg wire.Message, extras ...wire.Message) {
	// The frame is built in a reused buffer: emit copies it into the
	// packet.
	frame, err := wire.AppendFrame(m.frameBuf[:0], msg)
	if err != nil {
		// Our own messages are built within the wire limits, and what a
		// peer sent was checked against the same limits on the way in;
		// a failure is a bug, dropped and counted rather than fatal.
		m.stats.EncodeErrors++
		return
	}
	m.frameBuf = frame
	m.frames = append(m.frames[:0], frame)
	budget := m.packetBudget() - wire.CompoundHeaderMax - len(frame) - wire.FrameOverheadMax
	if ping, ok := msg.(*wire.Ping); ok {
		if claim := m.claimFor(ping, to); claim != nil {
			extras = []wire.Message{claim}
		}
	}
	for _, extra := range extras {
		if extra == nil {
			continue
		}
		if f, err := wire.AppendFrame(nil, extra); err == nil {
			m.frames = append(m.frames, f)
			budget -= len(f) + wire.FrameOverheadMax
		}
	}
	m.frames = m.piggyback(m.frames, budget, to)
	m.emit(to, m.frames)
}

// sendAlone queues a packet carrying msgs and nothing else: no
// piggybacked deltas.
func (m *Machine) sendAlone(to netip.AddrPort, msgs ...wire.Message) {
	m.frames = m.frames[:0]
	for _, msg := range msgs {
		f, err := wire.AppendFrame(nil, msg)
		if err != nil {
			m.stats.EncodeErrors++
			return
		}
		m.frames = append(m.frames, f)
	}
	m.emit(to, m.frames)
}

// claimFor is the claim about its target a ping to it carries, nil if
// none. Lifeguard §IV-C (buddy system): a ping to a member we hold suspect
// carries the suspicion, so the member learns of it at once and refutes on
// its ack, instead of waiting for gossip. A final check always carries it
// (Geode), and a leave check the leave it checks.
func (m *Machine) claimFor(ping *wire.Ping, to netip.AddrPort) wire.Message {
	fc := m.finalChecks[ping.Seq]
	if fc != nil && fc.isClaim() {
		return fc.claim()
	}
	if !m.cfg.Detection.BuddyPing && fc == nil {
		return nil
	}
	if s := m.lookup(ping.Target); s != nil && m.addrOf(s) == to {
		if sp := m.suspicionOf(s); sp != nil {
			return sp
		}
	}
	return nil
}

// suspicionOf is the suspicion a message to s carries while we hold it
// suspect (so that it refutes at once), nil otherwise.
func (m *Machine) suspicionOf(s *memberState) *wire.Suspect {
	if s.state() != StateSuspect {
		return nil
	}
	return &wire.Suspect{Name: m.nameOf(s), Incarnation: s.inc(), From: m.selfName, Life: m.lifeOf(s)}
}

// sendGossip queues a packet of pending deltas alone; it reports false when
// there was nothing to send.
func (m *Machine) sendGossip(to netip.AddrPort) bool {
	m.frames = m.piggyback(m.frames[:0], m.packetBudget()-wire.CompoundHeaderMax, to)
	if len(m.frames) == 0 {
		return false
	}
	m.emit(to, m.frames)
	return true
}

// protocolAt is the newest protocol the member at addr announced, the
// oldest this release speaks for an address not known: what a delta sent
// there may require. Announce first, use after (wire.ProtocolMax).
func (m *Machine) protocolAt(addr netip.AddrPort) uint8 {
	if s := m.byAddr(addr); s != nil {
		return m.versionsOf(s).Effective().ProtocolMax
	}
	return wire.ProtocolMin
}

func (m *Machine) emit(to netip.AddrPort, frames [][]byte) {
	data := wire.AppendCompound(nil, frames)
	m.out.Packets = append(m.out.Packets, Packet{To: to, Data: data})
	m.stats.PacketsSent++
	m.stats.BytesSent += uint64(len(data))
	// The frames slice is reused; drop references to delta bytes.
	clear(frames)
}

// retransmitLimit is how many times a delta is piggybacked:
// RetransmitMult·max(2, ceil(log10(N+1))), N the live members this one
// included (memberlist's rule, with a floor; SWIM §4.1 shows O(log N)
// rounds suffice). The floor matters up to 9 members, where the log term
// is 1: a delta is still sent 2·RetransmitMult times, so that in a small
// cluster, where each delta has few carriers, a few lost packets do not end
// it.
func (m *Machine) retransmitLimit() int {
	n := float64(m.NumMembers() + 1)
	return m.cfg.RetransmitMult * max(2, int(math.Ceil(math.Log10(n))))
}

// sendPlain queues a packet carrying msg alone, with no deltas, if it is at
// most limit bytes: the answer to a sender that is not a member, which must
// get no more bytes back than it sent (a spoofed source would turn gossip
// into amplification). A larger answer is not sent (PacketsDropped).
func (m *Machine) sendPlain(to netip.AddrPort, msg wire.Message, limit int) {
	frame, err := wire.AppendFrame(m.frameBuf[:0], msg)
	if err != nil {
		m.stats.EncodeErrors++
		return
	}
	if 1+len(frame) > limit { // a packet of one frame: version byte and frame
		m.stats.PacketsDropped++
		return
	}
	m.frameBuf = frame
	m.frames = append(m.frames[:0], frame)
	m.emit(to, m.frames)
}

// packetBudget is the most bytes of a packet the Machine builds: the
// configured budget less what the driver's envelope (cluster label,
// encryption) may add.
func (m *Machine) packetBudget() int {
	return m.cfg.PacketBudget - wire.EnvelopeOverhead(len(m.cfg.Label))
}

// queueNews encodes msg and queues it for dissemination about name. A
// message that does not encode (a bug: deltas from peers passed the same
// limits on the way in) is counted and not queued; the result is then nil.
func (m *Machine) queueNews(name string, msg wire.Message) *queued {
	return m.queueDelta(name, msg, false)
}

// queueOwnNews is queueNews for news this member is the source of:
// a join storm does not pace the round that carries it (joinstorm.go).
func (m *Machine) queueOwnNews(name string, msg wire.Message) *queued {
	b := m.queueDelta(name, msg, false)
	if b != nil {
		m.ownNews = true
	}
	return b
}

// queueDelta is queueNews; lazy news (joinstorm.go) does not bring
// the next gossip round forward.
func (m *Machine) queueDelta(name string, msg wire.Message, lazy bool) *queued {
	switch d := msg.(type) {
	case *wire.Suspect:
		if len(d.Sig) == 0 {
			m.proveSuspect(d)
		}
	case *wire.Dead:
		if len(d.Sig) == 0 {
			m.proveDead(d)
		}
	}
	frame, err := wire.AppendFrame(nil, msg)
	if err != nil {
		m.stats.EncodeErrors++
		return nil
	}
	if !lazy {
		m.eagerNewsQueued()
	}
	if m.bq.Len() == 0 && m.uq.Len() > 0 && m.cfg.GossipInterval > 0 {
		// Membership news into an empty queue goes out as it would
		// without the applications' broadcasts, which keep the gossip
		// rounds going on their fixed beat: at once, unless a round
		// carried membership news less than a GossipInterval ago.
		// Otherwise each hop of a suspicion would wait half a round on
		// average, and the members that hear of it last would decide
		// hundreds of milliseconds after the others.
		if at := m.lastMemberGossip.Add(m.cfg.GossipInterval); at.Before(m.timers.due[timerGossip]) {
			m.schedule(timerGossip, at)
		}
	}
	b := m.bq.queue(name, frame)
	if lazy {
		m.bq.markLazy(b)
	}
	return b
}

// event records a membership event for the driver.
func (m *Machine) event(kind EventKind, s *memberState) {
	m.emitEvent(Event{Kind: kind, Member: m.export(s)})
}

// emitEvent numbers e and records it for the driver.
func (m *Machine) emitEvent(e Event) {
	m.eventSeq++
	e.Seq = m.eventSeq
	m.out.Events = append(m.out.Events, e)
}

// Snapshot returns every member in the table, dead and left ones not yet
// forgotten included, sorted by name, and the Seq of the last event it
// reflects: the events after it are those with a greater Seq.
func (m *Machine) Snapshot() ([]Member, uint64) { return m.allMembers(), m.eventSeq }
