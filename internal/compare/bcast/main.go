// Command bcast puts the same broadcast load on swim and on
// hashicorp/memberlist v0.7.0 and prints, per cluster size, one table with
// both libraries side by side at each rate. Run it with `make broadcast`
// from the repository root, or `go run ./bcast` in internal/compare;
// `go run ./bcast -h` lists the flags.
//
// Every cluster lives in one process on 127.0.0.1, each member on a free
// port of its own, over its library's own UDP+TCP transport wrapped to
// count the bytes it sends, at the library's LAN defaults
// (swim.DefaultLANConfig, memberlist.DefaultLANConfig). Each run (one
// library, one N, one rate) is a fresh cluster, by default in a child
// process of its own (-isolate), so that what one run leaves behind
// (memberlist's pending timers, the heap) does not land in the next one's
// CPU figures; inside it the members are shut down and their goroutines
// waited for at the end.
//
// A run: N members join through member 0; once every member sees N live
// ones and -settle has passed, one ticker goroutine schedules
// rate × -load broadcasts of 100-byte payloads, evenly spaced, their
// origins taken round robin over the members. Each member has a sender
// goroutine that makes the library call, so that a call that waits holds
// up neither the ticker nor the other origins (a call due while its
// origin's sender is still 16 calls behind is skipped and counted as not
// sent, "backlog"). The payload carries the broadcast's identifier, its
// origin and the time of the call on the process's monotonic clock, so the
// receivers' handlers give the delivery latency directly. After the load,
// the run waits up to -drain for stragglers (less once every sent
// broadcast is complete and no copy has arrived for 2 s).
//
//   - swim: Memberlist.Broadcast(payload, ""), received by Config.Messages
//     (Kind MessageBroadcast); with the LAN defaults broadcasts travel on
//     epidemic broadcast trees (Broadcasts.Trees). A call refused with
//     ErrBroadcastQueueFull counts as attempted and not sent, so as not
//     complete. The copies received are swim's own counters,
//     Broadcasts.Delivered + Broadcasts.Duplicate, summed over the members.
//   - memberlist: what Serf and dskit build on it: each member's Delegate
//     holds a TransmitLimitedQueue (NumNodes N, RetransmitMult the
//     config's), which memberlist drains into its gossip and probe
//     packets, each broadcast sent RetransmitMult·⌈log10(N+1)⌉ times. The
//     origin queues its broadcast; a member delivers a payload the first
//     time NotifyMsg brings it and queues it once for relaying. The copies
//     received are the NotifyMsg calls, duplicates included.
//
// Reported per library, N and rate: broadcasts attempted (and those not
// sent); the share complete, that is delivered by every member other than
// the origin (nobody fails during a run); over the complete ones, p50 and
// p99 of the time from the Broadcast call to the last member's delivery;
// the copies received per member per broadcast sent (every copy, /
// (sent × (N-1)): 1 is the floor, a broadcast each member gets once);
// process CPU time (getrusage) and bytes sent (UDP payloads and stream
// bytes) per member per second over the load. Rates step up until every
// library has fallen below -stop-below complete at some rate, so that each
// table has both libraries side by side up to where the better one fails;
// under each table a line gives the highest rate at which each library got
// at least 99% complete, and their ratio.
//
// All members share the machine's cores with the harness and with one
// another: at high rates the process, not the network, is the bottleneck,
// for both libraries alike, and the CPU column says how close it is.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/swim-go/swim/internal/compare/harness"
)

type options struct {
	libs      []string
	sizes     []int
	rates     []float64
	load      time.Duration
	drain     time.Duration
	settle    time.Duration
	joinBound time.Duration
	stopBelow float64
	isolate   bool
	jsonPath  string
	verbose   bool
	quiet     bool
}

