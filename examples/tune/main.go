// Command tune finds failure-detector settings for a given network by
// simulating it.
//
// Given a cluster size, a packet loss rate, a latency distribution, the
// longest pause a member must survive (a GC pause, a stopped VM) and a budget
// of false deaths, it runs the deterministic simulator (internal/sim) over a
// grid of IndirectChecks, PauseTolerance and SuspicionMult values, several
// seeds each, in parallel on the available cores. It prints one table row per
// setting (crash detection p50/p99, false deaths and false suspicions per
// member-hour, bytes sent per member and second), marks the settings that meet
// the budget and, among them, the one with the fastest detection, prints the
// Config lines to use, and writes an SVG plot of detection p99 against the
// false-death rate.
//
//	go run ./examples/tune -n 1000 -loss 0.05 -p50 1ms -p99 50ms -pause 3s
//
// # What one run simulates
//
// n members with the profile's defaults (-profile, LAN unless told) and the
// setting under test are started converged (see boot in scenario.go: every
// member ends up with the full view, without the join gossip of a cold boot,
// which is not measured anyway). The network then gets lognormal one-way
// latency with the given median and 99th percentile and uniform loss, and
// after a short settling time the measurement starts, for -duration of
// virtual time, cut into slots of about 15 s (longer for long pauses):
//
//   - Each slot starts with a crash. Detection is the time from the crash
//     until every survivor has declared the member dead (sim.Metrics'
//     AllKnow). A paused survivor would learn only when it resumes, so
//     nobody is paused until every survivor knows (the schedule leaves the
//     slowest setting of the grid time for it, and a slower detection
//     delays the pauses as long as they still end before the next crash).
//     After the window the run goes on, without new
//     faults, until every crash is known by all (or for the longest
//     suspicion timeout plus 30 s); a crash some survivor never learned of
//     disqualifies the setting.
//   - Then up to 20 members (at most an eighth of the cluster), 100 ms
//     apart, are paused for the full -pause, and resume before the next
//     slot. A pause freezes the member (its inputs wait, its timers fire
//     late), so it is suspected, and declared dead if the suspicion ends
//     before it can answer: the false death the budget limits. Shorter
//     pauses are not simulated: they leave the member silent for less, so
//     they are never the ones that kill.
//
// A false death is a member that was running (paused or not) declared dead,
// counted once per accusation (member and incarnation), per member-hour of
// simulated membership (sim.Metrics). The runs pause members far more often
// than a real cluster does (the header says how often), so the rates are
// those of a cluster under that load; and a false death can come from loss
// alone, for example when a member missed the refutation and its final
// check was lost. Runs with the same seed index get the same crash and
// pause schedule whatever the setting, so settings face the same faults.
//
// # Choosing
//
// A setting meets the budget when every crash was known by every survivor
// and its false deaths per member-hour (pooled over the seeds) are at most
// -budget. Among those, the recommendation is the lowest detection p99, then
// p50, then the fewest false suspicions, then the fewest bytes. The default
// budget is 0: no false death at all in the simulated runs, as "pauses up to
// -pause must not kill" asks. A run measures only n·duration of membership,
// so a rate below one false death in the simulated member-hours cannot be
// told from zero: the header prints that resolution. Deaths near the
// boundary (PauseTolerance close to the pause) are rare and random, so the
// recommendation notes when other IndirectChecks values at the same
// suspicion settings had some; more -seeds narrow it down.
//
// # Cost
//
// Each run simulates a whole cluster on one core; runs go -parallel at a
// time (default GOMAXPROCS). A 1,000-member run of the default scenario
// takes about 5 s of CPU and under 100 MB, so the default grid
// (4 IndirectChecks × 3 tolerances × 4 seeds = 48 runs of 60 virtual
// seconds) takes about two minutes on two idle cores, longer when other work
// shares them. Four seeds, because a false death near the boundary is a
// rare event: with fewer, which row shows none is largely luck.
//
// # Output
//
// A progress line on stderr while it runs; the table, the recommendation and
// its Config lines on stdout; the plot in -svg (default tune.svg, empty: no
// plot). Exit status: 0 when a setting meets the budget, 3 when none does,
// 2 for bad flags, 1 for other errors.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/swim-go/swim"
)

