package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swim-go/swim/internal/compare/harness"
)

// library starts members of one implementation.
type library interface {
	name() string
	// start creates member i on 127.0.0.1 (a free port), alone, reporting
	// to rec and counting its traffic in c, with the settings of p:
	// p.matched selects the matched settings instead of the library's own
	// LAN defaults, p.encrypted turns on encryption and the label.
	start(i int, c *harness.Counters, rec *recorder, p plan) (member, error)
}

// member is one running member of either library.
type member interface {
	address() string
	numMembers() int
	join(ctx context.Context, seed string) error
	shutdown() error // without leaving: a crash, as far as the others can tell
	dropped() uint64 // events the library discarded (swim: EventsDropped)
	liveNames() []string
}

// plan says what one cluster run does.
type plan struct {
	n         int
	matched   bool
	encrypted bool          // encryption and a label on (-encrypt)
	bootBound time.Duration // 0 means opts.bootBound(n)
	window    time.Duration // steady-state measurement
	crash     bool
	loss      float64 // 0: no loss scenario
}

// settings names the run's settings in results.
func (p plan) settings() string {
	if p.encrypted {
		return settingsEncrypted
	}
	return settingsName(p.matched)
}

// The encryption of -encrypt: one fixed key on every member of both
// libraries (AES-256: memberlist picks the AES variant from the key's
// length, as swim does), and a label.
var (
	testKey   = []byte("swim compare: fixed test key 32B")
	testLabel = "swim-compare"
)

// result is what one cluster run measured. Durations are in seconds.
type result struct {
	Library  string `json:"library"`
	N        int    `json:"n"`
	Settings string `json:"settings"`
	Error    string `json:"error,omitempty"`

	Converged        bool    `json:"converged"`
	BootSeconds      float64 `json:"bootstrap_s,omitempty"`
	BootBound        float64 `json:"bootstrap_bound_s"`
	SeenMin          int     `json:"seen_min"`            // at convergence or at the bound
	SeenMedian       int     `json:"seen_median"`         // idem
	JoinsFailed      int     `json:"joins_failed"`        // members whose join failed at least once
	Joined           int     `json:"joins_done"`          // joins that succeeded (of N-1)
	BootPackets      uint64  `json:"bootstrap_packets"`   // UDP packets sent from the first join until convergence or the bound
	BootTCPBytes     uint64  `json:"bootstrap_tcp_bytes"` // bytes written to streams meanwhile
	SeenMinSteady    int     `json:"seen_min_after_window"`
	SeenMedianSteady int     `json:"seen_median_after_window"`

	FalseBoot        int `json:"false_deaths_bootstrap"` // (observer, member) events
	FalseBootWho     int `json:"false_dead_members_bootstrap"`
	FalseSteady      int `json:"false_deaths_steady"`
	FalseSteadyWho   int `json:"false_dead_members_steady"`
	WindowSeconds    float64
	CPUMsPerNodeSec  float64 `json:"cpu_ms_per_node_per_s"`
	BytesPerNodeSec  float64 `json:"bytes_per_node_per_s"`
	UDPBytesNodeSec  float64 `json:"udp_bytes_per_node_per_s"`
	TCPBytesNodeSec  float64 `json:"tcp_bytes_per_node_per_s"`
	PacketsNodeSec   float64 `json:"packets_per_node_per_s"`
	HeapPerNode      float64 `json:"heap_inuse_per_node_bytes"`
	StackPerNode     float64 `json:"stack_inuse_per_node_bytes"`
	GoroutinesPerNod float64 `json:"goroutines_per_node"`

	CrashRun       bool    `json:"crash_run"`
	Crashed        int     `json:"crashed"`
	CrashP50       float64 `json:"crash_all_know_p50_s,omitempty"`
	CrashMax       float64 `json:"crash_all_know_max_s,omitempty"`
	CrashComplete  bool    `json:"crash_all_known"`
	CrashKnewPct   float64 `json:"crash_knew_pairs_pct"`  // (crashed, survivor) pairs where the survivor had the member live at the crash
	CrashKnownPct  float64 `json:"crash_known_pairs_pct"` // of those pairs, reported gone by the end
	CrashBound     float64 `json:"crash_bound_s"`
	FalseCrash     int     `json:"false_deaths_crash"`
	FalseCrashWho  int     `json:"false_dead_members_crash"`
	LossRun        bool    `json:"loss_run"`
	Loss           float64 `json:"loss"`
	LossSeconds    float64 `json:"loss_window_s"`
	FalseLoss      int     `json:"false_deaths_loss"`
	FalseLossWho   int     `json:"false_dead_members_loss"`
	LossDropped    uint64  `json:"loss_packets_dropped"`
	SeenMinLoss    int     `json:"seen_min_after_loss"`
	SeenMedianLoss int     `json:"seen_median_after_loss"`
	EventsDropped  uint64  `json:"events_dropped"`
	LeftGoroutines int     `json:"goroutines_left_after_shutdown"`
	HeapLeftAfter  uint64  `json:"heap_left_after_shutdown_bytes"` // over the starting point, once the drain bound passed
	WallSeconds    float64 `json:"wall_s"`
}

