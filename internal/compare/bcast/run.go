package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swim-go/swim/internal/compare/harness"
)

// library starts members of one implementation.
type library interface {
	name() string
	// start creates member i on 127.0.0.1 (a free port), alone, at the
	// library's LAN defaults, counting what it sends in env.bytes and
	// reporting the broadcasts it receives to env.track.
	start(i int, env *cluster) (member, error)
	// queueFull reports whether a Broadcast error is the library saying
	// its queue is full (the broadcast was not sent, the caller may retry).
	queueFull(err error) bool
}

// member is one running member of either library.
type member interface {
	address() string
	numMembers() int
	join(ctx context.Context, seed string) error
	// broadcast hands a payload to the library at this member; it
	// returns swim's outcome channel (nil for memberlist).
	broadcast(payload []byte) (<-chan error, error)
	shutdown() error
	// counters are the library's figures by name: swim's Stats, the
	// queue length for memberlist.
	counters() map[string]uint64
}

func libByName(name string) library {
	if name == "swim" {
		return swimLib{}
	}
	return mlLib{}
}

// memberName is member i's name in both libraries.
func memberName(i int) string { return fmt.Sprintf("node-%05d", i) }

// cluster is what a run's members share.
type cluster struct {
	n     int
	bytes *harness.Counters
	track *tracker
}

// result is one run: one library, N members, one rate. Durations are in
// seconds, except the latencies, in milliseconds.
type result struct {
	Library string  `json:"library"`
	N       int     `json:"n"`
	Rate    float64 `json:"rate_per_s"`
	Error   string  `json:"error,omitempty"`

	ConvergeSeconds float64 `json:"converge_s"`
	LoadSeconds     float64 `json:"load_s"`
	DrainSeconds    float64 `json:"drain_s"` // until every sent broadcast was complete and receptions stopped, or -drain

	Attempted  int     `json:"attempted"`
	Sent       int     `json:"sent"`
	Full       int     `json:"refused_queue_full"` // swim's ErrBroadcastQueueFull
	Backlog    int     `json:"not_called_backlog"` // the origin's sender was busy: Broadcast never called
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Complete   int     `json:"complete"`
	ReachedPct float64 `json:"deliveries_pct"` // deliveries / (sent × (N-1))
	P50Ms      float64 `json:"all_reached_p50_ms"`
	P99Ms      float64 `json:"all_reached_p99_ms"`
	MaxMs      float64 `json:"all_reached_max_ms"`
	// Receptions of a payload per member per broadcast sent: every copy
	// that arrived, duplicates included, / (sent × (N-1)).
	Receptions float64 `json:"receptions_per_member_per_bcast"`
	// CPU and bytes sent over the load, per member per second.
	CPUMsPerMemberSec  float64 `json:"cpu_ms_per_member_per_s"`
	BytesPerMemberSec  float64 `json:"bytes_per_member_per_s"`
	PacketsPerMemberSc float64 `json:"packets_per_member_per_s"`
	TCPBytesMemberSec  float64 `json:"tcp_bytes_per_member_per_s"`

	// Broadcast calls that took long: the slowest, and how many over 10 ms.
	CallMaxMs  float64 `json:"broadcast_call_max_ms"`
	CallsOver  int     `json:"broadcast_calls_over_10ms"`
	Handled    uint64  `json:"handler_receptions"`
	Twice      uint64  `json:"delivered_twice"` // swim's handler given a broadcast again
	Self       uint64  `json:"self_delivered"`
	Foreign    uint64  `json:"foreign_payloads"`
	RcvbufErrs uint64  `json:"udp_rcvbuf_errors_host"` // host-wide, during load and drain
	// Counters: the library's (summed over members) over load and drain
	// (swim: Stats deltas; memberlist: "Queued" at the end of the load),
	// and for swim the outcomes its channels reported.
	Counters map[string]uint64 `json:"counters,omitempty"`
	Outcomes map[string]int    `json:"swim_outcomes,omitempty"`

	LeftRoutines int     `json:"goroutines_left_after_shutdown"`
	WallSeconds  float64 `json:"wall_s"`
}

// completePct is the share of attempted broadcasts that reached everyone.
func (r *result) completePct() float64 {
	if r.Attempted == 0 {
		return 0
	}
	return 100 * float64(r.Complete) / float64(r.Attempted)
}