// options are the parsed and validated flags.
type options struct {
	n        int
	loss     float64
	p50, p99 time.Duration
	pause    time.Duration
	budget   float64
	seeds    int
	duration time.Duration
	parallel int
	svg      string
	profile  string
	ks       []int
	tols     []float64 // PauseTolerance as multiples of pause
	smults   []int
}

// errNoneMeets is returned by run when the search completed but no setting
// met the budget: the report is printed, main exits with status 3.
var errNoneMeets = errors.New("no setting meets the budget")

// errUsage marks bad flags; main exits with status 2, as the flag package
// does. errHelp is -h: usage printed, status 0.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, errHelp):
	case errors.Is(err, errNoneMeets):
		os.Exit(3)
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "tune:", err)
		os.Exit(1)
	}
}

// run is the whole command, with its outputs passed in so the test can run
// it: it parses args, runs the grid and reports.
func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	grid, warnings := o.grid()
	for _, w := range warnings {
		fmt.Fprintln(stderr, "tune: warning:", w)
	}
	if len(grid) == 0 {
		fmt.Fprintf(stderr, "tune: no setting left to try: every tolerance is below ProbeInterval (%v)\n", o.base().ProbeInterval)
		return errUsage
	}
	outs, err := search(o, grid, newProgress(stderr, len(grid)*o.seeds))
	if err != nil {
		return err
	}
	best := choose(outs, o.budget)
	report(stdout, o, outs, best)
	if o.svg != "" {
		if err := writeSVGFile(o.svg, o, outs, best); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nplot: %s\n", o.svg)
	}
	if best < 0 {
		return errNoneMeets
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 1000, "cluster size (members)")
	fs.Float64Var(&o.loss, "loss", 0.01, "probability that any packet is lost, uniform, in [0, 1)")
	fs.DurationVar(&o.p50, "p50", time.Millisecond, "median one-way latency (lognormal)")
	fs.DurationVar(&o.p99, "p99", 20*time.Millisecond, "99th percentile of the one-way latency (lognormal)")
	fs.DurationVar(&o.pause, "pause", 3*time.Second, "longest pause a member must survive without being declared dead")
	fs.Float64Var(&o.budget, "budget", 0, "false deaths per member-hour allowed (0: none at all in the simulated runs)")
	fs.IntVar(&o.seeds, "seeds", 4, "runs per setting, with different seeds")
	fs.DurationVar(&o.duration, "duration", time.Minute, "virtual time measured per run (crashes and pauses happen in it)")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "runs at once (each holds one whole cluster in memory)")
	fs.StringVar(&o.svg, "svg", "tune.svg", "where to write the plot (empty: no plot)")
	fs.StringVar(&o.profile, "profile", "lan", "base configuration: lan, wan or local (DefaultLANConfig, ...)")
	ks := fs.String("k", "1,2,3,4", "IndirectChecks values to try, comma-separated")
	tols := fs.String("tol", "0.75,1,1.25", "PauseTolerance values to try, as multiples of -pause, comma-separated")
	smults := fs.String("smult", "4", "SuspicionMult values to try, comma-separated (K = SuspicionMult-2 confirmations shorten a suspicion to PauseTolerance)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tune [flags]\n\nSimulates a grid of failure-detector settings and recommends one; see go doc ./examples/tune.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, errUsage // the flag package printed why, and the usage
	}
	fail := func(format string, a ...any) (*options, error) {
		fmt.Fprintf(stderr, "tune: "+format+"\n(tune -h lists the flags)\n", a...)
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	var err error
	if o.ks, err = parseInts(*ks, 0, 64); err != nil {
		return fail("-k: %v", err)
	}
	if o.tols, err = parseFloats(*tols); err != nil {
		return fail("-tol: %v", err)
	}
	if o.smults, err = parseInts(*smults, 1, 100); err != nil {
		return fail("-smult: %v", err)
	}
	switch {
	// Fewer than 8 members leave too few to crash, pause and still
	// confirm suspicions.
	case o.n < 8:
		return fail("-n must be at least 8, is %d", o.n)
	case o.n > 100000:
		return fail("-n must be at most 100000, is %d", o.n)
	case !(o.loss >= 0 && o.loss < 1): // also rejects NaN
		return fail("-loss must be in [0, 1), is %v", o.loss)
	case o.p50 <= 0:
		return fail("-p50 must be positive, is %v", o.p50)
	case o.p99 < o.p50:
		return fail("-p99 (%v) must be at least -p50 (%v)", o.p99, o.p50)
	case o.pause <= 0:
		return fail("-pause must be positive, is %v", o.pause)
	case !(o.budget >= 0): // also rejects NaN
		return fail("-budget must be a rate >= 0 (false deaths per member-hour), is %v", o.budget)
	case o.seeds < 1:
		return fail("-seeds must be at least 1, is %d", o.seeds)
	case o.duration < 10*time.Second:
		return fail("-duration must be at least 10s (one crash and a few pauses), is %v", o.duration)
	case o.parallel < 1:
		return fail("-parallel must be at least 1, is %d", o.parallel)
	}
	if _, err := swim.DefaultConfig(o.profile); err != nil {
		return fail("-profile must be lan, wan or local, is %q", o.profile)
	}
	// The window holds at least one slot: a crash, the time for the
	// slowest setting to detect it, and the pauses (scenario.go).
	if need := o.slotNeed(); o.duration < need {
		return fail("-duration %v is too short for one crash and its pauses with this grid and -pause: at least %v", o.duration, need)
	}
	return o, nil
}