// stable is the search's criterion, "holds N without flapping": every join
// succeeded, nobody was declared dead wrongly while joining or over the
// window, and at its end the median member saw all N. Full convergence
// within the bound is reported apart: a member that missed a rumor waits
// for anti-entropy (memberlist's first periodic push-pull comes 60-210 s
// after start), which is slow, not unstable.
func (r *result) stable() bool {
	return r.Error == "" && r.Joined == r.N-1 && r.FalseBoot == 0 && r.FalseSteady == 0 && r.SeenMedianSteady == r.N
}

// nearly says whether the crash and loss scenarios can run: every join
// succeeded and the median member sees all N.
func (r *result) nearly() bool {
	return r.Converged || (r.Joined == r.N-1 && r.SeenMedian == r.N)
}

// seen returns the minimum and median of the members' member counts.
func seen(ms []member) (lo, med int) {
	if len(ms) == 0 {
		return 0, 0
	}
	counts := make([]int, len(ms))
	for i, m := range ms {
		counts[i] = m.numMembers()
	}
	slices.Sort(counts)
	return counts[0], counts[len(counts)/2]
}

// seenWithin is seen, giving up (ok false) after d: memberlist's
// NumMembers waits for a lock that an overloaded member may hold for long.
func seenWithin(ms []member, d time.Duration) (lo, med int, ok bool) {
	type counts struct{ lo, med int }
	ch := make(chan counts, 1)
	go func() {
		lo, med := seen(ms)
		ch <- counts{lo, med}
	}()
	select {
	case c := <-ch:
		return c.lo, c.med, true
	case <-time.After(d):
		return -1, -1, false
	}
}

