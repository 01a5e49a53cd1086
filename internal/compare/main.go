// Command compare runs the same scenarios on swim and on hashicorp/memberlist
// v0.7.0 and prints one table with both libraries' figures and their ratio.
// Run it with `make compare` from the repository root, or `go run .` here;
// `go run . -h` lists the flags.
//
// Every cluster lives in this one process on 127.0.0.1, each member on a
// free port of its own, over the library's own UDP+TCP transport wrapped to
// count what is sent (and to drop packets for the loss scenario). One
// library's cluster runs at a time; between runs every member is shut down,
// the goroutines are waited for and the heap is collected until it is back
// where the run started (memberlist leaves suspicion timers pending that keep
// its members reachable for up to a minute or two).
//
// For each N (-n) and each library, first with its own LAN defaults
// (memberlist.DefaultLANConfig, swim.DefaultLANConfig), then at matched
// settings:
//
//   - bootstrap: N members join through member 0, -join-par at a time
//     (and at most -join-rate a second, when set); the
//     time until every member sees N live members, bounded by
//     max(-boot-bound, N × -boot-per-node). A cluster that does not get there
//     is reported with the minimum and median count seen at the bound.
//   - steady state: after -settle, over -window: process CPU time
//     (getrusage) per member, bytes (UDP packets plus stream writes, both
//     ends) and packets sent per member per second, and the growth of
//     HeapInuse (and StackInuse) since before the cluster started, per
//     member, after a forced GC.
//   - crash: 1% of the members (at least one) are shut down at once without
//     leaving; per crashed member, the time until every survivor reported it
//     gone (EventLeave / NotifyLeave), p50 and max over the batch, bounded
//     by -crash-bound. It runs when every join succeeded and the median
//     member sees all N; in a cluster that had not fully converged only the
//     survivors that had the member live at the crash are waited for.
//     With -crash-watch, the phase goes on that long after every survivor
//     knew, so that false deaths in the wake of the deaths' spread, when
//     the process is busiest, are counted too.
//   - loss: -loss of all UDP packets is dropped (at the sender) for
//     -loss-window, on the survivors of the crash; members declared dead
//     meanwhile are false deaths.
//
// Any member reported gone while it runs is a false death, counted per
// phase as (observer, member) events and distinct members.
//
// Matched settings: memberlist keeps its LAN defaults (its figures from the
// first pass are reused); swim is given memberlist's values for every knob
// both have (probe interval and timeout, indirect checks, suspicion mult and
// max-timeout mult, retransmit mult, gossip interval and nodes, gossip to the
// dead, push-pull interval, TCP timeout, UDP buffer size, awareness max
// multiplier, TCP pings) and PauseTolerance 0, so that its suspicion timeout
// follows memberlist's formula SuspicionMult·max(1, log10 N)·ProbeInterval
// instead of the 5 s pause tolerance. swim's own mechanisms with no
// memberlist counterpart (aligned probing, final check, any traffic as a
// heartbeat) stay on.
//
// Encrypted (-encrypt): a third pass runs every library at its LAN defaults
// with encryption and a cluster label on: one fixed AES-256 test key
// (swim: Config.Security.Keys and Label; memberlist: SecretKey and Label) on every
// member. Its table sets each library's figures against its own plaintext
// LAN-defaults run, for the cost of encryption (CPU and bytes per member).
//
// The search (-search) looks for the largest N each library keeps stable:
// every join succeeded, no false death while joining nor over
// -search-window, and the median member sees all N at its end (a member
// that missed a rumor waits for anti-entropy, which is slow, not unstable;
// full convergence is reported apart). It walks the doubling ladder
// -search-from, 2×, … up to -max-n, reusing the LAN-defaults runs above,
// stops at the first failure, and starts no run after -search-budget, nor
// one whose memory (extrapolated from the last run, quadratic in N) or file
// descriptors would not fit.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/swim-go/swim/internal/compare/harness"
)

