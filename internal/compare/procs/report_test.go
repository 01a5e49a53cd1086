package main

import (
	"strings"
	"testing"
	"time"
)

// TestPrintReportSigned checks the ratios of swim-signed to swim, printed
// when both ran, beside the swim/memberlist column.
func TestPrintReportSigned(t *testing.T) {
	lib := func(name string, cpu, bytes, packets, rss float64) libResult {
		return libResult{Lib: name, Join: 1, JoinMedian: 0.5, Windows: []window{
			{Seconds: 60, CPUms: cpu, Bytes: bytes, Packets: packets, RSSMiB: rss},
		}}
	}
	rep := &report{N: 64, Settle: 40 * time.Second, Windows: 1, Window: time.Minute, Libs: []libResult{
		lib("swim", 1, 100, 1, 8),
		lib("swim-signed", 1.5, 150, 1, 10),
		lib("memberlist", 2, 200, 2, 16),
	}}
	var b strings.Builder
	printReport(&b, rep)
	out := b.String()
	head, signed, ok := strings.Cut(out, "Signed claims required against none (swim-signed / swim):\n")
	if !ok {
		t.Fatalf("no swim-signed / swim ratios in:\n%s", out)
	}
	if !strings.Contains(head, "swim/memberlist") {
		t.Errorf("no swim/memberlist column in:\n%s", out)
	}
	want := []struct{ row, ratio string }{
		{"CPU, ms per member per s", "1.50×"},
		{"bytes per member per s", "1.50×"},
		{"packets per member per s", "1.00×"},
		{"RSS per member", "1.25×"},
	}
	lines := strings.Split(signed, "\n")
	for i, w := range want {
		if i >= len(lines) || !strings.HasPrefix(lines[i], w.row) || !strings.HasSuffix(lines[i], " "+w.ratio) {
			t.Errorf("swim-signed / swim line %d: %q, want %s ... %s", i, lines[min(i, len(lines)-1)], w.row, w.ratio)
		}
	}
	if !strings.Contains(out, "  swim-signed  1: 1.500 / 150.0") {
		t.Errorf("no swim-signed window line in:\n%s", out)
	}

	// Without swim-signed, the report is as before: no such ratios.
	rep.Libs = []libResult{rep.Libs[0], rep.Libs[2]}
	b.Reset()
	printReport(&b, rep)
	if strings.Contains(b.String(), "swim-signed") {
		t.Errorf("swim-signed ratios without swim-signed:\n%s", b.String())
	}
}
