package plumtree

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

const (
	// Rings is the number of hash rings whose neighbors make the overlay.
	Rings = 3
	// maxPeers bounds the neighbors: the 2·Rings of the rings and the
	// extras a moment's difference in views brings.
	maxPeers = 16
	// extraIdle is how long an extra neighbor stays without a word.
	extraIdle = 30 * time.Second
	// MaxMissing bounds the broadcasts announced and not received that a
	// member remembers, and maxAnnouncers the announcers it remembers of
	// each (the members it may graft, in turn).
	MaxMissing    = 4096
	maxAnnouncers = 4
	// GraftTries bounds the grafts for one broadcast.
	GraftTries = 8
	// retainFor is how long a broadcast is retained for grafts: far past
	// the last graft for it (GraftTries·GraftTimeout).
	retainFor = 30 * time.Second
	// LinkBytes bounds the pushes queued on one link; past it, the origin
	// with the most bytes queued there loses its newest (fairness: one
	// noisy origin cannot crowd the others out of a relay).
	LinkBytes = 1 << 20
	// flushPackets bounds the packets of pushes one link gets per flush;
	// past it, the origins take turns.
	flushPackets = 64
	// announceEvery: announcements go out every this many flushes
	// (unless a packet to the neighbor carried them first).
	announceEvery = 10
	// maxKeys bounds the keys whose newest value is remembered, and the
	// origins whose first broadcast and last link are.
	maxKeys = 1 << 16
	// maxJoins bounds the trees one link is asked to join at once
	// (NeighborDown).
	maxJoins = 4096
)

// ID is the identifier of a broadcast in announcements and grafts: the
// first 8 bytes of the SHA-256 of its origin, epoch and sequence number.
func ID(origin string, epoch uint64, seq uint32) uint64 {
	var b [wire.MaxNameLen + 12]byte
	n := copy(b[:], origin)
	binary.BigEndian.PutUint64(b[n:], epoch)
	binary.BigEndian.PutUint32(b[n+8:], seq)
	sum := sha256.Sum256(b[:n+12])
	return binary.BigEndian.Uint64(sum[:8])
}

// Key is a broadcast's key among its origin's: the origin and its key, or,
// without one, its identity, which nothing else shares.
func Key(b *wire.Broadcast) string {
	if b.Key != "" {
		return b.Origin + "\x00k" + b.Key
	}
	return fmt.Sprintf("%s\x00#%d.%d", b.Origin, b.Epoch, b.Seq)
}

// Config is what the Machine sets once.
type Config struct {
	// Self is this member's name: the origin of its own broadcasts.
	Self string
	// On: this member takes part in trees. Without, only the receive
	// rule is kept (the windows of delivered broadcasts, the newest value
	// of each key).
	On bool
	// MaxOrigins bounds the origins whose delivered broadcasts are
	// remembered and the origins a link keeps trees of (an origin
	// invented by a forger costs an entry).
	MaxOrigins int
	// RetainBytes bounds the broadcasts retained for grafts.
	RetainBytes int
	// FlushInterval is the beat of the links' queues; GraftTimeout how
	// long an announced broadcast may be missing before it is grafted.
	FlushInterval time.Duration
	GraftTimeout  time.Duration
}

// View is the Machine's member table as the trees see it: members by the
// ids the Machine assigns them.
type View interface {
	// Key is the member's probe-ring key, from which its places on the
	// trees' rings are mixed.
	Key(peer uint32) uint64
	// Live: the member is alive or suspect.
	Live(peer uint32) bool
	// Alive: the member is alive.
	Alive(peer uint32) bool
	// Member: a member of that name is in the table.
	Member(name string) bool
	// Eligible calls f with each member that may be a neighbor (another
	// live member on the trees), in the table's ring order.
	Eligible(f func(peer uint32))
	// Epoch is the epoch the broadcasts of the origin called name start
	// at in its current process (its life's start), ok false when it is
	// not known (no such member, or one whose release predates lives).
	Epoch(name string) (epoch uint64, ok bool)
}

// From is the member a tree message came from, as the Machine judged it:
// OK when it may send tree messages (a live member on the trees, other
// than this one).
type From struct {
	ID uint32
	OK bool
}

// Output is what the Tree asks of the Machine since it was last taken:
// packets to send, and the timers to arm.
type Output struct {
	// Packets hold frames for one neighbor each, in the order made.
	Packets []Packet
	// FlushAt is when Flush is due; zero if no flush was asked.
	FlushAt time.Time
	// Grafts are the graft timers to arm: GraftDue(ID) at At, current
	// while GraftPending(ID, Try).
	Grafts []GraftTimer
}

