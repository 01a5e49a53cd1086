// Command demo shows swim at work on one machine: it builds examples/agent,
// starts five agents on 127.0.0.1, joins them through the first, kills one
// with SIGKILL and reports how long each survivor took to notice, then has
// another leave gracefully. Run it with `make demo` (or `go run
// ./examples/demo`); it needs only the go command on PATH and cleans up its
// processes on exit or Ctrl-C.
//
// With -ui (`make demo DEMO_FLAGS=-ui`) every agent also serves its live
// page (the agent's -http), the demo prints the address of the first
// one's, waits -ui-wait (10s) before the crash so that the page can be
// opened first, and once done keeps the cluster running for -hold (5m
// with -ui, else 0) before it stops the agents; Ctrl-C stops them sooner.
// -ui-addr sets the first agent's page address (default a free port of
// 127.0.0.1).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	clusterSize = 5
	// Each phase gets a bound so that a broken build fails the demo
	// instead of hanging it; a healthy run needs a few seconds in all.
	startTimeout  = 10 * time.Second
	formTimeout   = 15 * time.Second
	detectTimeout = 20 * time.Second
)

// options are the demo's flags.
type options struct {
	verbose bool
	ui      bool          // the agents serve their pages
	uiAddr  string        // the first agent's page address
	uiWait  time.Duration // with ui: before the crash
	hold    time.Duration // how long the cluster runs on once done
}

func main() {
	var o options
	flag.BoolVar(&o.verbose, "v", false, "show the agents' logs")
	flag.BoolVar(&o.ui, "ui", false, "every agent serves its live page; print the first one's address and keep the cluster up for -hold")
	flag.StringVar(&o.uiAddr, "ui-addr", "127.0.0.1:0", "with -ui: the first agent's page address (port 0: a free one)")
	flag.DurationVar(&o.uiWait, "ui-wait", 10*time.Second, "with -ui: time to open the page before the crash")
	hold := flag.Duration("hold", 0, "keep the cluster running this long once done (default 5m with -ui, else 0)")
	flag.Parse()
	o.hold = *hold
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "hold" })
	if o.ui && !set {
		o.hold = 5 * time.Minute
	}
	if o.hold < 0 || o.uiWait < 0 {
		fmt.Fprintln(os.Stderr, "demo: -hold and -ui-wait must not be negative")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}

// event is one line an agent printed, tagged with the agent that printed it.
type event struct {
	T int64 `json:"t"`
	// Ev "http": Addr is the address of the agent's page.
	Ev    string `json:"ev"`
	Node  string `json:"node"`
	Addr  string `json:"addr"`
	State string `json:"state"`

	seenBy string
}

// agent is one running agent process.
type agent struct {
	name string
	cmd  *exec.Cmd
	addr string // from its ready line
	web  string // its page's address, from its http line (with -ui)
	done chan struct{}
}

