package main

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/sim"
)

const (
	// settle is how long the converged cluster runs under the network
	// model before the measurement starts, so that the switch from the
	// boot's clean network is not measured.
	settle = 5 * time.Second
	// bootLimit bounds the boot in virtual time; it takes about 0.1 s.
	bootLimit = time.Minute
	// pausesPerSlot is how many members are paused in each slot (at most
	// an eighth of the members), a little apart. Pauses cost little to
	// simulate, and a false-death rate needs many of them to be told from
	// zero: at the boundary (PauseTolerance close to the pause) about one
	// pause in fifty to a hundred is fatal.
	pausesPerSlot = 20
	pauseStagger  = 100 * time.Millisecond
)

// runResult is what one simulated run measured.
type runResult struct {
	detect          []time.Duration // crash until every survivor knew, per crash known by all
	crashes, missed int             // crashes, and those some survivor never learned of
	falseDeaths     int             // distinct accusations (member, incarnation)
	falseSuspicions int
	memberHours     float64
	bytesSent       uint64
}

// fault is one scheduled crash or pause, at an offset into the window.
type fault struct {
	at     time.Duration
	crash  bool
	member string
	length time.Duration // of a pause
	// latest is the latest a pause may start and still end before the
	// next crash (simulate delays it while a detection is under way).
	latest time.Duration
}

// detectWindow is how long after a crash nobody is paused. A paused
// survivor learns of the crash only when it resumes, so a pause overlapping
// a detection would measure the pause rather than the protocol. Detection
// takes about the longer of PauseTolerance and the K = SuspicionMult-2
// confirmations that shorten the suspicion to it (about one per probe
// interval under aligned probing), plus up to one interval until the first
// failed probe, one for the final check and the spread, and one for a
// probe whose relays' nacks were lost (it accuses no one, so the next
// prober's probe is the first to count); the slowest setting of the grid
// sets it.
func (o *options) detectWindow() time.Duration {
	pi := o.base().ProbeInterval
	tol := time.Duration(o.tols[len(o.tols)-1] * float64(o.pause))
	confirm := time.Duration(o.smults[len(o.smults)-1]-1) * pi
	return max(tol, confirm) + 3*pi + time.Second
}

// slotNeed is the shortest slot: the detection window, the pauses one after
// another, and a second for the last to be over before the next crash.
func (o *options) slotNeed() time.Duration {
	return o.detectWindow() + pauseStagger*time.Duration(o.pausesPerSlot()-1) + o.pause + time.Second
}

// slots divides the window into slots, one crash each: the crash at the
// start, nobody paused for detectWindow, then a few pauses that all end
// before the next slot. It returns the number of slots (at least one, at
// most a quarter of the members) and their length. parseFlags made sure
// that one slot fits in the window.
func (o *options) slots() (int, time.Duration) {
	n := min(max(int(o.duration/o.slotNeed()), 1), o.n/4)
	return n, o.duration / time.Duration(n)
}

func (o *options) pausesPerSlot() int { return min(pausesPerSlot, max(o.n/8, 1)) }

// schedule draws the faults of a run from its seed alone, so every setting
// faces the same crashes and pauses for a given seed (common random
// numbers: differences between rows come from the settings, not from the
// luck of the draw).
func schedule(o *options, seed uint64) []fault {
	rng := rand.New(rand.NewPCG(seed, 0x74756e65)) // "tune"
	perm := rng.Perm(o.n)
	slots, slot := o.slots()
	// Crash victims and paused members are disjoint: a member crashed
	// while (or just after) it was suspected for a pause would make its
	// detection look faster than a real crash's.
	victims, pool := perm[:slots], perm[slots:]
	perSlot := o.pausesPerSlot()
	name := func(i int) string { return fmt.Sprintf("m%d", i) }
	var out []fault
	j := 0
	for i, v := range victims {
		start := time.Duration(i) * slot
		out = append(out, fault{at: start, crash: true, member: name(v)})
		// Every pause lasts the full -pause: a shorter one leaves the
		// member silent for less, so it is never the one that kills, and
		// the pauses are there to find the settings that do.
		for p := range perSlot {
			at := start + o.detectWindow() + time.Duration(p)*pauseStagger
			latest := start + slot - o.pause - time.Duration(perSlot-p)*pauseStagger
			out = append(out, fault{at: at, member: name(pool[j%len(pool)]), length: o.pause, latest: latest})
			j++
		}
	}
	return out
}

