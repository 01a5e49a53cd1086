package swim

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"
)

// heapInUse returns, after a full collection, the bytes of heap objects and
// the bytes of heap the collector has to scan for pointers. It collects
// twice: what earlier tests left in sync.Pools survives one collection in
// the pools' victim caches, and freed between two readings it would make
// the second smaller than the first.
func heapInUse() (objects, scannable uint64) {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// tableMemory builds machines Machines, each with a Registry of its own (as
// members made by New have), each knowing the same n members, and returns
// the heap bytes and scannable heap bytes per entry once the news of the
// merge (events, broadcasts) has been drained: what a process running many
// members holds in the steady state.
func tableMemory(tb testing.TB, machines, n int) (perEntry, scanPerEntry float64) {
	data := largePushPull(tb, n)
	cfg := mtConfig()
	o0, s0 := heapInUse()
	ms := make([]*Machine, 0, machines)
	for i := range machines {
		m, err := NewMachine(cfg, mtSelfAddr, rand.New(rand.NewPCG(uint64(i), 2)), mtStart)
		require.NoError(tb, err)
		// The answer to a join: believed at once (newcomers.go).
		ids := m.Join(mtStart, []netip.AddrPort{mtSeedAddr})
		require.NoError(tb, m.HandleStreamResponse(mtStart, ids[0], data, nil))
		for len(m.merges) > 0 {
			m.Tick(mtStart)
		}
		require.Equal(tb, n+1, m.NumMembers())
		m.Ready()
		m.bq = newPiggybackQueue(cfg.DeltaQueueLimit, 0)
		ms = append(ms, m)
	}
	o1, s1 := heapInUse()
	runtime.KeepAlive(ms)
	entries := float64(machines * (n + 1))
	// Signed: the tables' scannable bytes are few, and what the rest of
	// the process freed meanwhile can outweigh them; as unsigned the
	// difference would wrap to an absurd figure.
	return float64(int64(o1-o0)) / entries, float64(int64(s1-s0)) / entries
}

// BenchmarkTableMemory reports the heap a member's table costs per entry,
// and how much of it the garbage collector scans, at 4,096 members.
func BenchmarkTableMemory(b *testing.B) {
	var per, scan float64
	for range b.N {
		per, scan = tableMemory(b, 16, 4096)
	}
	b.ReportMetric(per, "B/entry")
	b.ReportMetric(scan, "scan-B/entry")
}

// TestTableHoldsFewPointers: the entries of a table, and the identities
// its Registry interns, are stored without a pointer each, so that a
// process running thousands of members does not hand the collector
// millions of objects to trace. The bound leaves room for the table's
// chunks and the ring's blocks, a few bytes an entry.
func TestTableHoldsFewPointers(t *testing.T) {
	per, scan := tableMemory(t, 8, 2048)
	t.Logf("%.0f B per entry, %.1f of them scanned", per, scan)
	require.Less(t, scan, 16.0, "scannable heap bytes per entry")
}
