package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/swim-go/swim/internal/compare/procs/agent"
)

// report is what one invocation measured.
type report struct {
	Command    string
	N          int
	Settle     time.Duration
	Windows    int
	Window     time.Duration
	LinkHeader int // bytes the loopback counts per packet beyond its IP length (the probe's)
	NumCPU     int
	CPUModel   string
	GoVersion  string
	Kernel     string
	LoadStart  string
	LoadEnd    string
	Wall       time.Duration
	Libs       []libResult
	// RestartEvery, RestartDown and Hold are the mass restart's
	// (-mass-restart).
	RestartEvery, RestartDown, Hold time.Duration
}

// libResult is one library's run.
type libResult struct {
	Lib string
	// Join is the time in seconds from the join commands until every
	// agent saw N live members, JoinMedian until the median agent did
	// (+Inf when more than half never did).
	Join       float64
	JoinMedian float64
	// JoinNote says how far the join got when it did not converge within
	// -join-bound (Join is then unset); "" when it did.
	JoinNote string
	// JoinRetried agents had a join attempt fail (JoinRetries failures in
	// all; JoinError the first one's error) and tried again after
	// agent.JoinRetry.
	JoinRetried int
	JoinRetries int
	JoinError   string
	// Windows in order; each figure is per member per second, but RSS.
	Windows []window
	// Changes counts the changes of any agent's live count during the
	// windows: 0 in a steady cluster (a flap is two, down and up).
	Changes int
	// Restart is the mass restart's outcome (-mass-restart), nil without.
	Restart *restartResult
}

// restartResult is what a mass restart came to (restart_linux.go).
type restartResult struct {
	Restarted int     // agents killed and started again
	Span      float64 // seconds from the first kill to the last start
	// Healed is the seconds from the last restart until every agent saw
	// N live members (+Inf if not within -heal-bound); Held whether they
	// all still did -hold later.
	Healed float64
	Held   bool
	// Short are the agents that saw fewer than N at the end of the hold,
	// with their counts.
	Short []string
	// Deaths counts the down reports about a member whose new process was
	// already running, DeadMembers the distinct members they were about,
	// and DeathsLate those made a second or more after the member's
	// restart (not an old rumor's last hop).
	Deaths, DeadMembers, DeathsLate int
	// Pairs is the (member, restarted member) pairs where the member's
	// own process ran before the other's restart; Told those in which it
	// reported the restarted member alive or restarted afterwards.
	Pairs, Told int
}

type window struct {
	Seconds float64 // its measured length
	CPUms   float64 // utime+stime, ms per member per second
	Bytes   float64 // IP bytes (headers included) sent per member per second
	Packets float64 // packets sent per member per second
	RSSMiB  float64 // median VmRSS over the processes at its end
	// The rest of the machine, in CPUs' worth: busy outside the agents,
	// and stolen by the hypervisor. The machine may be shared; these say
	// how much it was.
	OtherCores float64
	StealCores float64
}

// medianOf returns the median over r's windows of the figure f picks.
func (r *libResult) medianOf(f func(window) float64) float64 {
	xs := make([]float64, len(r.Windows))
	for i, w := range r.Windows {
		xs[i] = f(w)
	}
	return median(xs)
}

// row is one line of the table: a figure of every library.
type row struct {
	name   string
	format string // of one value
	value  func(*libResult) float64
	// signed: the figure is among the steady state's that the report
	// compares between swim-signed and swim.
	signed bool
}

var rows = []row{
	{"CPU, ms per member per s", "%.3f", func(r *libResult) float64 { return r.medianOf(func(w window) float64 { return w.CPUms }) }, true},
	{"bytes per member per s (IP+UDP/TCP headers)", "%.1f", func(r *libResult) float64 { return r.medianOf(func(w window) float64 { return w.Bytes }) }, true},
	{"packets per member per s", "%.2f", func(r *libResult) float64 { return r.medianOf(func(w window) float64 { return w.Packets }) }, true},
	{"join through one seed, all see all, s", "%.2f", func(r *libResult) float64 {
		if r.JoinNote != "" {
			return math.NaN() // not converged: see the notes
		}
		return r.Join
	}, false},
	{"join, the median member sees all, s", "%.2f", func(r *libResult) float64 { return r.JoinMedian }, false},
	{"RSS per member (median VmRSS), MiB", "%.1f", func(r *libResult) float64 { return r.medianOf(func(w window) float64 { return w.RSSMiB }) }, true},
}

