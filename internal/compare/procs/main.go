// Command procs compares swim and hashicorp/memberlist v0.7.0 on real
// processes: -n processes per library, one member each, every one with its
// library's LAN defaults and GOMAXPROCS=1, on 127.0.0.1 inside a private
// network namespace (the chaos suite's, internal/chaos), so that the
// namespace's loopback carries their traffic and nothing else. Run it with
// `make procs` from the repository root, or `go run ./procs` in
// internal/compare; `go run ./procs -h` lists the flags. It needs Linux and
// root, and skips elsewhere.
//
// The libraries run one after the other in the same namespace, in the
// order of -libs. For each:
//
//   - It builds the library's agent (swimagent, mlagent: one binary per
//     library, so that neither carries the other's code) and starts -n of
//     them, each on a port of its own, and waits until each listens.
//   - Join: it tells every agent but the first to join through the first,
//     all at once, and measures the time from then until every agent sees
//     -n live members, and until the median agent does (each agent prints
//     its count whenever it changes). An agent whose join fails tries
//     again 100 ms later, as an application's start-up would, and the
//     table's notes count the retries: swim's seed refuses the streams
//     of one source address beyond its share (MaxStreamsPerSource) once
//     its stream slots are full, and here every agent's TCP comes from
//     127.0.0.1. A cluster that does not converge within -join-bound is
//     reported so, and measured all the same.
//   - Steady state: -settle after that, -windows consecutive windows of
//     -window each. Per window: CPU per member per second, the sum over the
//     processes of utime+stime (/proc/<pid>/stat) over the window, divided
//     by -n and the window's length; bytes and packets sent per member per
//     second, from the loopback's tx counters, divided the same way; the
//     median VmRSS (/proc/<pid>/status) over the processes at the window's
//     end.
//
// The table gives the median over the windows for each library, and the
// ratio swim/memberlist.
//
// With -mass-restart (`make restarts`) the windows give way to a mass
// restart after -settle: every agent but the first is killed, one every
// -restart-every, and a new process under its name starts at its port
// -restart-down after its kill and joins through the first
// (restart_linux.go). It reports the time until every agent sees -n again,
// whether they all still do -hold later, the deaths the agents reported
// of members whose new process ran, and how many agents were told of
// each restart (the member reported up or restarted after it).
//
// What the bytes count: every packet the members send crosses the
// namespace's loopback once and is counted once by its tx counters (UDP,
// and TCP with its handshakes, acks and teardowns). Before the first
// library runs, a probe in the fresh namespace sends UDP datagrams of known
// sizes to itself and reads the counters before and after; the bytes each
// packet added beyond its IP length (IP header, UDP header, payload) are
// subtracted from every packet measured. On the kernels tried that is 0:
// the loopback counts the IP packet, without the 14-byte Ethernet header it
// carries on its way (loopback_xmit reads the length after eth_type_trans
// has pulled it). The probe also checks that /proc/<pid>/net/dev, which the
// driver reads for a process in the namespace, matches the namespace's
// /sys/class/net/lo/statistics.
//
// The driver cleans up in every exit path it controls (an error, SIGINT,
// SIGTERM): it kills the agents and deletes the namespace and the build
// directory. Killed itself, it leaves its agents to die of their parent
// death signal and of their stdin closing; the namespace (swimchaos-<pid>)
// and the build directory (swimchaos-bin-<pid>-*) are then removed by
// internal/chaos/clean.sh (`make chaos-clean`), which also runs before
// `make procs`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	n          int
	libs       []string
	settle     time.Duration
	windows    int
	window     time.Duration
	readyBound time.Duration
	joinBound  time.Duration
	basePort   int
	goCmd      string
	keepLogs   bool
	// massRestart replaces the steady-state windows with a mass restart
	// (restart_linux.go).
	massRestart  bool
	restartEvery time.Duration
	restartDown  time.Duration
	healBound    time.Duration
	holdFor      time.Duration
}