type options struct {
	sizes        []int
	bootBound    time.Duration
	bootPerNode  time.Duration
	settle       time.Duration
	window       time.Duration
	crashBound   time.Duration
	crashWatch   time.Duration
	loss         float64
	lossWindow   time.Duration
	matched      bool
	search       bool
	searchFrom   int
	maxN         int
	searchWindow time.Duration
	searchBudget time.Duration
	joinPar      int
	joinRate     float64
	poll         time.Duration
	libs         []string
	jsonPath     string
	quiet        bool
	memFraction  float64
	isolate      bool
	encrypt      bool
}

func (o *options) bootBoundFor(n int) time.Duration {
	return max(o.bootBound, time.Duration(n)*o.bootPerNode)
}

func (o *options) logf(format string, args ...any) {
	if o.quiet {
		return
	}
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// The settings of a run, as results name them.
const (
	settingsLAN       = "lan-defaults"
	settingsMatched   = "matched"
	settingsEncrypted = "lan-defaults+encrypted"
)

func settingsName(matched bool) string {
	if matched {
		return settingsMatched
	}
	return settingsLAN
}

func main() {
	o := &options{}
	sizes := flag.String("n", "64,256,1024", "cluster sizes, comma-separated")
	flag.DurationVar(&o.bootBound, "boot-bound", 60*time.Second, "bound on bootstrap convergence (at least; see -boot-per-node)")
	flag.DurationVar(&o.bootPerNode, "boot-per-node", 10*time.Millisecond, "bootstrap bound per member, for large N: bound = max(-boot-bound, N × this)")
	flag.DurationVar(&o.settle, "settle", 15*time.Second, "pause between bootstrap and the steady-state window")
	flag.DurationVar(&o.window, "window", 20*time.Second, "steady-state measurement window")
	flag.DurationVar(&o.crashBound, "crash-bound", 60*time.Second, "bound on crash detection")
	flag.DurationVar(&o.crashWatch, "crash-watch", 0, "how long the crash phase goes on counting false deaths after every survivor knew")
	flag.Float64Var(&o.loss, "loss", 0.3, "fraction of UDP packets dropped in the loss scenario (0 skips it)")
	flag.DurationVar(&o.lossWindow, "loss-window", 15*time.Second, "duration of the loss scenario")
	flag.BoolVar(&o.matched, "matched", true, "also run swim at memberlist-matched settings")
	flag.BoolVar(&o.encrypt, "encrypt", false, "also run every library at its LAN defaults with encryption (a fixed AES-256 test key) and a label, against its plaintext figures")
	flag.BoolVar(&o.search, "search", true, "search for the largest N each library keeps stable")
	flag.IntVar(&o.searchFrom, "search-from", 256, "first N of the search ladder")
	flag.IntVar(&o.maxN, "max-n", 8192, "largest N the search tries")
	flag.DurationVar(&o.searchWindow, "search-window", 15*time.Second, "how long a converged cluster must stay free of false deaths in the search")
	flag.DurationVar(&o.searchBudget, "search-budget", 10*time.Minute, "no search run starts after this much search time")
	flag.IntVar(&o.joinPar, "join-par", 16, "joins in flight at once during bootstrap")
	flag.Float64Var(&o.joinRate, "join-rate", 0, "joins started per second at most during bootstrap (0: no limit beyond -join-par)")
	flag.DurationVar(&o.poll, "poll", 250*time.Millisecond, "how often convergence is checked during bootstrap")
	libs := flag.String("libs", "swim,memberlist", "libraries to run")
	flag.BoolVar(&swimDirect, "swim-direct", true, "swim handles packets on the transport's reader goroutine (false: through the Packets channel)")
	flag.IntVar(&swimRetransmitMult, "swim-retransmit-mult", 0, "swim's RetransmitMult instead of its default (0: the default), for experiments")
	flag.IntVar(&swimGossipNodes, "swim-gossip-nodes", 0, "swim's GossipNodes instead of its default (0: the default), for experiments")
	flag.BoolVar(&o.isolate, "isolate", true, "run each cluster in a process of its own (see isolate.go)")
	childSpec := flag.String(childFlag, "", "internal: run the one cluster this JSON plan describes and print its result")
	flag.BoolVar(&traceFalse, "trace", false, "log every false death on stderr, the worst scheduling delay of each second over 100 ms, and swim's counters summed over the members after the bootstrap and over the window")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file (of the runs themselves only with -isolate=false)")
	requireStable := flag.Bool("require-stable", false, "exit with status 1 unless every run converged within its bound and no member was falsely reported dead (bootstrap, window, crash phase)")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file when it ends (of the runs themselves only with -isolate=false)")
	flag.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file (- for stdout)")
	flag.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	flag.Float64Var(&o.memFraction, "mem-fraction", 0.6, "the search skips an N whose extrapolated memory exceeds this fraction of MemAvailable")
	flag.Parse()
	var err error
	if o.sizes, err = harness.ParseSizes(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	for l := range strings.SplitSeq(*libs, ",") {
		switch l = strings.TrimSpace(l); l {
		case "swim", "memberlist":
			o.libs = append(o.libs, l)
		case "":
		default:
			fmt.Fprintf(os.Stderr, "compare: unknown library %q\n", l)
			os.Exit(2)
		}
	}
	if o.joinPar < 1 {
		o.joinPar = 1
	}
	if o.joinRate < 0 || o.joinRate > 1e6 {
		// Beyond a million a second the ticker's period rounds to nothing.
		fmt.Fprintf(os.Stderr, "compare: -join-rate must be between 0 and 1e6, is %g\n", o.joinRate)
		os.Exit(2)
	}
	if traceFalse {
		go traceLag()
	}
	if *childSpec != "" {
		runChild(*childSpec, o)
		return
	}
	stopProfile := func() {}
	if *cpuProfile != "" {
		if stopProfile, err = startCPUProfile(*cpuProfile); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
	}
	rep := run(o)
	stopProfile()
	if *memProfile != "" {
		if err := writeAllocProfile(*memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "compare: allocation profile:", err)
			os.Exit(1)
		}
	}
	printReport(os.Stdout, rep)
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, rep); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
	}
	if *requireStable {
		if bad := unstable(rep.Results); len(bad) > 0 {
			for _, b := range bad {
				fmt.Fprintln(os.Stderr, "compare: not stable:", b)
			}
			os.Exit(1)
		}
	}
}