// Packet is frames for one neighbor, to go in one packet.
type Packet struct {
	To     uint32
	Frames [][]byte
}

// GraftTimer is a broadcast still missing at At, after Try grafts.
type GraftTimer struct {
	At  time.Time
	ID  uint64
	Try uint64
}

// Stats are the Tree's counters and gauges.
type Stats struct {
	PushesSent            uint64 // broadcasts pushed over eager links
	PushesDropped         uint64 // pushes dropped from a link's full queue (its noisiest origin's newest)
	Redundant             uint64 // broadcasts that came again over a tree link
	PrunesSent            uint64
	PrunesReceived        uint64
	AnnouncementsSent     uint64 // identifiers announced to lazy neighbors (in IHave)
	AnnouncementsReceived uint64
	GraftsSent            uint64 // broadcasts asked of an announcer, not received in time
	GraftsReceived        uint64 // broadcasts neighbors asked of this member
	JoinsSent             uint64 // trees a neighbor was asked to carry (origins named in Grafts)
	JoinsReceived         uint64
	GraftsUnknown         uint64 // asked for, not retained here: nothing sent
	GraftsAbandoned       uint64 // announced broadcasts never received after GraftTries grafts
	Refused               uint64 // tree messages from no member that may send them, or announcements over the bound
	Implausible           uint64 // broadcasts at an epoch their origin cannot have sent (before its start, past this member's clock)
	StateForgotten        uint64 // bookkeeping past its bound
	EncodeErrors          uint64 // frames that did not encode (a bug)
	Peers                 int    // neighbors now
	LazyLinks             int    // (neighbor, tree) pairs pruned
	QueueBytes            int    // pushes queued on links
	RetainedBytes         int    // broadcasts retained for grafts
	Missing               int    // broadcasts announced, not received
	Origins               int    // origins whose delivered broadcasts are remembered
}

// Tree is one member's part of the broadcast trees.
type Tree struct {
	cfg  Config
	view View
	self uint32

	rings    [Rings]ring
	peers    []*peer
	retained map[uint64]*bcast
	fifo     []*bcast // retained, oldest first, from fifoHead
	fifoHead int
	bytes    int // retained frames' bytes
	missing  map[uint64]*missingBcast
	// missingBy counts the missing broadcasts each neighbor's
	// announcements made (MaxMissingPerPeer).
	missingBy map[uint32]int
	keys      map[string]keyMark
	byKey     map[string]*bcast // the retained value of each key
	// firstOf is the identifier of the first broadcast of each origin
	// this member received or made: the one that travelled the shared
	// tree (bounded by maxKeys).
	firstOf   map[string]uint64
	firstEver uint64 // the first broadcast this member received or made
	// via is the neighbor each origin's latest broadcast first came from
	// (bounded by maxKeys): the origins whose trees a suspected neighbor
	// carried to this member (NeighborDown).
	via     map[string]uint32
	flushes uint64 // flushes so far (announcements go every announceEvery)
	// seen holds the windows of the broadcasts delivered, by origin.
	seen map[string]*seenWindows

	stats Stats
	out   Output
}

// New returns the Tree of the member self (its id in view).
func New(cfg Config, view View, self uint32) *Tree {
	return &Tree{
		cfg: cfg, view: view, self: self,
		retained:  make(map[uint64]*bcast),
		missing:   make(map[uint64]*missingBcast),
		missingBy: make(map[uint32]int),
		keys:      make(map[string]keyMark),
		byKey:     make(map[string]*bcast),
		firstOf:   make(map[string]uint64),
		via:       make(map[string]uint32),
		seen:      make(map[string]*seenWindows),
	}
}

// TakeOutput returns what the Tree asked for since the last call.
func (t *Tree) TakeOutput() Output {
	out := t.out
	t.out = Output{}
	return out
}

// Stats returns the counters, and the gauges as they are now.
func (t *Tree) Stats() Stats {
	s := t.stats
	s.Peers = len(t.peers)
	for _, p := range t.peers {
		s.LazyLinks += p.lazyTrees()
		s.QueueBytes += p.pushBytes
	}
	s.RetainedBytes = t.bytes
	s.Missing = len(t.missing)
	s.Origins = len(t.seen)
	return s
}

// armFlush asks for a flush of the links' queues.
func (t *Tree) armFlush(now time.Time) {
	at := now.Add(t.cfg.FlushInterval)
	if t.out.FlushAt.IsZero() || at.Before(t.out.FlushAt) {
		t.out.FlushAt = at
	}
}

// frame encodes msg.
func (t *Tree) frame(msg wire.Message) []byte {
	f, err := wire.AppendFrame(nil, msg)
	if err != nil {
		t.stats.EncodeErrors++
	}
	return f
}
