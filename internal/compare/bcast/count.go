package main

import (
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// sentBytes counts what the members of one cluster send, through the
// transport wrappers of either library: one is shared by every member, so
// its figures are the cluster's totals.
type sentBytes struct {
	udp     atomic.Uint64 // bytes of packets handed to the socket
	packets atomic.Uint64
	tcp     atomic.Uint64 // bytes written to streams, dialled or accepted
}

// byteCount is a snapshot of sentBytes.
type byteCount struct{ UDP, Packets, TCP uint64 }

func (s *sentBytes) snapshot() byteCount {
	return byteCount{UDP: s.udp.Load(), Packets: s.packets.Load(), TCP: s.tcp.Load()}
}

func (b byteCount) sub(a byteCount) byteCount {
	return byteCount{UDP: b.UDP - a.UDP, Packets: b.Packets - a.Packets, TCP: b.TCP - a.TCP}
}

// packet counts one datagram sent.
func (s *sentBytes) packet(n int) {
	s.udp.Add(uint64(n))
	s.packets.Add(1)
}

// countedConn counts the bytes written to a stream. Wrapping both the
// dialled and the accepted ends counts both directions of an exchange, each
// once, as its sender's.
type countedConn struct {
	net.Conn
	s *sentBytes
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.s.tcp.Add(uint64(n))
	return n, err
}

// processCPU is the CPU time (user and system) this process has used: every
// member runs in it, so its growth over the load, divided by N, is the CPU
// per member, harness included (the same small share for both libraries).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// udpRcvbufErrors is the host's count of datagrams dropped because a
// socket's receive buffer was full (RcvbufErrors in /proc/net/snmp), false
// where it cannot be read. It is host-wide: other processes' drops count
// too, so it is a hint, not a figure of the run.
func udpRcvbufErrors() (uint64, bool) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, false
	}
	var names []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil { // the first Udp: line names the columns
			names = f
			continue
		}
		for i, name := range names {
			if name == "RcvbufErrors" && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}

// sumUintFields adds the uint64 fields of the struct v, and of the structs
// it embeds, to sum by name. swim's counters are read this way rather than
// field by field so that the command keeps building while the library's
// Stats gains or renames counters; a counter it does not have reads 0.
func sumUintFields(sum map[string]uint64, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		switch {
		case t.Field(i).Anonymous && f.Kind() == reflect.Struct:
			sumUintFields(sum, f)
		case f.Kind() == reflect.Uint64:
			sum[t.Field(i).Name] += f.Uint()
		}
	}
}