// unstable describes the runs that did not converge or reported a running
// member gone, for -require-stable.
func unstable(results []result) []string {
	var bad []string
	for _, r := range results {
		id := fmt.Sprintf("%s %s N=%d", r.Library, r.Settings, r.N)
		switch {
		case r.Error != "":
			bad = append(bad, id+": "+r.Error)
		case !r.Converged:
			bad = append(bad, fmt.Sprintf("%s: did not converge within %.0f s (%d of %d joins)", id, r.BootBound, r.Joined, r.N-1))
		case r.FalseBoot+r.FalseSteady+r.FalseCrash+r.FalseLoss > 0:
			bad = append(bad, fmt.Sprintf("%s: false deaths: %d while booting, %d in the window, %d in the crash phase, %d under loss", id, r.FalseBoot, r.FalseSteady, r.FalseCrash, r.FalseLoss))
		}
	}
	return bad
}

// writeAllocProfile writes what the process allocated since it started, by
// call site (go tool pprof -sample_index=alloc_space).
func writeAllocProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile profiles the process into path until the returned
// function is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "compare: cpu profile:", err)
		}
	}, nil
}

func libByName(name string) library {
	if name == "swim" {
		return swimLib{}
	}
	return mlLib{}
}

// report is everything one invocation measured.
type report struct {
	Date        string            `json:"date"`
	Command     string            `json:"command"`
	NumCPU      int               `json:"num_cpu"`
	GOMAXPROCS  int               `json:"gomaxprocs"`
	Platform    string            `json:"platform"`
	GoVersion   string            `json:"go_version"`
	CPUModel    string            `json:"cpu_model,omitempty"`
	LoadStart   string            `json:"loadavg_start"`
	LoadEnd     string            `json:"loadavg_end"`
	WallSeconds float64           `json:"wall_s"`
	Sizes       []int             `json:"sizes"`
	Libraries   []string          `json:"libraries"`
	Loss        float64           `json:"loss"`
	Window      float64           `json:"window_s"`
	Results     []result          `json:"results"`
	Search      map[string]search `json:"search,omitempty"`
	Options     map[string]string `json:"options"`
}

