package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

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