func printReport(out io.Writer, rep *report) {
	fmt.Fprintf(out, "Per-process comparison: %d processes per library, one member each, LAN defaults, GOMAXPROCS=1,\n", rep.N)
	if rep.RestartEvery > 0 {
		fmt.Fprintf(out, "on the loopback of a private network namespace; a mass restart %v after the join.\n\n", rep.Settle)
	} else {
		fmt.Fprintf(out, "on the loopback of a private network namespace; steady state from %v after the join,\n", rep.Settle)
		fmt.Fprintf(out, "medians over %d windows of %v.\n\n", rep.Windows, rep.Window)
	}
	swim, ml := find(rep.Libs, "swim"), find(rep.Libs, "memberlist")
	signed := find(rep.Libs, "swim-signed")
	steady := false
	libWidth := 0
	for _, r := range rep.Libs {
		steady = steady || len(r.Windows) > 0
		libWidth = max(libWidth, utf8.RuneCountInString(r.Lib))
	}
	nameWidth := 0
	for _, rw := range rows {
		nameWidth = max(nameWidth, utf8.RuneCountInString(rw.name))
	}
	const valueWidth = 12
	line := fmt.Sprintf("%-*s", nameWidth, "per member")
	for _, r := range rep.Libs {
		line += padLeft(r.Lib, valueWidth)
	}
	if swim != nil && ml != nil {
		line += padLeft("swim/memberlist", valueWidth+5)
	}
	fmt.Fprintln(out, line)
	for _, rw := range rows {
		if !steady && !strings.HasPrefix(rw.name, "join") {
			continue // a mass restart measures no steady state
		}
		line := fmt.Sprintf("%-*s", nameWidth, rw.name)
		for i := range rep.Libs {
			v := "—"
			if x := rw.value(&rep.Libs[i]); !math.IsNaN(x) && !math.IsInf(x, 0) {
				v = fmt.Sprintf(rw.format, x)
			}
			line += padLeft(v, valueWidth)
		}
		if swim != nil && ml != nil {
			line += padLeft(ratio(rw.value(swim), rw.value(ml)), valueWidth+5)
		}
		fmt.Fprintln(out, line)
	}
	// What signed claims cost: swim with signatures required against swim
	// without, the same binary in the same run.
	if steady && swim != nil && signed != nil {
		fmt.Fprintln(out, "\nSigned claims required against none (swim-signed / swim):")
		for _, rw := range rows {
			if rw.signed {
				fmt.Fprintf(out, "%-*s%s\n", nameWidth, rw.name, padLeft(ratio(rw.value(signed), rw.value(swim)), valueWidth))
			}
		}
	}

	printRestarts(out, rep)
	if steady {
		fmt.Fprintln(out, "\nEach window: CPU ms / bytes / packets per member per s; RSS MiB; the rest of the machine:")
		fmt.Fprintln(out, "CPUs busy outside the agents + CPUs stolen by the hypervisor")
		for _, r := range rep.Libs {
			for i, w := range r.Windows {
				fmt.Fprintf(out, "  %-*s  %d: %.3f / %.1f / %.2f; %.1f; %.2f + %.2f\n",
					libWidth, r.Lib, i+1, w.CPUms, w.Bytes, w.Packets, w.RSSMiB, w.OtherCores, w.StealCores)
			}
		}
	}
	fmt.Fprintln(out, "\nNotes:")
	// Each process's count is rounded down to a tick at both ends of a
	// window: an error within ±1 tick, about 0.41 tick standard deviation
	// (the difference of two uniform roundings), independent across the
	// processes.
	if steady {
		tickSD := 0.41 * math.Sqrt(float64(rep.N)) * 1000 / userHZ / (float64(rep.N) * rep.Window.Seconds())
		fmt.Fprintf(out, "- CPU: utime+stime from /proc/<pid>/stat (%d Hz ticks), summed over the processes; their rounding\n"+
			"  to ticks blurs each window's figure by about %.3f ms per member per s (one standard deviation).\n", userHZ, tickSD)
		fmt.Fprintf(out, "- bytes: the namespace loopback's tx_bytes, which counts each packet once; the probe found it\n"+
			"  counts %d bytes per packet beyond the IP packet (subtracted), so the figure is IP header +\n"+
			"  UDP or TCP header + payload, TCP handshakes and acks included.\n", rep.LinkHeader)
	}
	for _, r := range rep.Libs {
		if r.JoinNote != "" {
			fmt.Fprintf(out, "- %s: join %s.\n", r.Lib, r.JoinNote)
		}
		if r.JoinRetried > 0 {
			fmt.Fprintf(out, "- %s: %d of %d joins failed at first (%d failed attempts in all, retried after %v; the join\n"+
				"  time includes them); the first error: %s\n", r.Lib, r.JoinRetried, rep.N-1, r.JoinRetries, agent.JoinRetry, r.JoinError)
		}
		if r.Changes > 0 {
			fmt.Fprintf(out, "- %s: %d changes of a member's live count during the windows (a steady cluster has none).\n", r.Lib, r.Changes)
		}
	}
	fmt.Fprintf(out, "- machine: %d CPUs (%s), %s, kernel %s; load average %s at start, %s at end; %v in all.\n",
		rep.NumCPU, rep.CPUModel, rep.GoVersion, rep.Kernel, rep.LoadStart, rep.LoadEnd, rep.Wall.Round(time.Second))
	fmt.Fprintf(out, "- command: %s\n", rep.Command)
}