// search is the outcome of the largest-stable-N search for one library.
type search struct {
	Largest int          `json:"largest_stable_n"` // 0: none stable
	Steps   []searchStep `json:"steps"`
	Stopped string       `json:"stopped"` // why the search ended
}

type searchStep struct {
	N      int     `json:"n"`
	Stable bool    `json:"stable"`
	Reused bool    `json:"reused"` // from the LAN-defaults runs
	Note   string  `json:"note"`
	Wall   float64 `json:"wall_s"`
}

func run(o *options) *report {
	start := time.Now()
	rep := &report{
		Date:       start.UTC().Format("2006-01-02 15:04 UTC"),
		Command:    commandLine(),
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
		GoVersion:  runtime.Version(),
		CPUModel:   cpuModel(),
		LoadStart:  loadavg(),
		Sizes:      o.sizes,
		Libraries:  o.libs,
		Loss:       o.loss,
		Window:     o.window.Seconds(),
		Options:    map[string]string{},
	}
	flag.VisitAll(func(f *flag.Flag) { rep.Options[f.Name] = f.Value.String() })
	o.logf("load average at start: %s", rep.LoadStart)

	passes := []plan{{}}
	if o.matched {
		passes = append(passes, plan{matched: true})
	}
	if o.encrypt {
		passes = append(passes, plan{encrypted: true})
	}
	for _, pass := range passes {
		for _, n := range o.sizes {
			for _, l := range o.libs {
				if pass.matched && l == "memberlist" {
					continue // memberlist runs its LAN defaults in both passes
				}
				p := plan{n: n, matched: pass.matched, encrypted: pass.encrypted, window: o.window, crash: true, loss: o.loss}
				o.logf("%s, %s, N=%d", l, p.settings(), n)
				r := runIsolated(libByName(l), p, o)
				if r.Error != "" {
					o.logf("  error: %s", r.Error)
				}
				rep.Results = append(rep.Results, r)
			}
		}
	}
	if o.search {
		rep.Search = map[string]search{}
		budgetEnd := time.Now().Add(o.searchBudget)
		for _, l := range o.libs {
			rep.Search[l] = runSearch(libByName(l), rep.Results, budgetEnd, o)
		}
	}
	rep.LoadEnd = loadavg()
	rep.WallSeconds = time.Since(start).Seconds()
	o.logf("load average at end: %s; wall time %s", rep.LoadEnd, time.Since(start).Round(time.Second))
	return rep
}

