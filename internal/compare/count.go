package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// counters counts what the members of one cluster sent, through the
// transport wrappers of either library, and injects packet loss. One
// counters is shared by all members of a cluster: the figures are totals,
// divided by N for the table.
type counters struct {
	udpBytes   atomic.Uint64 // bytes of packets handed to the socket
	udpPackets atomic.Uint64
	tcpBytes   atomic.Uint64 // bytes written to streams, by both ends
	streams    atomic.Uint64 // streams opened (dialled)
	dropped    atomic.Uint64 // packets discarded by the injected loss
	loss       atomic.Uint64 // math.Float64bits of the fraction of packets to drop
}

// traffic is a snapshot of counters.
type traffic struct {
	UDPBytes, UDPPackets, TCPBytes, Streams, Dropped uint64
}

func (c *counters) snapshot() traffic {
	return traffic{
		UDPBytes:   c.udpBytes.Load(),
		UDPPackets: c.udpPackets.Load(),
		TCPBytes:   c.tcpBytes.Load(),
		Streams:    c.streams.Load(),
		Dropped:    c.dropped.Load(),
	}
}

func (t traffic) sub(u traffic) traffic {
	return traffic{
		UDPBytes:   t.UDPBytes - u.UDPBytes,
		UDPPackets: t.UDPPackets - u.UDPPackets,
		TCPBytes:   t.TCPBytes - u.TCPBytes,
		Streams:    t.Streams - u.Streams,
		Dropped:    t.Dropped - u.Dropped,
	}
}

// setLoss makes drop discard the fraction p of outgoing packets (0 turns the
// loss off). Streams are never affected.
func (c *counters) setLoss(p float64) { c.loss.Store(math.Float64bits(p)) }

// drop reports whether the packet about to be sent is to be lost, and counts
// it if so. A dropped packet is not counted as sent.
func (c *counters) drop() bool {
	p := math.Float64frombits(c.loss.Load())
	if p <= 0 || rand.Float64() >= p {
		return false
	}
	c.dropped.Add(1)
	return true
}

// sent counts one packet handed to the socket.
func (c *counters) sent(n int) {
	c.udpBytes.Add(uint64(n))
	c.udpPackets.Add(1)
}

// countingConn counts the bytes written to a stream.
type countingConn struct {
	net.Conn
	c *counters
}

func (cc *countingConn) Write(b []byte) (int, error) {
	n, err := cc.Conn.Write(b)
	cc.c.tcpBytes.Add(uint64(n))
	return n, err
}

// counterSource is a member that exposes its library's counters (swim).
type counterSource interface {
	counters() map[string]uint64
}

// sumCounters adds up the counters of the members that expose them.
func sumCounters(ms []member) map[string]uint64 {
	sum := map[string]uint64{}
	for _, m := range ms {
		if cs, ok := m.(counterSource); ok {
			for k, v := range cs.counters() {
				sum[k] += v
			}
		}
	}
	return sum
}

// subCounters returns a's counters less b's, for the traffic of a phase.
func subCounters(a, b map[string]uint64) map[string]uint64 {
	d := make(map[string]uint64, len(a))
	for k, v := range a {
		d[k] = v - b[k]
	}
	return d
}

// logCounters logs the non-zero totals of sumCounters on one line each,
// sorted by name, with their rate per member per second over d.
func logCounters(logf func(string, ...any), what string, sum map[string]uint64, n int, d time.Duration) {
	names := make([]string, 0, len(sum))
	for k, v := range sum {
		if v > 0 {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%d (%.2f/member/s)", k, sum[k], float64(sum[k])/float64(n)/d.Seconds())
	}
	logf("  counters, %s:%s", what, b.String())
}
