// Command demo shows swim at work on one machine: it builds examples/agent,
// starts five agents on 127.0.0.1, joins them through the first, kills one
// with SIGKILL and reports how long each survivor took to notice, then has
// another leave gracefully. Run it with `make demo` (or `go run
// ./examples/demo`); it needs only the go command on PATH and cleans up its
// processes on exit or Ctrl-C.
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

func main() {
	verbose := flag.Bool("v", false, "show the agents' logs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}

// event is one line an agent printed, tagged with the agent that printed it.
type event struct {
	T     int64  `json:"t"`
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
	done chan struct{}
}

func run(ctx context.Context, verbose bool) error {
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
	build := exec.CommandContext(ctx, goCmd, "build", "-o", bin, "github.com/swim-go/swim/examples/agent")
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
		if verbose { // otherwise the logs go to the null device
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
		case "ready":
			for _, a := range agents {
				if a.name == e.seenBy {
					a.addr = e.Addr
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

	names := make([]string, clusterSize)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i+1)
	}

	// The seed takes a free port and says which in its ready line.
	began := time.Now()
	seed, err := start(names[0], "-port", "0")
	if err != nil {
		return err
	}
	if err := waitUntil(names[0]+" to listen", startTimeout, func() bool { return seed.addr != "" }); err != nil {
		return err
	}
	fmt.Printf("%s listening on %s\n", seed.name, seed.addr)
	for _, name := range names[1:] {
		if _, err := start(name, "-port", "0", "-join", seed.addr); err != nil {
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
