package swim

import (
	"math/rand/v2"
	"net/netip"
	"time"
)

// TEMPORARY: replaced by the real core. Signatures are fixed.

type machineState struct{}

func (m *Machine) init(cfg *Config, addr netip.AddrPort, rng *rand.Rand, now time.Time) {}

// HandlePacket processes one received UDP packet from the given address.
// A malformed packet is dropped, counted, and reported as an error.
func (m *Machine) HandlePacket(now time.Time, from netip.AddrPort, data []byte) error { panic("todo") }

// HandleStream processes one stream request (a push-pull) received from a
// peer and returns the reply message to write back.
func (m *Machine) HandleStream(now time.Time, from netip.AddrPort, req []byte) ([]byte, error) {
	panic("todo")
}

// HandleStreamResponse reports the outcome of a StreamRequest: the reply, or
// the error that ended the exchange. It returns nil when the reply was merged.
func (m *Machine) HandleStreamResponse(now time.Time, id uint64, resp []byte, err error) error {
	panic("todo")
}

// Tick fires every timer due at now.
func (m *Machine) Tick(now time.Time) { panic("todo") }

// NextDeadline is when Tick must next be called; zero means no timer is armed.
func (m *Machine) NextDeadline() time.Time { panic("todo") }

// Ready returns and clears the outputs accumulated so far.
func (m *Machine) Ready() Ready { panic("todo") }

// Join starts a push-pull join with each seed and returns the IDs of the
// StreamRequests it queued; their HandleStreamResponse results say which
// seeds answered. The seeds are remembered and retried while this member is
// alone (partition healing).
func (m *Machine) Join(now time.Time, seeds []netip.AddrPort) []uint64 { panic("todo") }

// Leave announces a graceful leave. LeaveDone reports when it was sent.
func (m *Machine) Leave(now time.Time) error { panic("todo") }

// LeaveDone reports whether the leave announcement has been sent enough
// times (or there is nobody to tell).
func (m *Machine) LeaveDone() bool { panic("todo") }

// UpdateMeta changes this member's metadata and gossips it.
func (m *Machine) UpdateMeta(now time.Time, meta []byte) error { panic("todo") }

// Members returns every member known, this one included, dead and left ones
// still remembered included, sorted by name.
func (m *Machine) Members() []Member { panic("todo") }

// LocalMember returns this member.
func (m *Machine) LocalMember() Member { panic("todo") }

// NumMembers counts the live (alive or suspect) members, this one included.
func (m *Machine) NumMembers() int { panic("todo") }

// Version increases whenever the member table changes, so a driver can
// refresh its snapshot only then.
func (m *Machine) Version() uint64 { panic("todo") }

// Stats returns the counters.
func (m *Machine) Stats() Stats { panic("todo") }

// Stats are cumulative counters of one member.
type Stats struct {
	PacketsSent, PacketsReceived uint64
	BytesSent, BytesReceived     uint64
	PacketsDropped               uint64 // malformed or unknown
	Probes, ProbesFailed         uint64
	PingReqsSent, PingReqsServed uint64
	SuspicionsRaised             uint64
	Refutations                  uint64
	DeathsDeclared               uint64
	BroadcastsDropped            uint64 // queue over BroadcastQueueLimit
	PushPulls, PushPullsFailed   uint64
	Reconnects                   uint64
}
