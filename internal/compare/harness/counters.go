package harness

import (
	"math"
	"math/rand/v2"
	"net"
	"sync/atomic"
)

// Counters counts what the members of one cluster sent, through the
// transport wrappers of either library, and injects packet loss. One
// Counters is shared by all members of a cluster: the figures are totals,
// divided by N for the tables.
type Counters struct {
	udpBytes   atomic.Uint64 // bytes of packets handed to the socket
	udpPackets atomic.Uint64
	tcpBytes   atomic.Uint64 // bytes written to streams, by both ends
	streams    atomic.Uint64 // streams opened (dialled)
	dropped    atomic.Uint64 // packets discarded by the injected loss
	loss       atomic.Uint64 // math.Float64bits of the fraction of packets to drop
}

// Traffic is a snapshot of Counters.
type Traffic struct {
	UDPBytes, UDPPackets, TCPBytes, Streams, Dropped uint64
}

// Snapshot returns the counts so far.
func (c *Counters) Snapshot() Traffic {
	return Traffic{
		UDPBytes:   c.udpBytes.Load(),
		UDPPackets: c.udpPackets.Load(),
		TCPBytes:   c.tcpBytes.Load(),
		Streams:    c.streams.Load(),
		Dropped:    c.dropped.Load(),
	}
}

// Sub returns t less u: the traffic between two snapshots.
func (t Traffic) Sub(u Traffic) Traffic {
	return Traffic{
		UDPBytes:   t.UDPBytes - u.UDPBytes,
		UDPPackets: t.UDPPackets - u.UDPPackets,
		TCPBytes:   t.TCPBytes - u.TCPBytes,
		Streams:    t.Streams - u.Streams,
		Dropped:    t.Dropped - u.Dropped,
	}
}

// SetLoss makes the wrappers discard the fraction p of outgoing packets (0
// turns the loss off). Streams are never affected.
func (c *Counters) SetLoss(p float64) { c.loss.Store(math.Float64bits(p)) }

// drop reports whether the packet about to be sent is to be lost, and
// counts it if so. A dropped packet is not counted as sent.
func (c *Counters) drop() bool {
	p := math.Float64frombits(c.loss.Load())
	if p <= 0 || rand.Float64() >= p {
		return false
	}
	c.dropped.Add(1)
	return true
}

// sent counts one packet handed to the socket.
func (c *Counters) sent(n int) {
	c.udpBytes.Add(uint64(n))
	c.udpPackets.Add(1)
}

// dialled counts a stream opened and wraps it.
func (c *Counters) dialled(conn net.Conn) net.Conn {
	c.streams.Add(1)
	return c.wrap(conn)
}

// wrap counts the bytes written to conn. Wrapping both the dialled and
// the accepted ends counts both directions of an exchange, each once, as
// its sender's.
func (c *Counters) wrap(conn net.Conn) net.Conn { return &countingConn{Conn: conn, c: c} }

type countingConn struct {
	net.Conn
	c *Counters
}

func (cc *countingConn) Write(b []byte) (int, error) {
	n, err := cc.Conn.Write(b)
	cc.c.tcpBytes.Add(uint64(n))
	return n, err
}
