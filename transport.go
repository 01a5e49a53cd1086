package swim

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// Transport carries swim's traffic: unreliable packets (UDP-like) for probes
// and gossip, and reliable streams (TCP-like) for state exchange. Memberlist
// uses a NetTransport unless Config.Transport supplies another.
type Transport interface {
	// LocalAddr is the address peers should use to reach this member.
	LocalAddr() netip.AddrPort
	// WriteTo sends one packet. It must not block for long; a packet that
	// cannot be sent is dropped (the protocol tolerates loss).
	WriteTo(b []byte, to netip.AddrPort) error
	// Packets delivers received packets. The channel is closed by Close.
	Packets() <-chan IncomingPacket
	// DialStream opens a stream to a peer.
	DialStream(ctx context.Context, to netip.AddrPort) (net.Conn, error)
	// Streams delivers accepted streams. The channel is closed by Close.
	Streams() <-chan net.Conn
	// Close stops the transport; it returns when its goroutines have ended.
	Close() error
}

// IncomingPacket is one received packet.
type IncomingPacket struct {
	From netip.AddrPort
	Data []byte
	At   time.Time // when it was read off the socket
}