func settleGC() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// runCluster runs one cluster of lib through the plan, then shuts it down
// and waits for its goroutines.
func runCluster(lib library, p plan, o *options) (res result) {
	wall := time.Now()
	res = result{Library: lib.name(), N: p.n, Settings: p.settings()}
	defer func() { res.WallSeconds = time.Since(wall).Seconds() }()
	logf := o.logf

	g0 := runtime.NumGoroutine()
	mem0 := settleGC()
	c := &harness.Counters{}
	rec := newRecorder(p.n)

	members := make([]member, 0, p.n)
	var wg sync.WaitGroup     // the join workers
	var pollWG sync.WaitGroup // the bootstrap poller
	defer func() {
		rec.phase.Store(phaseOff)
		shutdownMembers(members)
		wg.Wait()     // joins still in flight end once their member is shut down
		pollWG.Wait() // and so does a count in progress
		for _, m := range members {
			res.EventsDropped += m.dropped() // after Shutdown: final counters, no wait for a busy loop
		}
		members = nil
		res.LeftGoroutines = harness.WaitGoroutines(g0, 60*time.Second)
		if res.LeftGoroutines > 0 {
			logf("  %d goroutines still running after shutdown", res.LeftGoroutines)
		}
		// Timers a library left pending (memberlist's suspicion timers,
		// up to a minute or two) keep its members reachable, and fire
		// into the next run: wait until the heap is back near where this
		// run started, so that the next run's baseline is clean.
		res.HeapLeftAfter = drainHeap(mem0.HeapInuse, 120*time.Second)
		if res.HeapLeftAfter > 0 {
			logf("  heap still %.1f MiB over its starting point after shutdown", float64(res.HeapLeftAfter)/(1<<20))
		}
	}()
	for i := range p.n {
		m, err := lib.start(i, c, rec, p)
		if err != nil {
			res.Error = fmt.Sprintf("start member %d: %v", i, err)
			return res
		}
		members = append(members, m)
	}

	// Bootstrap: everyone joins through member 0, joinPar at a time; a
	// failed join is retried until the bound.
	bound := p.bootBound
	if bound == 0 {
		bound = o.bootBoundFor(p.n)
	}
	res.BootBound = bound.Seconds()
	rec.phase.Store(phaseBoot)
	t0, boot0 := time.Now(), c.Snapshot()
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(bound))
	defer cancel()
	seed := members[0].address()
	var joinsFailed sync.Map
	var joined atomic.Int64
	next := make(chan member)
	for range o.joinPar {
		wg.Go(func() {
			for m := range next {
				for ctx.Err() == nil {
					jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
					err := m.join(jctx, seed)
					jcancel()
					if err == nil {
						joined.Add(1)
						break
					}
					joinsFailed.Store(m, true)
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		})
	}
	go func() {
		defer close(next)
		var gap <-chan time.Time
		if o.joinRate > 0 {
			t := time.NewTicker(time.Duration(float64(time.Second) / o.joinRate))
			defer t.Stop()
			gap = t.C
		}
		for _, m := range members[1:] {
			if gap != nil {
				select {
				case <-gap:
				case <-ctx.Done():
					return
				}
			}
			select {
			case next <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	// The poller counts members in a goroutine of its own: memberlist's
	// NumMembers takes a lock that an overloaded member may hold for long,
	// and the bounds must hold regardless.
	type poll struct{ lo, med int }
	polls := make(chan poll, 1)
	pollStop := make(chan struct{})
	pollWG.Go(func() {
		for {
			lo, med := seen(members)
			select {
			case polls <- poll{lo, med}:
			case <-pollStop:
				return
			}
			select {
			case <-time.After(o.poll):
			case <-pollStop:
				return
			}
		}
	})
	tick := time.NewTicker(o.poll)
	lastLog, lastTraffic := t0, c.Snapshot()
	lastDrops, _ := harness.UDPReceiveDrops()
	var last poll
bootstrap:
	for {
		select {
		case last = <-polls:
			res.SeenMin, res.SeenMedian = last.lo, last.med
			if last.lo == p.n {
				res.Converged = true
				res.BootSeconds = time.Since(t0).Seconds()
				break bootstrap
			}
		case <-tick.C:
		}
		if since := time.Since(lastLog); since > 10*time.Second {
			tr := c.Snapshot()
			d := tr.Sub(lastTraffic)
			logf("  %.0fs: %d of %d joins done; members seen min %d, median %d of %d; %.0f packets/s, %.1f MB/s over streams",
				time.Since(t0).Seconds(), joined.Load(), p.n-1, last.lo, last.med, p.n,
				float64(d.UDPPackets)/since.Seconds(), float64(d.TCPBytes)/since.Seconds()/1e6)
			lastLog, lastTraffic = time.Now(), tr
			if traceFalse {
				logHeap()
				if drops, ok := harness.UDPReceiveDrops(); ok {
					logf("  %d datagrams dropped by full receive buffers since the last line", drops-lastDrops)
					lastDrops = drops
				}
			}
		}
		if time.Since(t0) >= bound {
			break
		}
	}
	tick.Stop()
	bootTraffic := c.Snapshot().Sub(boot0)
	close(pollStop)
	cancel()
	// memberlist's Join takes no context: give joins in flight a while,
	// and wait for the rest at teardown.
	joinsDone := make(chan struct{})
	go func() { wg.Wait(); close(joinsDone) }()
	select {
	case <-joinsDone:
	case <-time.After(20 * time.Second):
		logf("  joins still in flight 20s after the bound; going on")
	}
	joinsFailed.Range(func(any, any) bool { res.JoinsFailed++; return true })
	res.Joined = int(joined.Load())
	res.FalseBoot, res.FalseBootWho = rec.falseIn(phaseBoot)
	res.BootPackets, res.BootTCPBytes = bootTraffic.UDPPackets, bootTraffic.TCPBytes
	if res.Converged {
		logf("  converged in %.1fs", res.BootSeconds)
	} else {
		logf("  did not converge in %v: %d of %d joins done, members seen min %d, median %d of %d", bound, res.Joined, p.n-1, res.SeenMin, res.SeenMedian, p.n)
	}
	if traceFalse {
		// Up to the end of the joins still in flight at the bound.
		logCounters(logf, "bootstrap", sumCounters(members), p.n, time.Since(t0))
	}
	logf("  bootstrap sent %d packets (%.1f MB) and %.1f MB over streams", bootTraffic.UDPPackets, float64(bootTraffic.UDPBytes)/1e6, float64(bootTraffic.TCPBytes)/1e6)

	// Steady state: settle, then measure CPU and traffic over the window.
	rec.phase.Store(phaseSteady)
	time.Sleep(o.settle)
	var sum0 map[string]uint64
	if traceFalse {
		sum0 = sumCounters(members)
	}
	tr0, cpu0 := c.Snapshot(), harness.ProcessCPU()
	drops0, _ := harness.UDPReceiveDrops()
	w0 := time.Now()
	time.Sleep(p.window)
	tr1, cpu1 := c.Snapshot(), harness.ProcessCPU()
	if drops1, ok := harness.UDPReceiveDrops(); ok && traceFalse {
		logf("  steady window: %d datagrams dropped by full receive buffers", drops1-drops0)
	}
	win := time.Since(w0)
	if traceFalse {
		logCounters(logf, "steady window", subCounters(sumCounters(members), sum0), p.n, win)
	}
	res.WindowSeconds = win.Seconds()
	d := tr1.Sub(tr0)
	nf, ws := float64(p.n), win.Seconds()
	res.CPUMsPerNodeSec = float64(cpu1-cpu0) / float64(time.Millisecond) / ws / nf
	res.UDPBytesNodeSec = float64(d.UDPBytes) / ws / nf
	res.TCPBytesNodeSec = float64(d.TCPBytes) / ws / nf
	res.BytesPerNodeSec = res.UDPBytesNodeSec + res.TCPBytesNodeSec
	res.PacketsNodeSec = float64(d.UDPPackets) / ws / nf
	res.SeenMinSteady, res.SeenMedianSteady, _ = seenWithin(members, 10*time.Second)
	res.FalseSteady, res.FalseSteadyWho = rec.falseIn(phaseSteady)
	mem1 := settleGC()
	res.HeapPerNode = (float64(mem1.HeapInuse) - float64(mem0.HeapInuse)) / nf
	res.StackPerNode = (float64(mem1.StackInuse) - float64(mem0.StackInuse)) / nf
	res.GoroutinesPerNod = float64(runtime.NumGoroutine()-g0) / nf
	logf("  steady: cpu %.3f ms/s/node, %.0f B/s/node, heap %.0f KiB/node, false deaths %d (bootstrap %d)",
		res.CPUMsPerNodeSec, res.BytesPerNodeSec, res.HeapPerNode/1024, res.FalseSteady, res.FalseBoot)

	if !res.nearly() {
		return res
	}

	// Crash: 1% of the members (at least one, never the seed) stop at once
	// without leaving; wait until every survivor that knew a crashed member
	// (all of them, in a converged cluster) reports it gone.
	if p.crash {
		res.CrashRun = true
		res.CrashBound = o.crashBound.Seconds()
		k := max(1, p.n/100)
		batch := rand.Perm(p.n - 1)[:k]
		for j := range batch {
			batch[j]++
		}
		res.Crashed = k
		names := make(map[string]int, k)
		for b, j := range batch {
			names[nodeName(j)] = b
		}
		knew := make([][]bool, k)
		for b := range knew {
			knew[b] = make([]bool, p.n)
		}
		crashed := make(map[int]bool, k)
		for _, j := range batch {
			crashed[j] = true
		}
		for i, m := range members {
			if crashed[i] {
				continue
			}
			for _, name := range m.liveNames() {
				if b, ok := names[name]; ok {
					knew[b][i] = true
				}
			}
		}
		rec.startCrash(batch, knew)
		need := rec.crashNeeded()
		pairs := 0
		for _, v := range need {
			pairs += v
		}
		res.CrashKnewPct = 100 * float64(pairs) / float64(k*(p.n-k))
		var cw sync.WaitGroup
		for _, j := range batch {
			cw.Go(func() { _ = members[j].shutdown() })
		}
		cw.Wait()
		deadline := time.Now().Add(o.crashBound)
		complete := func(prog []int) bool {
			for b, v := range prog {
				if v < need[b] {
					return false
				}
			}
			return true
		}
		crashAt, lastLog, lastTraffic := time.Now(), time.Now(), c.Snapshot()
		lastDrops, _ := harness.UDPReceiveDrops()
		// The phase's counters are summed at its two ends only: a sum
		// takes each member's lock, and taken every 2 s in a busy phase it
		// took seconds and added to the load it was meant to show.
		var crashSum0 map[string]uint64
		if traceFalse {
			crashSum0 = sumCounters(members)
		}
		var knownAt time.Time // when every survivor knew
		for {
			if knownAt.IsZero() {
				if complete(rec.crashProgress()) {
					knownAt = time.Now()
				} else if !time.Now().Before(deadline) {
					break
				}
			}
			if !knownAt.IsZero() && time.Since(knownAt) >= o.crashWatch {
				break
			}
			time.Sleep(50 * time.Millisecond)
			// With -trace, the crash phase's traffic and progress every
			// 2 s: the phase is where large clusters in one process tip
			// into scheduling delays, and its totals alone do not show
			// whether the packets or something else grew first.
			if since := time.Since(lastLog); traceFalse && since >= 2*time.Second {
				tr := c.Snapshot()
				d := tr.Sub(lastTraffic)
				known := 0
				for _, v := range rec.crashProgress() {
					known += v
				}
				rt := []rtmetrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/goroutines:goroutines"}}
				rtmetrics.Read(rt)
				drops, _ := harness.UDPReceiveDrops()
				logf("  crash +%.0fs: %.1f%% of (survivor, crashed) pairs known; %.0f packets/s, %.1f MB/s over streams; %d GC cycles so far, %d goroutines; %d datagrams dropped by full receive buffers",
					time.Since(crashAt).Seconds(), 100*float64(known)/float64(max(pairs, 1)),
					float64(d.UDPPackets)/since.Seconds(), float64(d.TCPBytes)/since.Seconds()/1e6,
					rt[0].Value.Uint64(), rt[1].Value.Uint64(), drops-lastDrops)
				lastDrops = drops
				lastLog, lastTraffic = time.Now(), tr
			}
		}
		prog := rec.crashProgress()
		known := 0
		for _, v := range prog {
			known += v
		}
		res.CrashKnownPct = 100 * float64(known) / float64(max(pairs, 1))
		times := rec.crashTimes()
		res.CrashComplete = complete(prog)
		if res.CrashComplete {
			slices.Sort(times)
			res.CrashP50 = times[len(times)/2].Seconds()
			if len(times)%2 == 0 {
				res.CrashP50 = (times[len(times)/2-1] + times[len(times)/2]).Seconds() / 2
			}
			res.CrashMax = times[len(times)-1].Seconds()
			logf("  crash of %d: every survivor knew after p50 %.2fs, max %.2fs", k, res.CrashP50, res.CrashMax)
		} else {
			logf("  crash of %d: not all known within %v (%.1f%% of pairs)", k, o.crashBound, res.CrashKnownPct)
		}
		if traceFalse {
			logCounters(logf, "crash phase", subCounters(sumCounters(members), crashSum0), p.n-k, time.Since(crashAt))
		}
		res.FalseCrash, res.FalseCrashWho = rec.falseIn(phaseCrash)
		if o.crashWatch > 0 {
			logf("  crash phase: %.1fs in all, false deaths %d (%d members)", time.Since(crashAt).Seconds(), res.FalseCrash, res.FalseCrashWho)
		}
		// The crashed members stay in the slice; shutting one down twice is harmless.
	}

	// Packet loss: drop a fraction of all UDP packets for a window, on the
	// survivors of the crash.
	if p.loss > 0 {
		res.LossRun = true
		res.Loss = p.loss
		res.LossSeconds = o.lossWindow.Seconds()
		rec.phase.Store(phaseLoss)
		l0 := c.Snapshot()
		c.SetLoss(p.loss)
		time.Sleep(o.lossWindow)
		c.SetLoss(0)
		res.LossDropped = c.Snapshot().Sub(l0).Dropped
		res.FalseLoss, res.FalseLossWho = rec.falseIn(phaseLoss)
		var alive []member
		for j, m := range members {
			if !rec.crashedObs[j] {
				alive = append(alive, m)
			}
		}
		res.SeenMinLoss, res.SeenMedianLoss, _ = seenWithin(alive, 10*time.Second)
		logf("  %.0f%% loss for %v: false deaths %d (%d members), min seen %d of %d",
			100*p.loss, o.lossWindow, res.FalseLoss, res.FalseLossWho, res.SeenMinLoss, len(alive))
	}
	return res
}

// drainHeap collects until HeapInuse is within max(5%, 16 MiB) of base, or
// bound passes; it returns the excess left (0 when drained).
func drainHeap(base uint64, bound time.Duration) uint64 {
	slack := max(base/20, 16<<20)
	deadline := time.Now().Add(bound)
	for {
		ms := settleGC()
		if ms.HeapInuse <= base+slack {
			return 0
		}
		if time.Now().After(deadline) {
			return ms.HeapInuse - base
		}
		time.Sleep(time.Second)
	}
}

// shutdownMembers shuts the members down, a few at a time.
func shutdownMembers(ms []member) {
	harness.ShutdownAll(len(ms), func(i int) { _ = ms[i].shutdown() })
}
