// Command scale measures how fast and how small the simulator runs the real
// protocol code: n members (10,000 by default) for a span of virtual time
// (10 minutes), one process, LAN defaults, no faults but one crash a minute.
// It reports members × virtual seconds per wall second, the virtual/wall
// ratio, and memory per member (heap in use after a collection, and the
// process's peak resident set).
//
//	go run ./internal/scale -n 10000 -duration 10m
//
// The cluster starts converged (sim.Cluster.Converge: every member handed
// the full membership at once, as a join through an all-knowing seed would),
// so the run measures a running cluster, not a join storm; -boot seed runs
// the storm instead (everyone joins through one seed at once), which is far
// heavier at this size.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
}

type options struct {
	n        int
	duration time.Duration
	boot     string
	seed     uint64
	crashes  time.Duration
	memLimit int64
	cpuProf  string
	warmup   time.Duration
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.n, "n", 10000, "members")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "virtual time to run after the boot")
	fs.StringVar(&o.boot, "boot", "converge", "how the cluster starts: converge (handed the full membership) or seed (all join through one seed at once)")
	fs.Uint64Var(&o.seed, "seed", 1, "simulation seed")
	fs.DurationVar(&o.crashes, "crash-every", time.Minute, "crash one member this often (0: never)")
	fs.Int64Var(&o.memLimit, "memlimit", 3<<30, "soft memory limit for the Go runtime, bytes (0: none); the 10,000-member table alone is 2.6 GiB")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the measured run to this file")
	fs.DurationVar(&o.warmup, "warmup", 0, "virtual time to run after the boot before measuring")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case o.n < 2:
		return errors.New("-n must be at least 2")
	case o.duration <= 0:
		return errors.New("-duration must be positive")
	case o.boot != "converge" && o.boot != "seed":
		return fmt.Errorf("-boot %q: want converge or seed", o.boot)
	case o.crashes < 0:
		return errors.New("-crash-every must not be negative")
	}
	if o.memLimit > 0 {
		debug.SetMemoryLimit(o.memLimit)
	}
	return measure(o, stdout, stderr)
}

func measure(o options, stdout, stderr io.Writer) error {
	var leaves, suspects uint64
	c := sim.New(sim.Options{
		Seed:          o.seed,
		NodeFactory:   sim.MachineFactory(func(string) *swim.Config { return swim.DefaultLANConfig() }),
		DisableLog:    true,
		CheckInterval: time.Second,
		OnEvent: func(r sim.Record) {
			switch r.Event.Kind {
			case swim.EventLeave:
				leaves++
			case swim.EventSuspect:
				suspects++
			}
		},
	})
	wall := time.Now()
	nodes, err := c.AddNodes("m", o.n)
	if err != nil {
		return err
	}
	switch o.boot {
	case "converge":
		if err := c.Converge(); err != nil {
			return err
		}
	case "seed":
		seed := nodes[0].Addr()
		for _, n := range nodes[1:] {
			if err := c.Do(n.Name(), func(node sim.Node, now time.Time) {
				node.(*swim.Machine).Join(now, []netip.AddrPort{seed})
			}); err != nil {
				return err
			}
		}
		if !c.RunUntil(func() bool { return allSeeAll(c, o.n) }, 10*time.Minute) {
			return fmt.Errorf("no convergence within 10 virtual minutes of the boot")
		}
	}
	bootWall, bootVirtual := time.Since(wall), c.Elapsed()
	fmt.Fprintf(stderr, "boot (%s): %v virtual in %v wall\n", o.boot, bootVirtual.Round(time.Millisecond), bootWall.Round(time.Millisecond))

	if o.warmup > 0 {
		w := time.Now()
		c.Run(o.warmup)
		fmt.Fprintf(stderr, "warmup: %v virtual in %v wall\n", o.warmup, time.Since(w).Round(time.Millisecond))
	}
	if o.cpuProf != "" {
		f, err := os.Create(o.cpuProf)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start, startVirtual := time.Now(), c.Elapsed()
	startCounters := c.Counters()
	crashed := 0
	step := min(10*time.Second, o.duration)
	for done := time.Duration(0); done < o.duration; {
		d := min(step, o.duration-done)
		c.Run(d)
		done += d
		if o.crashes > 0 && done%o.crashes == 0 && done < o.duration {
			// The members crash in name order from the end, never the
			// one everybody joined through.
			if err := c.Crash(nodes[len(nodes)-1-crashed].Name()); err != nil {
				return err
			}
			crashed++
		}
		el := time.Since(start)
		fmt.Fprintf(stderr, "\r%v / %v virtual, %v wall (%.2fx real time)   ", done, o.duration, el.Round(time.Second), done.Seconds()/el.Seconds())
	}
	fmt.Fprintln(stderr)
	steadyWall := time.Since(start)
	virtual := c.Elapsed() - startVirtual
	end := c.Counters()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(c) // measured above: not collected before it
	n := float64(o.n)
	fmt.Fprintf(stdout, "members                       %d (boot: %s, %v virtual in %v wall)\n", o.n, o.boot, bootVirtual.Round(time.Millisecond), bootWall.Round(time.Second))
	fmt.Fprintf(stdout, "virtual time                  %v in %v wall: %.2fx faster than real time\n", virtual, steadyWall.Round(time.Second), virtual.Seconds()/steadyWall.Seconds())
	fmt.Fprintf(stdout, "member-seconds per wall second %.0f\n", n*virtual.Seconds()/steadyWall.Seconds())
	fmt.Fprintf(stdout, "heap in use                   %d MiB: %.0f bytes per member, %.1f per member per member\n", ms.HeapInuse>>20, float64(ms.HeapInuse)/n, float64(ms.HeapInuse)/(n*n))
	if rss, ok := peakRSS(); ok {
		fmt.Fprintf(stdout, "peak resident set             %d MiB\n", rss>>20)
	}
	pkts := end.PacketsSent - startCounters.PacketsSent
	bytes := end.BytesSent - startCounters.BytesSent
	fmt.Fprintf(stdout, "traffic per member            %.1f packets/s, %.0f bytes/s\n", float64(pkts)/n/virtual.Seconds(), float64(bytes)/n/virtual.Seconds())
	fmt.Fprintf(stdout, "crashes / death and suspect events   %d / %d, %d (each crash is reported by every survivor)\n", crashed, leaves, suspects)
	return nil
}

// allSeeAll reports whether every up member sees n members alive.
func allSeeAll(c *sim.Cluster, n int) bool {
	for _, nd := range c.Nodes() {
		if nd.Up() && nd.Machine().NumMembers() != n {
			return false
		}
	}
	return true
}

// peakRSS reads the process's peak resident set (Linux).
func peakRSS() (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10, true
			}
		}
	}
	return 0, false
}