// simulate runs one setting with one seed.
func simulate(o *options, s setting, seed uint64) (runResult, error) {
	cfg := o.config(s)
	cfg.Name = "m0" // Validate wants one; each member gets its own
	if err := cfg.Validate(); err != nil {
		return runResult{}, err
	}
	c := sim.New(sim.Options{
		Seed:        seed,
		NodeFactory: sim.MachineFactory(func(string) *swim.Config { return cfg }),
		// A Metrics needs no event log, and a 1,000-member cluster would
		// log a million joins.
		DisableLog:    true,
		CheckInterval: 50 * time.Millisecond,
	})
	nodes, err := c.AddNodes("m", o.n)
	if err != nil {
		return runResult{}, err
	}
	if err := boot(c, nodes); err != nil {
		return runResult{}, fmt.Errorf("%v, seed %d: %w", s, seed, err)
	}
	c.SetLatency(sim.LognormalLatency(o.p50, o.p99))
	c.SetLoss(o.loss)
	c.Run(settle)

	m := sim.NewMetrics(c)
	allKnow := func() bool {
		d := m.Detection()
		return d.AllKnew == d.Crashes
	}
	start := c.Now()
	// delay shifts the rest of a slot's pauses when the first had to wait.
	var delay time.Duration
	for _, f := range schedule(o, seed) {
		if f.crash {
			c.Run(start.Add(f.at).Sub(c.Now()))
			delay = 0
			if err := c.Crash(f.member); err != nil {
				return runResult{}, err
			}
			continue
		}
		at := min(f.at+delay, f.latest)
		c.Run(start.Add(at).Sub(c.Now()))
		// The schedule leaves time for the slowest setting to detect the
		// crash, but a tail can take longer, and a survivor paused before
		// it learned would learn only when it resumed: the pause would be
		// measured, not the protocol. So wait, as long as the pauses can
		// still end before the next crash.
		if latest := start.Add(f.latest); c.Now().Before(latest) && !allKnow() {
			c.RunUntil(allKnow, latest.Sub(c.Now()))
			delay = max(delay, c.Now().Sub(start)-f.at)
		}
		if err := c.Pause(f.member, f.length); err != nil {
			return runResult{}, err // paused members never crash: a bug
		}
	}
	c.Run(start.Add(o.duration).Sub(c.Now()))
	// The last crashes need time to be detected. No new faults from here;
	// the bound is the longest a suspicion can last (no confirmations)
	// plus room for the final check and the spread of the death.
	tail := time.Duration(cfg.SuspicionMaxTimeoutMult)*cfg.PauseTolerance + 30*time.Second
	c.RunUntil(allKnow, tail)
	m.Stop()

	r := m.Report()
	res := runResult{
		crashes:         r.Detection.Crashes,
		falseDeaths:     r.FalseDeaths,
		falseSuspicions: r.FalseSuspicions,
		memberHours:     r.MemberHours,
		bytesSent:       r.Traffic.BytesSent,
	}
	for _, f := range m.Failures() {
		if f.AllKnew {
			res.detect = append(res.detect, f.AllKnow)
		} else {
			res.missed++
		}
	}
	return res, nil
}

