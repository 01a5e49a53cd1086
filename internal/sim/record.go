package sim

import (
	"fmt"
	"time"

	"github.com/swim-go/swim"
)

// Record is one membership event as a node reported it, at virtual time At.
type Record struct {
	At       time.Time
	Observer string // the node whose Ready carried the event
	Event    swim.Event
}

func (r Record) String() string {
	return fmt.Sprintf("%s %s: %s %s (%s, inc %d)", r.At.Sub(Epoch), r.Observer,
		r.Event.Kind, r.Event.Member.Name, r.Event.Member.State, r.Event.Member.Incarnation)
}

// Log is a sequence of Records in the order they happened. Its methods
// return filtered copies and chain: c.Log().About("n3").Kind(swim.EventLeave).
type Log []Record

// Filter returns the records for which keep is true.
func (l Log) Filter(keep func(Record) bool) Log {
	var out Log
	for _, r := range l {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// By returns the records observed by the named node.
func (l Log) By(observer string) Log {
	return l.Filter(func(r Record) bool { return r.Observer == observer })
}

// About returns the records whose event concerns the named member.
func (l Log) About(member string) Log {
	return l.Filter(func(r Record) bool { return r.Event.Member.Name == member })
}

// Kind returns the records of events of kind k.
func (l Log) Kind(k swim.EventKind) Log {
	return l.Filter(func(r Record) bool { return r.Event.Kind == k })
}

// State returns the records whose member ended in state s (EventLeave with
// StateDead is a failure, with StateLeft a graceful leave).
func (l Log) State(s swim.State) Log {
	return l.Filter(func(r Record) bool { return r.Event.Member.State == s })
}

// Since returns the records at or after t.
func (l Log) Since(t time.Time) Log {
	return l.Filter(func(r Record) bool { return !r.At.Before(t) })
}

// Observers returns the distinct observers, in order of first appearance.
func (l Log) Observers() []string {
	seen := make(map[string]bool)
	var out []string
	for _, r := range l {
		if !seen[r.Observer] {
			seen[r.Observer] = true
			out = append(out, r.Observer)
		}
	}
	return out
}

// First returns the earliest record, if any.
func (l Log) First() (Record, bool) {
	if len(l) == 0 {
		return Record{}, false
	}
	return l[0], true
}

// Last returns the latest record, if any.
func (l Log) Last() (Record, bool) {
	if len(l) == 0 {
		return Record{}, false
	}
	return l[len(l)-1], true
}

// Counters are the network's cumulative counts. Every packet sent ends up
// delivered, dropped for one cause, or still in flight.
type Counters struct {
	PacketsSent, BytesSent           uint64 // packets nodes handed to the network
	PacketsDelivered, BytesDelivered uint64 // packets handed to a node's HandlePacket

	DroppedLoss      uint64 // random loss, uniform or bursty
	DroppedPartition uint64 // partition or one-way block at send time
	DroppedDown      uint64 // the destination was crashed when the packet arrived
	DroppedUnknown   uint64 // no node has the destination address

	StreamsStarted   uint64
	StreamsSucceeded uint64 // the client got a reply
	StreamsFailed    uint64 // the client got an error (timeouts included)
	StreamTimeouts   uint64 // the client got ErrStreamTimeout

	// HandleErrors counts errors returned by HandlePacket and HandleStream,
	// and by HandleStreamResponse for a reply (errors it returns for a
	// failed stream are expected and not counted).
	HandleErrors uint64

	Events uint64 // queue events processed, stale ones included
}

// Dropped is the total of packets dropped, whatever the cause.
func (c Counters) Dropped() uint64 {
	return c.DroppedLoss + c.DroppedPartition + c.DroppedDown + c.DroppedUnknown
}

// NodeCounters are one node's packet counts, across restarts.
type NodeCounters struct {
	PacketsSent, BytesSent         uint64
	PacketsReceived, BytesReceived uint64
}