// runSearch walks the doubling ladder for one library: it starts at the
// largest stable N of the LAN-defaults runs (or below the smallest failed
// one) and stops at the first N that is not stable.
func runSearch(lib library, prior []result, budgetEnd time.Time, o *options) search {
	var s search
	known := map[int]*result{}
	for i := range prior {
		r := &prior[i]
		if r.Library == lib.name() && r.Settings == settingsName(false) {
			known[r.N] = r
		}
	}
	var ladder []int
	for n := o.searchFrom; n <= o.maxN; n *= 2 {
		ladder = append(ladder, n)
	}
	// Skip the rungs below the largest known stable N, when no known
	// failure lies below it.
	startAt := 0
	for i, n := range ladder {
		if r, ok := known[n]; ok {
			if !r.stable() {
				break
			}
			startAt = i
		}
	}
	var lastStable *result
	for _, n := range ladder[startAt:] {
		if r, ok := known[n]; ok {
			st := searchStep{N: n, Stable: r.stable(), Reused: true, Note: stabilityNote(r), Wall: r.WallSeconds}
			s.Steps = append(s.Steps, st)
			if !st.Stable {
				s.Stopped = fmt.Sprintf("not stable at %d", n)
				return s
			}
			s.Largest = n
			lastStable = r
			continue
		}
		if time.Now().After(budgetEnd) {
			s.Stopped = fmt.Sprintf("search budget (%v) spent before N=%d", o.searchBudget, n)
			return s
		}
		if why := wontFit(n, lastStable, o); why != "" {
			s.Stopped = fmt.Sprintf("N=%d not tried: %s", n, why)
			return s
		}
		o.logf("search: %s, N=%d", lib.name(), n)
		r := runIsolated(lib, plan{n: n, window: o.searchWindow}, o)
		st := searchStep{N: n, Stable: r.stable(), Note: stabilityNote(&r), Wall: r.WallSeconds}
		s.Steps = append(s.Steps, st)
		o.logf("  N=%d: %s", n, st.Note)
		if !st.Stable {
			s.Stopped = fmt.Sprintf("not stable at %d", n)
			return s
		}
		s.Largest = n
		lastStable = &r
	}
	s.Stopped = fmt.Sprintf("reached -max-n %d", o.maxN)
	return s
}

func stabilityNote(r *result) string {
	conv := fmt.Sprintf("converged in %.1fs", r.BootSeconds)
	if !r.Converged {
		conv = fmt.Sprintf("not converged in %.0fs (%d of %d joins done, min %d, median %d of %d)", r.BootBound, r.Joined, r.N-1, r.SeenMin, r.SeenMedian, r.N)
	}
	switch {
	case r.Error != "":
		return "error: " + r.Error
	case r.FalseBoot+r.FalseSteady > 0:
		return fmt.Sprintf("flaps: %d false deaths (%d members); %s", r.FalseBoot+r.FalseSteady, r.FalseBootWho+r.FalseSteadyWho, conv)
	case !r.stable():
		return fmt.Sprintf("not stable: %s%s", conv, seenNote(r))
	}
	return fmt.Sprintf("stable: %s, no false death while joining nor over the %.0fs window%s", conv, r.WindowSeconds, seenNote(r))
}

func falseNote(r *result) string {
	if r.FalseBoot+r.FalseSteady == 0 {
		return ", no false death"
	}
	return fmt.Sprintf(", %d false deaths", r.FalseBoot+r.FalseSteady)
}

func seenNote(r *result) string {
	if r.SeenMinSteady == r.N {
		return ""
	}
	return fmt.Sprintf("; after the window min %d, median %d", r.SeenMinSteady, r.SeenMedianSteady)
}

// wontFit says why a search run of n members should not start: its memory
// (per-member state grows with N, so the total with N²), extrapolated from
// ref, or its file descriptors (two sockets per member).
func wontFit(n int, ref *result, o *options) string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		if need := uint64(2*n + 1024); need > lim.Cur {
			return fmt.Sprintf("needs about %d file descriptors, limit %d", need, lim.Cur)
		}
	}
	if ref == nil || ref.HeapPerNode <= 0 {
		return ""
	}
	r := float64(n) / float64(ref.N)
	est := (ref.HeapPerNode + max(ref.StackPerNode, 0)) * float64(ref.N) * r * r
	if avail := memAvailable(); avail > 0 && est > o.memFraction*float64(avail) {
		return fmt.Sprintf("needs about %.1f GiB (extrapolated from N=%d), %.1f GiB available", est/(1<<30), ref.N, float64(avail)/(1<<30))
	}
	return ""
}

func memAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// commandLine is how this run was invoked: the make target's go run, with
// the flags given.
func commandLine() string {
	args := []string{"cd internal/compare && go run ."}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"") {
			a = strconv.Quote(a)
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

func writeJSON(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