func (o *options) logf(format string, args ...any) {
	if o.quiet {
		return
	}
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func main() {
	o := &options{}
	libs := flag.String("libs", "swim,memberlist", "libraries to run, comma-separated")
	sizes := flag.String("n", "64,256", "cluster sizes, comma-separated")
	rates := flag.String("rates", "5,10,20,50,100,200,500,1000", "broadcasts per second for the whole cluster, comma-separated, in the order to try")
	flag.DurationVar(&o.load, "load", 20*time.Second, "how long the load lasts")
	flag.DurationVar(&o.drain, "drain", 30*time.Second, "how long after the load to wait for stragglers at most")
	flag.DurationVar(&o.settle, "settle", 10*time.Second, "pause between convergence and the load")
	flag.DurationVar(&o.joinBound, "join-bound", 5*time.Minute, "bound on the join: every member must see N within it (memberlist repairs a missed join by push-pull, every 2 minutes at 256 members)")
	flag.Float64Var(&o.stopBelow, "stop-below", 0.9, "stop stepping the rates up for an N once every library's complete share has fallen below this at some rate")
	flag.BoolVar(&o.isolate, "isolate", true, "run each cluster in a child process of its own")
	flag.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.BoolVar(&o.verbose, "v", false, "log every run's library counters on stderr")
	flag.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	child := flag.String(childFlag, "", "internal: run the one cluster this JSON describes and print its result")
	flag.Parse()

	var err error
	if o.libs, err = parseLibs(*libs); err == nil {
		if o.sizes, err = harness.ParseSizes(*sizes); err == nil {
			o.rates, err = parseRates(*rates)
		}
	}
	if err == nil && (o.load <= 0 || o.drain < 0 || o.settle < 0) {
		err = fmt.Errorf("-load must be positive, -drain and -settle not negative")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bcast:", err)
		os.Exit(2)
	}
	if *child != "" {
		runChild(*child, o)
		return
	}

	rep := &report{
		Date:       time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Command:    commandLine(),
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		LoadStart:  loadavg(),
		Options:    map[string]string{},
	}
	flag.VisitAll(func(f *flag.Flag) {
		if f.Name != childFlag {
			rep.Options[f.Name] = f.Value.String()
		}
	})
	printHeader(os.Stdout, rep)
	start := time.Now()
	for _, n := range o.sizes {
		var rs []result
		short := map[string]bool{}
		for _, rate := range o.rates {
			for _, l := range o.libs {
				o.logf("%s, N=%d, %g broadcasts/s", l, n, rate)
				r := runIsolated(l, n, rate, o)
				if r.Error != "" {
					o.logf("  error: %s", r.Error)
				}
				if r.Error != "" || r.completePct() < 100*o.stopBelow {
					short[l] = true
				}
				rs = append(rs, r)
			}
			if len(short) == len(o.libs) {
				o.logf("N=%d: every library fell below %.0f%% complete at some rate; no higher rate", n, 100*o.stopBelow)
				break
			}
		}
		printTable(os.Stdout, n, o, rs)
		rep.Results = append(rep.Results, rs...)
	}
	rep.LoadEnd = loadavg()
	rep.WallSeconds = time.Since(start).Seconds()
	fmt.Fprintf(os.Stdout, "Load average at the end: %s; wall time %s.\n", rep.LoadEnd, time.Since(start).Round(time.Second))
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bcast:", err)
			os.Exit(1)
		}
	}
}

func parseLibs(s string) ([]string, error) {
	var out []string
	for l := range strings.SplitSeq(s, ",") {
		switch l = strings.TrimSpace(l); l {
		case "swim", "memberlist":
			out = append(out, l)
		case "":
		default:
			return nil, fmt.Errorf("unknown library %q (want swim, memberlist)", l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no library given")
	}
	return out, nil
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		// Beyond a million a second the ticker's period rounds to nothing.
		if err != nil || r <= 0 || r > 1e6 {
			return nil, fmt.Errorf("bad rate %q (want a number of broadcasts per second in (0, 1e6])", f)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rate given")
	}
	return out, nil
}

// Isolation: each run in a child process of this binary, which gets the
// run as a JSON flag and prints its result on a line of its own.
const (
	childFlag   = "child"
	childPrefix = "bcast-result: "
)

type childRun struct {
	Lib  string  `json:"lib"`
	N    int     `json:"n"`
	Rate float64 `json:"rate"`
}

// runIsolated runs one cluster, in a child process unless -isolate=false.
func runIsolated(lib string, n int, rate float64, o *options) result {
	if !o.isolate {
		return runOne(libByName(lib), n, rate, o)
	}
	failed := func(err string) result { return result{Library: lib, N: n, Rate: rate, Error: err} }
	spec, err := json.Marshal(childRun{Lib: lib, N: n, Rate: rate})
	if err != nil {
		return failed(err.Error())
	}
	args := []string{"-" + childFlag + "=" + string(spec)}
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "json" && f.Name != childFlag { // the parent's alone
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return failed(fmt.Sprintf("child process: %v", err))
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if body, ok := strings.CutPrefix(line, childPrefix); ok {
			var r result
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				return failed(fmt.Sprintf("child result: %v", err))
			}
			return r
		}
	}
	return failed("child process printed no result")
}

// runChild is main for a child process: one run, its result on stdout.
func runChild(spec string, o *options) {
	var c childRun
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintln(os.Stderr, "bcast: bad -child run:", err)
		os.Exit(2)
	}
	r := runOne(libByName(c.Lib), c.N, c.Rate, o)
	body, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bcast:", err)
		os.Exit(1)
	}
	fmt.Println(childPrefix + string(body))
}

// report is everything one invocation measured, for -json.
type report struct {
	Date        string            `json:"date"`
	Command     string            `json:"command"`
	NumCPU      int               `json:"num_cpu"`
	GOMAXPROCS  int               `json:"gomaxprocs"`
	GoVersion   string            `json:"go_version"`
	LoadStart   string            `json:"loadavg_start"`
	LoadEnd     string            `json:"loadavg_end"`
	WallSeconds float64           `json:"wall_s"`
	Options     map[string]string `json:"options"`
	Results     []result          `json:"results"`
}

func writeJSON(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return strings.TrimSpace(string(b))
}

// commandLine is how this run was invoked, as from internal/compare.
func commandLine() string {
	args := []string{"go run ./bcast"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"") {
			a = strconv.Quote(a)
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
