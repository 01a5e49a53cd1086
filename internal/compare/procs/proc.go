package main

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which the kernel's ABI fixes at 100 on every architecture this runs on,
// whatever its internal HZ.
const userHZ = 100

// parseStatCPU returns utime+stime, in clock ticks, from the content of
// /proc/<pid>/stat. For a process (not a thread) they cover all its
// threads, the exited ones included.
func parseStatCPU(stat []byte) (uint64, error) {
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so the fields are counted from the last ")".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no ')' in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// After comm: state(0) ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime(11) stime(12).
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after comm, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat stime: %w", err)
	}
	return utime + stime, nil
}

// parseVmRSS returns VmRSS, in bytes, from the content of
// /proc/<pid>/status.
func parseVmRSS(status []byte) (uint64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status VmRSS: %w", err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("status: no VmRSS line")
}

// machineCPU is the machine's CPU time from the first line of /proc/stat,
// in clock ticks summed over its CPUs.
type machineCPU struct {
	busy  uint64 // user, nice, system, irq, softirq
	steal uint64 // taken by the hypervisor for other guests
}

// parseProcStat returns the machine's CPU time from the content of
// /proc/stat.
func parseProcStat(stat []byte) (machineCPU, error) {
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var v [9]uint64
	for i := 1; i < 9; i++ {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return machineCPU{}, fmt.Errorf("/proc/stat field %d: %w", i, err)
		}
		v[i] = n
	}
	return machineCPU{busy: v[1] + v[2] + v[3] + v[6] + v[7], steal: v[8]}, nil
}

// devCounters are a network device's transmit counters.
type devCounters struct {
	txBytes, txPackets uint64
}

// parseNetDev returns the counters of device dev from the content of
// /proc/<pid>/net/dev, which shows the devices of that process's network
// namespace.
func parseNetDev(netdev []byte, dev string) (devCounters, error) {
	for line := range strings.SplitSeq(string(netdev), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != dev {
			continue
		}
		// Receive: bytes packets errs drop fifo frame compressed
		// multicast; then transmit: bytes(8) packets(9) ...
		f := strings.Fields(rest)
		if len(f) < 10 {
			return devCounters{}, fmt.Errorf("net/dev %s: %d fields, want at least 10", dev, len(f))
		}
		var c devCounters
		var err error
		if c.txBytes, err = strconv.ParseUint(f[8], 10, 64); err != nil {
			return devCounters{}, fmt.Errorf("net/dev %s tx bytes: %w", dev, err)
		}
		if c.txPackets, err = strconv.ParseUint(f[9], 10, 64); err != nil {
			return devCounters{}, fmt.Errorf("net/dev %s tx packets: %w", dev, err)
		}
		return c, nil
	}
	return devCounters{}, fmt.Errorf("net/dev: no device %s", dev)
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