// boot converges the cluster in about 0.1 s of virtual time, with one full
// view per member and no join gossip. A cold boot (everyone joins through
// one seed at once) spreads every newcomer by gossip, N² deltas sent a
// dozen times each: at 1,000 members about 10 s of virtual time and more
// CPU than the measured minute, none of it measured. Instead m0 first joins through all
// the others: each learns only m0 (one rumor), and m0 merges their replies
// as a joiner, which gossips nothing. Then every member joins through m0,
// which by now knows everyone, and merges its full view as a joiner too.
// Only the public Join is used, so the members are ordinary ones: the
// follow-up push-pulls after a join happen as usual.
func boot(c *sim.Cluster, nodes []*sim.SimNode) error {
	first := nodes[0]
	others := make([]netip.AddrPort, 0, len(nodes)-1)
	for _, n := range nodes[1:] {
		others = append(others, n.Addr())
	}
	join := func(n *sim.SimNode, seeds []netip.AddrPort) error {
		return c.DoMachine(n.Name(), func(m *swim.Machine, now time.Time) { m.Join(now, seeds) })
	}
	if err := join(first, others); err != nil {
		return err
	}
	if !c.RunUntil(func() bool { return first.Machine().NumMembers() == len(nodes) }, bootLimit) {
		return fmt.Errorf("boot: m0 learned %d of %d members in %v", first.Machine().NumMembers(), len(nodes), bootLimit)
	}
	seed := []netip.AddrPort{first.Addr()}
	for _, n := range nodes[1:] {
		if err := join(n, seed); err != nil {
			return err
		}
	}
	if _, ok := c.RunUntilAgree(bootLimit); !ok {
		return fmt.Errorf("boot: views still differ after %v", bootLimit)
	}
	return nil
}

// outcome is a setting's results pooled over its seeds.
type outcome struct {
	setting
	detect          sim.DurationStats
	crashes, missed int
	falseDeaths     int
	falseSuspicions int
	memberHours     float64
	deathRate       float64 // false deaths per member-hour
	suspicionRate   float64 // false suspicions per member-hour
	bytesPerSecond  float64 // sent, per member and second
	meets           bool
}

func pool(s setting, runs []runResult) outcome {
	out := outcome{setting: s}
	var detect []time.Duration
	var bytes uint64
	for _, r := range runs {
		detect = append(detect, r.detect...)
		out.crashes += r.crashes
		out.missed += r.missed
		out.falseDeaths += r.falseDeaths
		out.falseSuspicions += r.falseSuspicions
		out.memberHours += r.memberHours
		bytes += r.bytesSent
	}
	out.detect = sim.Summarize(detect)
	if out.memberHours > 0 {
		out.deathRate = float64(out.falseDeaths) / out.memberHours
		out.suspicionRate = float64(out.falseSuspicions) / out.memberHours
		out.bytesPerSecond = float64(bytes) / (out.memberHours * 3600)
	}
	return out
}

// search runs every setting with every seed, o.parallel runs at a time, and
// pools the results per setting, in grid order. Each run owns its Cluster,
// so runs share nothing but the options (read only). The first error stops
// the search: a cluster that does not converge is a bug to look at, not a
// data point.
func search(o *options, grid []setting, p *progress) ([]outcome, error) {
	type job struct{ setting, seed int }
	results := make([][]runResult, len(grid))
	for i := range results {
		results[i] = make([]runResult, o.seeds)
	}
	jobs := make(chan job)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range min(o.parallel, len(grid)*o.seeds) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if failed {
					continue // drain the queue
				}
				r, err := simulate(o, grid[j.setting], uint64(j.seed+1))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				results[j.setting][j.seed] = r
				mu.Unlock()
				p.done()
			}
		}()
	}
	// Seed-major order: every setting gets its first seed before any gets
	// its second, so the runs done early, from which the progress line
	// estimates the time left, are a fair sample of the grid.
	for seed := range o.seeds {
		for i := range grid {
			jobs <- job{i, seed}
		}
	}
	close(jobs)
	wg.Wait()
	p.finish()
	if firstErr != nil {
		return nil, firstErr
	}
	outs := make([]outcome, len(grid))
	for i, s := range grid {
		outs[i] = pool(s, results[i])
	}
	return outs, nil
}
