package main

import "testing"

func TestParseStatCPU(t *testing.T) {
	// A comm with a space and a ")" of its own: the fields count from
	// the last one.
	stat := []byte("4242 (a) b) S 1 4242 4242 0 -1 4194560 1033 0 0 0 17 5 0 0 20 0 6 0 123 1234 567\n")
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 22 {
		t.Fatalf("utime+stime = %d, want 17+5", got)
	}
	if _, err := parseStatCPU([]byte("4242 (a) S 1 2")); err == nil {
		t.Fatal("a truncated stat parsed")
	}
}

func TestParseVmRSS(t *testing.T) {
	status := []byte("Name:\tagent\nVmPeak:\t  99999 kB\nVmRSS:\t    7168 kB\nThreads:\t5\n")
	got, err := parseVmRSS(status)
	if err != nil {
		t.Fatal(err)
	}
	if got != 7168*1024 {
		t.Fatalf("VmRSS = %d bytes, want %d", got, 7168*1024)
	}
	if _, err := parseVmRSS([]byte("Name:\tkthread\n")); err == nil {
		t.Fatal("a status without VmRSS parsed")
	}
}

func TestParseNetDev(t *testing.T) {
	netdev := []byte(`Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1280      10    0    0    0     0          0         0     1281      11    0    0    0     0       0          0
  eth0: 5 6 0 0 0 0 0 0 7 8 0 0 0 0 0 0
`)
	got, err := parseNetDev(netdev, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if got != (devCounters{txBytes: 1281, txPackets: 11}) {
		t.Fatalf("lo = %+v, want tx 1281 bytes, 11 packets", got)
	}
	if _, err := parseNetDev(netdev, "eth1"); err == nil {
		t.Fatal("a missing device parsed")
	}
}

func TestParseProcStat(t *testing.T) {
	stat := []byte("cpu  1000 10 200 5000 60 7 30 40 0 0\ncpu0 500 5 100 2500 30 3 15 20 0 0\n")
	got, err := parseProcStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != (machineCPU{busy: 1000 + 10 + 200 + 7 + 30, steal: 40}) {
		t.Fatalf("got %+v", got)
	}
	if _, err := parseProcStat([]byte("intr 1 2 3\n")); err == nil {
		t.Fatal("a /proc/stat without its cpu line parsed")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
