package main

import (
	"fmt"
	"os"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Phases of one cluster's run, for attributing "member declared dead"
// events.
const (
	phaseOff    int32 = iota // starting up or tearing down: events are ignored
	phaseBoot                // joining
	phaseSteady              // converged (or given up on), before any crash
	phaseCrash               // a batch of members was shut down
	phaseLoss                // packet loss injected
	numPhases
)

var phaseNames = [numPhases]string{"off", "bootstrap", "steady", "crash", "loss"}

// recorder receives, from every member of a cluster, the events "member X
// is gone" (memberlist's NotifyLeave, swim's EventLeave) and attributes
// them: to the crash batch (detection times) or, when X is still running, to
// the false deaths of the current phase.
type recorder struct {
	phase atomic.Int32
	n     int

	mu          sync.Mutex
	crashStart  time.Time
	crashed     map[int]int // member index → position in the crash batch
	crashedObs  []bool      // by member index: crashed, its own events no longer count
	knew        [][]bool    // per crashed member, per observer: had it live at the crash
	seen        [][]time.Duration
	seenCount   []int
	falseDeaths [numPhases]int
	falseWho    [numPhases]map[int]bool
}

func newRecorder(n int) *recorder {
	r := &recorder{n: n, crashedObs: make([]bool, n)}
	for i := range r.falseWho {
		r.falseWho[i] = make(map[int]bool)
	}
	return r
}

// nodeName is the member name both libraries use for member i.
func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// nodeIndex inverts nodeName; -1 for a name it did not make.
func nodeIndex(name string) int {
	s, ok := strings.CutPrefix(name, "node-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return i
}

// gone records that observer now considers member dead (or left).
func (r *recorder) gone(observer int, member string) {
	ph := r.phase.Load()
	if ph == phaseOff {
		return
	}
	m := nodeIndex(member)
	if m < 0 || observer < 0 || observer >= r.n {
		return
	}
	at := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.crashedObs[observer] {
		return
	}
	if k, ok := r.crashed[m]; ok {
		if r.knew[k][observer] && r.seen[k][observer] == 0 {
			r.seen[k][observer] = max(at.Sub(r.crashStart), time.Nanosecond)
			r.seenCount[k]++
		}
		return
	}
	r.falseDeaths[ph]++
	r.falseWho[ph][m] = true
	if traceFalse {
		fmt.Fprintf(os.Stderr, "%s false death (%s): %s says %s is gone\n", at.Format("15:04:05.000"), phaseNames[ph], nodeName(observer), member)
	}
}

// traceFalse (-trace) logs every false death as it is reported.
var traceFalse bool

// startCrash declares the crash batch and who knew each of its members;
// call it just before shutting them down.
func (r *recorder) startCrash(batch []int, knew [][]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.knew = knew
	r.crashed = make(map[int]int, len(batch))
	r.seen = make([][]time.Duration, len(batch))
	r.seenCount = make([]int, len(batch))
	for k, m := range batch {
		r.crashed[m] = k
		r.crashedObs[m] = true
		r.seen[k] = make([]time.Duration, r.n)
	}
	r.crashStart = time.Now()
	r.phase.Store(phaseCrash)
}

// crashNeeded returns, per crashed member, how many survivors knew it.
func (r *recorder) crashNeeded() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int, len(r.knew))
	for k, row := range r.knew {
		for _, v := range row {
			if v {
				out[k]++
			}
		}
	}
	return out
}

// crashProgress returns, per crashed member, how many of the survivors that
// knew it know it is gone.
func (r *recorder) crashProgress() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.seenCount...)
}

// crashTimes returns, per crashed member, the time until the last survivor
// (of those that knew it) reported it gone.
func (r *recorder) crashTimes() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]time.Duration, len(r.seen))
	for k, row := range r.seen {
		for _, d := range row {
			out[k] = max(out[k], d)
		}
	}
	return out
}

// falseIn returns the false deaths of a phase: (observer, member) events
// and distinct members.
func (r *recorder) falseIn(ph int32) (events, members int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.falseDeaths[ph], len(r.falseWho[ph])
}

// traceLag reports on stderr, once a second, the worst lateness of a 10 ms
// ticker: how long a goroutine that became runnable waited for a CPU, the
// scheduling delay every member's timers and reads suffered.
func traceLag() {
	var worst time.Duration
	last := time.Now()
	t := time.NewTicker(10 * time.Millisecond)
	rep := last
	for now := range t.C {
		worst = max(worst, now.Sub(last)-10*time.Millisecond)
		last = now
		if now.Sub(rep) >= time.Second {
			if worst >= 100*time.Millisecond {
				fmt.Fprintf(os.Stderr, "%s scheduling delay up to %v\n", now.Format("15:04:05"), worst.Round(time.Millisecond))
			}
			worst = 0
			rep = now
		}
	}
}

// logHeap logs, with -trace, the live heap at the last collection and how
// much of it the collector scans for pointers: the work of every mark phase,
// which takes CPU from the members while it runs.
func logHeap() {
	samples := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/heap:bytes"}, {Name: "/gc/scan/stack:bytes"}}
	rtmetrics.Read(samples)
	val := func(i int) float64 {
		if samples[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0
		}
		return float64(samples[i].Value.Uint64()) / (1 << 20)
	}
	fmt.Fprintf(os.Stderr, "%s   heap: %.0f MiB live, of it %.0f MiB scanned; stacks %.0f MiB\n", time.Now().Format("15:04:05"), val(0), val(1), val(2))
}