// libs are the libraries the driver knows, by name, with their agent's
// package (under this module).
var libs = map[string]string{
	"swim":       "github.com/swim-go/swim/internal/compare/procs/swimagent",
	"memberlist": "github.com/swim-go/swim/internal/compare/procs/mlagent",
}

// portSpan is the range of ports each library gets, from -base-port on, so
// that the second library never binds a port the first left in TIME_WAIT.
const portSpan = 1000

func main() {
	o := &options{}
	flag.IntVar(&o.n, "n", 64, "processes (members) per library")
	libList := flag.String("libs", "swim,memberlist", "libraries to run, in this order")
	flag.DurationVar(&o.settle, "settle", 40*time.Second, "wait after the join before the first window")
	flag.IntVar(&o.windows, "windows", 3, "steady-state windows; the table gives their medians")
	// A minute is a multiple of both libraries' push-pull periods at 64
	// members: memberlist's is exactly 60 s there (30 s, doubled above 32
	// members), so each member makes one full-state exchange per window;
	// in 20 s windows a member makes one or none, and memberlist's bytes
	// per member varied by ±20% from window to window. swim's interval is
	// random in [15 s, 45 s), and over a minute its count varies by a few
	// percent.
	flag.DurationVar(&o.window, "window", time.Minute, "length of each window")
	flag.DurationVar(&o.readyBound, "ready-bound", 30*time.Second, "bound on the agents' start")
	// Beyond memberlist's push-pull period at 64 members (60 s): a member
	// that missed another's alive rumors during the join storm learns of
	// it only from its next full-state exchange.
	flag.DurationVar(&o.joinBound, "join-bound", 2*time.Minute, "bound on the join (every agent sees -n)")
	flag.IntVar(&o.basePort, "base-port", 20000, fmt.Sprintf("the k-th library's agents bind base-port + %d·k + i", portSpan))
	flag.StringVar(&o.goCmd, "go", "go", "go command, to build the agents")
	flag.BoolVar(&o.keepLogs, "keep-logs", false, "keep the agents' stderr logs (the path is printed)")
	flag.BoolVar(&o.massRestart, "mass-restart", false, "after the join and -settle, kill every agent but the first and start a new one in its place, one every -restart-every, instead of the steady-state windows")
	flag.DurationVar(&o.restartEvery, "restart-every", 100*time.Millisecond, "with -mass-restart: the time from one kill to the next")
	flag.DurationVar(&o.restartDown, "restart-down", 0, "with -mass-restart: how long each agent stays down before its new process starts")
	flag.DurationVar(&o.healBound, "heal-bound", 30*time.Second, "with -mass-restart: bound on the time until every agent sees -n again")
	flag.DurationVar(&o.holdFor, "hold", 30*time.Second, "with -mass-restart: how long the views are watched after that")
	loProbe := flag.Bool(loProbeFlag, false, "internal: probe the loopback counters of the current network namespace and print the result")
	flag.Parse()
	if *loProbe {
		os.Exit(runLoProbe())
	}
	for l := range strings.SplitSeq(*libList, ",") {
		l = strings.TrimSpace(l)
		if _, ok := libs[l]; !ok {
			fmt.Fprintf(os.Stderr, "procs: unknown library %q (want swim, memberlist)\n", l)
			os.Exit(2)
		}
		o.libs = append(o.libs, l)
	}
	if o.n < 2 || o.n > portSpan || o.windows < 1 || o.window <= 0 {
		fmt.Fprintf(os.Stderr, "procs: want 2 ≤ -n ≤ %d, -windows ≥ 1 and -window > 0\n", portSpan)
		os.Exit(2)
	}
	if why := unsupported(); why != "" {
		fmt.Fprintln(os.Stderr, "procs: skipped:", why)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	rep, err := run(ctx, o)
	if rep != nil && len(rep.Libs) > 0 {
		printReport(os.Stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "procs:", err)
		stop()
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