// runOne runs one cluster through a run: start, join, settle, load,
// drain; then shuts it down and waits for its goroutines.
func runOne(lib library, n int, rate float64, o *options) (res result) {
	wall := time.Now()
	res = result{Library: lib.name(), N: n, Rate: rate}
	defer func() { res.WallSeconds = time.Since(wall).Seconds() }()
	tag := fmt.Sprintf("%s N=%d rate=%g/s", lib.name(), n, rate)

	g0 := runtime.NumGoroutine()
	// The ticker schedules exactly this many broadcasts, evenly spaced.
	total := max(1, int(math.Round(rate*o.load.Seconds())))
	env := &cluster{n: n, bytes: &harness.Counters{}, track: newTracker(n, total)}
	members := make([]member, 0, n)
	defer func() {
		shutdownMembers(members)
		res.LeftRoutines = harness.WaitGoroutines(g0, 60*time.Second)
		if res.LeftRoutines > 0 {
			o.logf("%s: %d goroutines still running after shutdown", tag, res.LeftRoutines)
		}
	}()
	for i := range n {
		m, err := lib.start(i, env)
		if err != nil {
			res.Error = fmt.Sprintf("start member %d: %v", i, err)
			return res
		}
		members = append(members, m)
	}

	// Join all through member 0 and wait until every member sees N.
	t0 := time.Now()
	if err := joinAll(members, o); err != nil {
		res.Error = err.Error()
		return res
	}
	res.ConvergeSeconds = time.Since(t0).Seconds()
	o.logf("%s: all see %d after %.1fs; settling %v", tag, n, res.ConvergeSeconds, o.settle)
	time.Sleep(o.settle)

	// Load: one ticker schedules the broadcasts, origins round robin; each
	// member's sender goroutine makes the calls, so that a Broadcast that
	// waits (swim takes the member's lock and sends what it has to) holds
	// up neither the ticker nor the other origins. A sender still busy
	// with its last calls when its next one is due has it skipped, and
	// the broadcast counted as never sent.
	tr := env.track
	var callMax atomic.Int64
	var callsOver, errCount atomic.Int64
	var firstErr atomic.Value
	type pending struct{ ch <-chan error }
	outcomes := make([][]pending, n)
	queues := make([]chan int, n)
	var senders sync.WaitGroup
	for i := range members {
		queues[i] = make(chan int, 16)
		senders.Go(func() {
			for k := range queues[i] {
				at := tr.now()
				p := encodePayload(k, i, at)
				tr.sentAt[k].Store(int64(at))
				ch, err := members[i].broadcast(p)
				took := tr.now() - at
				for {
					old := callMax.Load()
					if int64(took) <= old || callMax.CompareAndSwap(old, int64(took)) {
						break
					}
				}
				if took > 10*time.Millisecond {
					callsOver.Add(1)
				}
				switch {
				case err == nil:
					tr.fate[k].Store(fateSent)
					if ch != nil {
						outcomes[i] = append(outcomes[i], pending{ch})
					}
				case lib.queueFull(err):
					tr.fate[k].Store(fateFull)
				default:
					tr.fate[k].Store(fateError)
					if errCount.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
				}
			}
		})
	}
	counters0 := sumCounters(members)
	rcv0, _ := harness.UDPReceiveDrops()
	bytes0, cpu0 := env.bytes.Snapshot(), harness.ProcessCPU()
	loadStart := time.Now()
	period := time.Duration(float64(time.Second) / rate)
	for k := range total {
		// Absolute deadlines: a late tick is made up at once rather than
		// shifting every later one, so the rate holds on average.
		if d := time.Until(loadStart.Add(time.Duration(k) * period)); d > 0 {
			time.Sleep(d)
		}
		select {
		case queues[k%n] <- k:
		default:
			tr.fate[k].Store(fateBacklog)
		}
	}
	// The load lasts total periods: the last broadcast's slot included.
	if d := time.Until(loadStart.Add(time.Duration(total) * period)); d > 0 {
		time.Sleep(d)
	}
	loadSecs := time.Since(loadStart).Seconds()
	bytes1, cpu1 := env.bytes.Snapshot(), harness.ProcessCPU()
	for _, q := range queues {
		close(q)
	}
	senders.Wait() // calls queued at the end; they count as sent during the drain
	if _, isML := lib.(mlLib); isML {
		res.Counters = map[string]uint64{"QueuedAtLoadEnd": sumCounters(members)["Queued"]}
	}
	res.LoadSeconds = loadSecs
	nf := float64(n)
	db := bytes1.Sub(bytes0)
	res.CPUMsPerMemberSec = float64(cpu1-cpu0) / float64(time.Millisecond) / loadSecs / nf
	res.BytesPerMemberSec = float64(db.UDPBytes+db.TCPBytes) / loadSecs / nf
	res.TCPBytesMemberSec = float64(db.TCPBytes) / loadSecs / nf
	res.PacketsPerMemberSc = float64(db.UDPPackets) / loadSecs / nf

	// Drain: wait for stragglers, up to -drain; end sooner once every
	// sent broadcast reached everyone and no copy arrived for 2 s (the
	// queues have emptied: memberlist keeps retransmitting after every
	// member has a broadcast, and those copies count in the receptions).
	drainStart := time.Now()
	received := func() uint64 {
		if _, isSwim := lib.(swimLib); isSwim {
			c := sumCounters(members)
			return c["Broadcasts.Delivered"] + c["Broadcasts.Duplicate"]
		}
		return tr.handled.Load()
	}
	last, lastChange := received(), time.Now()
	for time.Since(drainStart) < o.drain {
		time.Sleep(500 * time.Millisecond)
		if r := received(); r != last {
			last, lastChange = r, time.Now()
		}
		if time.Since(lastChange) >= 2*time.Second && tr.allSentComplete(total) {
			break
		}
	}
	res.DrainSeconds = time.Since(drainStart).Seconds()
	rcv1, _ := harness.UDPReceiveDrops()
	res.RcvbufErrs = rcv1 - rcv0

	sum := tr.summarise(total)
	res.Attempted = sum.attempted
	res.Sent = sum.fates[fateSent]
	res.Full = sum.fates[fateFull]
	res.Backlog = sum.fates[fateBacklog]
	res.Errors = sum.fates[fateError]
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}
	res.Complete = sum.complete
	res.ReachedPct = sum.reachedPc
	res.P50Ms = ms(percentile(sum.latencies, 50))
	res.P99Ms = ms(percentile(sum.latencies, 99))
	res.MaxMs = ms(percentile(sum.latencies, 100))
	res.CallMaxMs = ms(time.Duration(callMax.Load()))
	res.CallsOver = int(callsOver.Load())
	res.Handled = tr.handled.Load()
	res.Twice, res.Self, res.Foreign = tr.deliveredTwice.Load(), tr.selfDelivered.Load(), tr.foreign.Load()
	copies := res.Handled // memberlist: every NotifyMsg
	if _, isSwim := lib.(swimLib); isSwim {
		res.Counters = subCounters(sumCounters(members), counters0)
		copies = res.Counters["Broadcasts.Delivered"] + res.Counters["Broadcasts.Duplicate"]
		res.Outcomes = map[string]int{}
		for _, ps := range outcomes {
			for _, p := range ps {
				select {
				case err := <-p.ch:
					res.Outcomes[outcomeKind(err)]++
				default:
					res.Outcomes["pending"]++
				}
			}
		}
	}
	if res.Sent > 0 && n > 1 {
		res.Receptions = float64(copies) / float64(res.Sent*(n-1))
	}
	o.logf("%s: %d attempted, %d sent (%d queue full, %d backlog, %d errors), %.1f%% complete, p50 %.0f ms, p99 %.0f ms; %.2f copies per member per broadcast; cpu %.2f ms/s/member, %.0f B/s/member; drained in %.1fs",
		tag, res.Attempted, res.Sent, res.Full, res.Backlog, res.Errors, res.completePct(), res.P50Ms, res.P99Ms,
		res.Receptions, res.CPUMsPerMemberSec, res.BytesPerMemberSec, res.DrainSeconds)
	if res.FirstError != "" {
		o.logf("%s: first Broadcast error: %s", tag, res.FirstError)
	}
	if o.verbose {
		o.logf("%s: counters: %s", tag, formatCounters(res.Counters))
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// joinAll joins every member through member 0, 16 at a time, retrying a
// failed join, and waits until every member sees all N live; it gives up
// after -join-bound.
func joinAll(members []member, o *options) error {
	n := len(members)
	ctx, cancel := context.WithTimeout(context.Background(), o.joinBound)
	defer cancel()
	seed := members[0].address()
	next := make(chan member)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for m := range next {
				for ctx.Err() == nil {
					jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
					err := m.join(jctx, seed)
					jcancel()
					if err == nil {
						break
					}
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		})
	}
	for _, m := range members[1:] {
		next <- m
	}
	close(next)
	wg.Wait()
	for {
		lo := n
		for _, m := range members {
			lo = min(lo, m.numMembers())
		}
		if lo == n {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("not every member saw %d within %v (lowest %d)", n, o.joinBound, lo)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// sumCounters adds up the members' counters.
func sumCounters(ms []member) map[string]uint64 {
	sum := map[string]uint64{}
	for _, m := range ms {
		for k, v := range m.counters() {
			sum[k] += v
		}
	}
	return sum
}

// subCounters is a's counters less b's: what a phase added.
func subCounters(a, b map[string]uint64) map[string]uint64 {
	d := make(map[string]uint64, len(a))
	for k, v := range a {
		if v > b[k] {
			d[k] = v - b[k]
		}
	}
	return d
}

// formatCounters lists the non-zero counters, sorted by name.
func formatCounters(c map[string]uint64) string {
	names := make([]string, 0, len(c))
	for k, v := range c {
		if v > 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%d", k, c[k])
	}
	return b.String()
}

// shutdownMembers shuts the members down, a few at a time.
func shutdownMembers(ms []member) {
	harness.ShutdownAll(len(ms), func(i int) { _ = ms[i].shutdown() })
}