// padLeft right-aligns s in w columns, counting runes (the ratios' "×" is
// two bytes).
func padLeft(s string, w int) string {
	return strings.Repeat(" ", max(0, w-utf8.RuneCountInString(s))) + s
}

func find(rs []libResult, lib string) *libResult {
	for i := range rs {
		if rs[i].Lib == lib {
			return &rs[i]
		}
	}
	return nil
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return "n/a"
	}
	if r := a / b; r < 0.1 {
		return fmt.Sprintf("%.3f×", r) // two decimals would read 0.00
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// machine fills in what the report says of the machine and the command.
func (rep *report) machine() {
	rep.NumCPU = runtime.NumCPU()
	rep.GoVersion = runtime.Version()
	rep.CPUModel = cpuModel()
	rep.Kernel = strings.TrimSpace(readString("/proc/sys/kernel/osrelease"))
	args := []string{"cd internal/compare && go run ./procs"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"") {
			a = strconv.Quote(a)
		}
		args = append(args, a)
	}
	rep.Command = strings.Join(args, " ")
}

func loadavg() string {
	f := strings.Fields(readString("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	for line := range strings.SplitSeq(readString("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown model"
}

func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// printRestarts prints the mass restarts' table, if there were any.
func printRestarts(out io.Writer, rep *report) {
	any, width := false, 10
	for _, r := range rep.Libs {
		any = any || r.Restart != nil
		width = max(width, utf8.RuneCountInString(r.Lib))
	}
	indent := strings.Repeat(" ", width+3)
	if !any {
		return
	}
	fmt.Fprintf(out, "\nMass restart: every agent but the first killed (SIGKILL), one every %v, and a new process\n"+
		"started at its port %v after its kill, joining through the first:\n", rep.RestartEvery, rep.RestartDown)
	for _, r := range rep.Libs {
		x := r.Restart
		if x == nil {
			continue
		}
		healed := "not within the bound"
		if !math.IsInf(x.Healed, 1) {
			healed = fmt.Sprintf("%.2f s", x.Healed)
		}
		fmt.Fprintf(out, "  %-*s %d restarted in %.1f s; every agent sees %d: %s after the last restart; held %v: %v;\n"+
			"%sdeaths reported of a member whose new process ran: %d (%d members; %d a second or more after its restart);\n"+
			"%srestarts told (the member reported alive or restarted after its new process started): %d of %d\n",
			width, r.Lib, x.Restarted, x.Span, rep.N, healed, rep.Hold, x.Held,
			indent, x.Deaths, x.DeadMembers, x.DeathsLate, indent, x.Told, x.Pairs)
		if len(x.Short) > 0 {
			fmt.Fprintf(out, "%sshort at the end: %s\n", indent, strings.Join(x.Short, ", "))
		}
	}
}
