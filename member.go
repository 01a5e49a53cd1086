package swim

import (
	"fmt"
	"net/netip"
	"time"
)

// State is a member's liveness as one member sees it.
type State uint8

// Member states. Values are part of the wire format (push-pull): never renumber.
const (
	// StateAlive: the member answers probes (or refuted every suspicion).
	StateAlive State = 0
	// StateSuspect: a probe failed; the member has a window to refute (SWIM §4.2).
	StateSuspect State = 1
	// StateDead: the suspicion timed out; the member is considered failed.
	StateDead State = 2
	// StateLeft: the member announced a graceful leave.
	StateLeft State = 3
)

func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateSuspect:
		return "suspect"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Member is one member of the cluster as seen locally. Values returned by
// the API are copies: changing them changes nothing.
type Member struct {
	Name        string
	Addr        netip.AddrPort
	Meta        []byte
	State       State
	Incarnation uint64
	// Versions is what the member announced it speaks: protocol 1 and
	// no application range for a member that predates versioning (or one
	// not heard from directly yet).
	Versions Versions
	// Life identifies the process running under the name: a new one each
	// time a process takes the name (a restart), 0 for a member whose
	// release predates lives. See docs/lives.md.
	Life uint64
}

// Versions is the range of wire protocol versions a member speaks, and the
// range of application versions its application announced
// (Config.AppVersionMin and AppVersionMax, both 0 when none) for its own
// messages and metadata. During a rolling upgrade the application can use
// the ranges of the members it talks to to decide what it may send them.
type Versions struct {
	ProtocolMin, ProtocolMax uint8
	AppMin, AppMax           uint8
}

// EventKind says what happened to a member.
type EventKind uint8

// Event kinds.
const (
	// EventJoin: a member was seen alive for the first time (or again after
	// it had been declared dead or had left).
	EventJoin EventKind = iota + 1
	// EventLeave: a member was declared dead (Member.State == StateDead) or
	// left gracefully (StateLeft).
	EventLeave
	// EventSuspect: a member became suspect.
	EventSuspect
	// EventAlive: a suspect member refuted the suspicion.
	EventAlive
	// EventUpdate: a live member changed its metadata or address.
	EventUpdate
	// EventConflict: another live process claims this member's name, at
	// Member.Addr and Member.Life: it answered a ping sent there in this
	// name. The later started of the two (Config.Admission.NameConflict may
	// decide otherwise) leaves, and its Join returns ErrNameConflict;
	// every member keeps the one it held (docs/lives.md). Reported once
	// per address.
	EventConflict
	// EventPartitioned: the live members this one sees fell, within
	// Config.Partition.Window, below Config.Partition.Share of the most it
	// saw in that window: likely on the minority side of a partition.
	// Member is this member. EventPartitionHealed: they are back to that
	// share of the count before the fall.
	EventPartitioned
	EventPartitionHealed
	// EventRestart: a live member's process was replaced by a new one (a
	// new Member.Life): it lost whatever state it held, and may have moved
	// to a new address (Member.Addr). Rebuild what the application keeps
	// for it; its old connections lead nowhere (docs/lives.md).
	EventRestart
)

func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventSuspect:
		return "suspect"
	case EventAlive:
		return "alive"
	case EventUpdate:
		return "update"
	case EventConflict:
		return "conflict"
	case EventPartitioned:
		return "partitioned"
	case EventPartitionHealed:
		return "partition-healed"
	case EventRestart:
		return "restart"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one membership change. Member is the member's state after it.
//
// Seq numbers a member's events from 1, with no gaps: a consumer that
// sees a gap lost events (Memberlist drops them when the Events handler
// falls EventBuffer behind). Snapshot returns the table with the Seq of
// the last event it reflects, so a consumer can start from a snapshot and
// apply only the events after it, missing none and applying none twice.
// Time is when the event happened (Memberlist sets it; a Machine leaves
// it zero, its driver knows the time).
type Event struct {
	Kind   EventKind
	Member Member
	Seq    uint64
	Time   time.Time
}

// EventHandler receives membership events. Memberlist calls HandleEvent on a
// goroutine of its own, one event at a time, in order; it may call any
// Memberlist method.
type EventHandler interface {
	HandleEvent(Event)
}

// EventFunc adapts a function to EventHandler.
type EventFunc func(Event)

// HandleEvent calls f(e).
func (f EventFunc) HandleEvent(e Event) { f(e) }
