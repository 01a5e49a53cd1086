package harness

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system) this process has used.
// Every member of a comparison runs in it, so its growth over a phase,
// divided by N, is the CPU per member, harness included (the same small
// share for both libraries).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// UDPReceiveDrops is the host's count of UDP datagrams dropped because a
// socket's receive buffer was full (RcvbufErrors in /proc/net/snmp), false
// where the system has no such file. A member whose reader falls behind
// loses packets this way without any sender knowing, which the simulator
// does not model.
func UDPReceiveDrops() (uint64, bool) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, false
	}
	var header []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, name := range header {
			if name == "RcvbufErrors" && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}