func run(ctx context.Context, o options) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build the agent: %w", err)
	}
	dir, err := os.MkdirTemp("", "swim-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Println("building examples/agent ...")
	bin := filepath.Join(dir, "agent")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	// The agent is a module of its own (its migrate command needs
	// hashicorp/memberlist, which swim's module must not): it is built in
	// its directory of the swim tree the demo runs in.
	root, err := exec.CommandContext(ctx, goCmd, "list", "-m", "-f", "{{.Dir}}", "github.com/swim-go/swim").Output()
	if err != nil {
		return fmt.Errorf("finding swim's tree (run the demo in it: make demo): %w", err)
	}
	build := exec.CommandContext(ctx, goCmd, "build", "-o", bin, ".")
	build.Dir = filepath.Join(strings.TrimSpace(string(root)), "examples", "agent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build agent: %w", err)
	}

	events := make(chan event, 256)
	var agents []*agent
	var readers sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		// Whatever happened, no agent outlives the demo. Cancelling first
		// releases readers blocked on events nobody reads any more.
		cancel()
		for _, a := range agents {
			_ = a.cmd.Process.Kill()
		}
		for _, a := range agents {
			<-a.done
		}
		readers.Wait()
	}()
	start := func(name string, args ...string) (*agent, error) {
		cmd := exec.Command(bin, append([]string{"-name", name, "-profile", "local", "-bind", "127.0.0.1"}, args...)...)
		if o.verbose { // otherwise the logs go to the null device
			cmd.Stderr = os.Stderr
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		a := &agent{name: name, cmd: cmd, done: make(chan struct{})}
		agents = append(agents, a)
		readers.Go(func() {
			defer close(a.done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var e event
				if json.Unmarshal(sc.Bytes(), &e) != nil {
					continue
				}
				e.seenBy = name
				select {
				case events <- e:
				case <-ctx.Done():
				}
			}
			_ = cmd.Wait()
		})
		return a, nil
	}

	// The view each agent printed: who it saw join, who it saw leave, and
	// when. Only this goroutine reads events, so no lock is needed.
	joined := map[string]map[string]time.Time{}
	left := map[string]map[string]event{}
	suspected := map[string]bool{}
	mark := time.Now() // start of the current phase, for the timings printed
	handle := func(e event) {
		switch e.Ev {
		case "suspect":
			// The first suspicion of a member is the first sign of its
			// failure; the rest is the suspicion spreading.
			if !suspected[e.Node] {
				suspected[e.Node] = true
				fmt.Printf("  %s suspects %s after %.2fs\n", e.seenBy, e.Node, time.Unix(0, e.T).Sub(mark).Seconds())
			}
		case "alive":
			if suspected[e.Node] {
				suspected[e.Node] = false
				fmt.Printf("  %s refuted the suspicion (a false alarm: a busy machine?)\n", e.Node)
			}
		case "ready", "http":
			for _, a := range agents {
				if a.name == e.seenBy && e.Ev == "ready" {
					a.addr = e.Addr
				} else if a.name == e.seenBy {
					a.web = e.Addr
				}
			}
		case "join":
			if joined[e.seenBy] == nil {
				joined[e.seenBy] = map[string]time.Time{}
			}
			joined[e.seenBy][e.Node] = time.Unix(0, e.T)
		case "leave", "left":
			if left[e.seenBy] == nil {
				left[e.seenBy] = map[string]event{}
			}
			left[e.seenBy][e.Node] = e
		}
	}
	// waitUntil handles events until cond holds, or fails after timeout.
	waitUntil := func(what string, timeout time.Duration, cond func() bool) error {
		deadline := time.NewTimer(timeout)
		defer deadline.Stop()
		for !cond() {
			select {
			case e := <-events:
				handle(e)
			case <-deadline.C:
				return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
			case <-ctx.Done():
				return errors.New("interrupted")
			}
		}
		return nil
	}

	// idle handles events for d, and fails only when interrupted.
	idle := func(d time.Duration) error {
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case e := <-events:
				handle(e)
			case <-timer.C:
				return nil
			case <-ctx.Done():
				return errors.New("interrupted")
			}
		}
	}

	names := make([]string, clusterSize)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i+1)
	}

	// The seed takes a free port and says which in its ready line.
	began := time.Now()
	webArgs := func(addr string) []string {
		if !o.ui {
			return nil
		}
		return []string{"-http", addr}
	}
	seed, err := start(names[0], append([]string{"-port", "0"}, webArgs(o.uiAddr)...)...)
	if err != nil {
		return err
	}
	if err := waitUntil(names[0]+" to listen", startTimeout, func() bool { return seed.addr != "" && (!o.ui || seed.web != "") }); err != nil {
		return err
	}
	fmt.Printf("%s listening on %s\n", seed.name, seed.addr)
	if o.ui {
		fmt.Printf("\n  live page of %s: http://%s/\n\n", seed.name, seed.web)
	}
	for _, name := range names[1:] {
		if _, err := start(name, append([]string{"-port", "0", "-join", seed.addr}, webArgs("127.0.0.1:0")...)...); err != nil {
			return err
		}
	}
	fmt.Printf("started %s, joining through %s\n", strings.Join(names[1:], ", "), seed.name)

	sawAll := func(observers []string, others func(string) []string) bool {
		for _, o := range observers {
			for _, n := range others(o) {
				if _, ok := joined[o][n]; !ok {
					return false
				}
			}
		}
		return true
	}
	allBut := func(list []string, drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(list), func(n string) bool { return slices.Contains(drop, n) })
	}
	if err := waitUntil("the cluster to form", formTimeout, func() bool {
		return sawAll(names, func(o string) []string { return allBut(names, o) })
	}); err != nil {
		return err
	}
	fmt.Printf("cluster of %d formed in %.1fs: every member saw the %d others join\n",
		clusterSize, time.Since(began).Seconds(), clusterSize-1)

	// A crash: SIGKILL leaves no chance to say goodbye; the others must
	// notice by themselves (probe, suspicion, death).
	victim := agents[2]
	if o.ui && o.uiWait > 0 {
		fmt.Printf("%s will be killed in %v: open http://%s/ to watch\n", victim.name, o.uiWait, seed.web)
		if err := idle(o.uiWait); err != nil {
			return err
		}
	}
	killed := time.Now()
	mark = killed
	if err := victim.cmd.Process.Kill(); err != nil {
		return err
	}
	fmt.Printf("\n%s killed (SIGKILL)\n", victim.name)
	survivors := allBut(names, victim.name)
	if err := reportLeaves(waitUntil, left, survivors, victim.name, killed, detectTimeout); err != nil {
		return err
	}

	// A graceful leave: SIGUSR1 makes the agent announce it, so the others
	// know at once that it left rather than failed.
	if sigLeave != nil {
		leaver := agents[4]
		asked := time.Now()
		mark = asked
		if err := leaver.cmd.Process.Signal(sigLeave); err != nil {
			return err
		}
		fmt.Printf("\n%s asked to leave gracefully (SIGUSR1)\n", leaver.name)
		rest := allBut(survivors, leaver.name)
		if err := reportLeaves(waitUntil, left, rest, leaver.name, asked, detectTimeout); err != nil {
			return err
		}
	}
	if o.hold > 0 {
		fmt.Printf("\ndone in %.1fs; the cluster runs on for %v (Ctrl-C stops it sooner)\n", time.Since(began).Seconds(), o.hold)
		if o.ui {
			fmt.Printf("  live page of %s: http://%s/\n", seed.name, seed.web)
		}
		// Events are still read, so that no agent blocks on its stdout;
		// Ctrl-C ends the hold, which is no failure.
		_ = idle(o.hold)
		fmt.Println("stopping the agents")
		return nil
	}
	fmt.Printf("\ndone in %.1fs; stopping the agents\n", time.Since(began).Seconds())
	return nil
}

// reportLeaves waits until every observer printed leave for node, printing
// each observer's delay since since as it comes.
func reportLeaves(
	waitUntil func(string, time.Duration, func() bool) error,
	left map[string]map[string]event,
	observers []string, node string, since time.Time, timeout time.Duration,
) error {
	reported := map[string]bool{}
	report := func() bool {
		for _, o := range observers {
			e, ok := left[o][node]
			if ok && !reported[o] {
				reported[o] = true
				fmt.Printf("  %s saw %s leave (%s) after %.2fs\n", o, node, e.State, time.Unix(0, e.T).Sub(since).Seconds())
			}
		}
		return len(reported) == len(observers)
	}
	if err := waitUntil(fmt.Sprintf("every survivor to see %s leave", node), timeout, report); err != nil {
		return err
	}
	fmt.Printf("all %d survivors agree: %s is gone\n", len(observers), node)
	return nil
}
