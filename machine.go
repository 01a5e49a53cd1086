package swim

import (
	"math/rand/v2"
	"net/netip"
	"time"
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
// concurrent use: one goroutine owns it.
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
}

// IsEmpty reports whether there is nothing to act on.
func (r *Ready) IsEmpty() bool {
	return len(r.Packets) == 0 && len(r.Streams) == 0 && len(r.Events) == 0
}

// NewMachine returns the core of the member cfg describes, reachable at
// addr. cfg is validated and must not be changed afterwards. rng is the only
// source of randomness.
func NewMachine(cfg *Config, addr netip.AddrPort, rng *rand.Rand, now time.Time) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Machine{}
	m.init(cfg, addr, rng, now)
	return m, nil
}