// parseInts parses a comma-separated list of distinct integers in [lo, hi],
// sorted.
func parseInts(s string, lo, hi int) ([]int, error) {
	return parseList(s, func(f string) (int, error) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", f)
		}
		if v < lo || v > hi {
			return 0, fmt.Errorf("%d is out of range [%d, %d]", v, lo, hi)
		}
		return v, nil
	})
}

// parseFloats parses a comma-separated list of distinct positive numbers,
// sorted.
func parseFloats(s string) ([]float64, error) {
	return parseList(s, func(f string) (float64, error) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", f)
		}
		if !(v > 0 && v <= 100) {
			return 0, fmt.Errorf("%v is out of range (0, 100]", v)
		}
		return v, nil
	})
}

// parseList parses a comma-separated list with parse, refusing repeats,
// and sorts it.
func parseList[T cmp.Ordered](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	seen := map[T]bool{}
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if seen[v] {
			return nil, fmt.Errorf("%v is listed twice", v)
		}
		seen[v] = true
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// profileFunc is the constructor the Config lines start from.
func profileFunc(name string) string {
	return map[string]string{"lan": "DefaultLANConfig", "wan": "DefaultWANConfig", "local": "DefaultLocalConfig"}[name]
}

// base is the profile's defaults; parseFlags checked the name.
func (o *options) base() *swim.Config {
	c, err := swim.DefaultConfig(o.profile)
	if err != nil {
		panic(err)
	}
	return c
}

// setting is one point of the grid.
type setting struct {
	K             int           // IndirectChecks
	TolMult       float64       // PauseTolerance / pause
	Tolerance     time.Duration // PauseTolerance
	SuspicionMult int
}

func (s setting) String() string {
	return fmt.Sprintf("IndirectChecks=%d PauseTolerance=%v SuspicionMult=%d", s.K, s.Tolerance, s.SuspicionMult)
}

// config is the profile's Config with the setting applied.
func (o *options) config(s setting) *swim.Config {
	c := o.base()
	c.IndirectChecks = s.K
	c.PauseTolerance = s.Tolerance
	c.SuspicionMult = s.SuspicionMult
	return c
}

// grid lists the settings to try, in table order. Config.Validate requires
// PauseTolerance >= ProbeInterval, so tolerances below it are left out with
// a warning rather than failing the whole search.
func (o *options) grid() ([]setting, []string) {
	var out []setting
	var warnings []string
	pi := o.base().ProbeInterval
	for _, m := range o.tols {
		// Milliseconds are plenty, and keep the Config lines readable.
		tol := time.Duration(m * float64(o.pause)).Round(time.Millisecond)
		if tol < pi {
			warnings = append(warnings, fmt.Sprintf("-tol %v: %v·%v = %v is below ProbeInterval (%v), which Config.Validate refuses; left out", m, m, o.pause, tol, pi))
			continue
		}
		for _, sm := range o.smults {
			for _, k := range o.ks {
				out = append(out, setting{K: k, TolMult: m, Tolerance: tol, SuspicionMult: sm})
			}
		}
	}
	return out, warnings
}
