//go:build linux

package migration

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	flagProcs = flag.Bool("migration.procs", false,
		"run TestMigrationOnProcesses: 16 agent processes moved from memberlist to swim (make migration)")
	// The agents' ports lie below Linux's ephemeral range (32768 and up):
	// a port inside it can be taken, between an agent's stop and its
	// restart, as the source port of any outbound connection, the
	// cluster's own among them.
	flagBasePort = flag.Int("migration.port", 28100, "memberlist port of the first agent; agent i uses this plus i, plus 1000 for swim and 2000 for HTTP")
	flagN        = flag.Int("migration.n", 16, "agents")
)

// Bounds of the waits on real processes: generous for a loaded 2-core
// machine; the test logs what each took.
const (
	agreeWithin = 30 * time.Second // views and maps after a step
	crashWithin = 40 * time.Second // memberlist's LAN detection is about 10 s
	agentOffset = 1000
	// agentHTTPOffset places each agent's /migration endpoint.
	agentHTTPOffset = 2000
	agentRetrans    = 4 // memberlist's default for the applications' queues
	// agentGrace is the agents' -standby-grace: how long a process woken
	// from standby stays in migration mode once no process runs
	// memberlist alone.
	agentGrace = 10 * time.Second
)

// procLine is one JSON line of the agent's migrate command.
type procLine struct {
	T     int64             `json:"t"`
	Ev    string            `json:"ev"`
	Node  string            `json:"node"`
	Mode  string            `json:"mode"`
	Names []string          `json:"names"`
	KV    map[string]string `json:"kv"`
	Err   string            `json:"err"`
}

// procAgent is one agent process under a name; runs counts its starts.
type procAgent struct {
	name  string
	port  int
	mode  string
	phase string // the mode or phase its latest line reported
	value string
	runs  int
	cmd   *exec.Cmd
	done  chan struct{}

	mu     sync.Mutex
	view   []string
	kv     map[string]string
	mlOnly []string
	hasML  bool // an mlonly line was printed
	left   bool
	ready  bool
	phases []string // this run's phase changes with their times, for a failure's report
}

// procCluster is the agents and what their lines said.
type procCluster struct {
	t      *testing.T
	bin    string
	agents []*procAgent
	// removals: a name dropped from a view, by whom and when, for the
	// false-death check at the end.
	mu       sync.Mutex
	removals []removal
	// stops: when each name was stopped (or crashed) by the test, and
	// started again (zero while it is down).
	stops  map[string][]stopSpan
	report []string
	odd    *procAgent // the agent the latest disagreement is about
}

type stopSpan struct{ from, to time.Time }

type removal struct {
	observer, name string
	at             time.Time
}

func (c *procCluster) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	c.report = append(c.report, s)
	c.t.Log(s)
}

func (c *procCluster) addr(a *procAgent) string { return fmt.Sprintf("127.0.0.1:%d", a.port) }

// start runs a's process in mode, joining through seeds.
func (c *procCluster) start(a *procAgent, mode string, seeds ...*procAgent) {
	c.t.Helper()
	a.runs++
	a.mode = mode
	a.value = fmt.Sprintf("%s-run%d", a.name, a.runs)
	var join []string
	for _, s := range seeds {
		join = append(join, c.addr(s))
	}
	cmd := exec.Command(c.bin, "migrate", "-name", a.name, "-port", fmt.Sprint(a.port), "-swim-offset", fmt.Sprint(agentOffset),
		"-mode", mode, "-join", strings.Join(join, ","), "-value", a.value, "-retransmit-mult", fmt.Sprint(agentRetrans),
		"-http", fmt.Sprintf("127.0.0.1:%d", a.port+agentHTTPOffset), "-standby-grace", agentGrace.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	require.NoError(c.t, err)
	cmd.Stderr = os.Stderr
	a.mu.Lock()
	a.view, a.kv, a.mlOnly, a.hasML, a.left, a.ready, a.phase, a.phases = nil, nil, nil, false, false, false, mode, nil
	a.mu.Unlock()
	require.NoError(c.t, cmd.Start())
	a.cmd = cmd
	defer func() {
		why := c.waitFor(agreeWithin, func() string {
			a.mu.Lock()
			defer a.mu.Unlock()
			if !a.ready {
				return a.name + " is not ready"
			}
			return ""
		})
		require.Empty(c.t, why)
	}()
	done := make(chan struct{})
	a.done = done
	c.mu.Lock()
	if spans := c.stops[a.name]; len(spans) > 0 && spans[len(spans)-1].to.IsZero() {
		spans[len(spans)-1].to = time.Now()
	}
	c.mu.Unlock()
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l procLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			c.take(a, l)
		}
		_ = cmd.Wait()
	}()
}

// take records a line of a.
func (c *procCluster) take(a *procAgent, l procLine) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch l.Ev {
	case "ready":
		a.ready = true
	case "view":
		for _, old := range a.view {
			if !slices.Contains(l.Names, old) {
				c.mu.Lock()
				c.removals = append(c.removals, removal{observer: a.name, name: old, at: time.Unix(0, l.T)})
				c.mu.Unlock()
			}
		}
		a.view = l.Names
	case "kv":
		a.kv = l.KV
	case "mlonly":
		a.mlOnly, a.hasML = l.Names, true
	case "left":
		a.left = true
		a.setPhase(l)
	case "mode":
		a.setPhase(l)
	case "error":
		c.t.Logf("%s: %s", a.name, l.Err)
	}
}

func (a *procAgent) setPhase(l procLine) {
	a.phase = l.Mode
	a.phases = append(a.phases, time.Unix(0, l.T).Format("15:04:05.000")+" "+l.Mode)
}

// stop ends a's process: sig SIGTERM leaves first, SIGKILL crashes.
func (c *procCluster) stop(a *procAgent, sig syscall.Signal) {
	c.t.Helper()
	c.mu.Lock()
	c.stops[a.name] = append(c.stops[a.name], stopSpan{from: time.Now()})
	c.mu.Unlock()
	require.NoError(c.t, a.cmd.Process.Signal(sig))
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	a.cmd = nil
}

func (c *procCluster) live() []*procAgent {
	var out []*procAgent
	for _, a := range c.agents {
		if a.cmd != nil {
			out = append(out, a)
		}
	}
	return out
}

// disagreement says why the live agents' views and maps do not yet hold
// every live agent and its current value ("" when they do).
func (c *procCluster) disagreement() string {
	live := c.live()
	var names []string
	want := map[string]string{}
	for _, a := range live {
		names = append(names, a.name)
		want[a.name] = a.value
	}
	slices.Sort(names)
	for _, a := range live {
		a.mu.Lock()
		view, kv := slices.Clone(a.view), maps.Clone(a.kv)
		a.mu.Unlock()
		for _, n := range names {
			if !slices.Contains(view, n) {
				c.odd = a
				return fmt.Sprintf("%s (%s) does not see %s: %v", a.name, a.mode, n, view)
			}
			if kv[n] != want[n] {
				c.odd = a
				return fmt.Sprintf("%s (%s) holds %s=%q, want %q; its map: %v", a.name, a.mode, n, kv[n], want[n], kv)
			}
		}
	}
	return ""
}

// agree waits until every live agent sees every live one and holds its
// current value, and reports how long that took.
func (c *procCluster) agree(step string) {
	c.t.Helper()
	start := time.Now()
	why := c.waitFor(agreeWithin, c.disagreement)
	if why != "" && c.odd != nil && c.odd.cmd != nil {
		c.t.Logf("%s's counters: %s", c.odd.name, c.stats(c.odd))
		_ = c.odd.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, on its stderr
	}
	require.Empty(c.t, why, "%s: not agreed within %v", step, agreeWithin)
	c.logf("%s: every live agent sees every live one and holds its value after %v", step, time.Since(start).Round(time.Millisecond))
}

// waitFor polls f until it returns "" or within passes, returning its last
// answer.
func (c *procCluster) waitFor(within time.Duration, f func() string) string {
	deadline := time.Now().Add(within)
	for {
		why := f()
		if why == "" || time.Now().After(deadline) {
			return why
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *procCluster) seeds(except *procAgent) []*procAgent {
	var out []*procAgent
	for _, a := range c.live() {
		if a != except && len(out) < 2 {
			out = append(out, a)
		}
	}
	return out
}

// replace stops a gracefully and starts it again in mode: an upgrade or a
// rollback of one process.
func (c *procCluster) replace(a *procAgent, mode string) {
	c.t.Helper()
	c.stop(a, syscall.SIGTERM)
	c.start(a, mode, c.seeds(a)...)
	c.agree(fmt.Sprintf("%s restarted as %s", a.name, mode))
}

// TestMigrationOnProcesses: 16 agents run memberlist alone, with a
// replicated map on broadcasts and state exchange; they are replaced one
// at a time by agents in migration mode, with one process rolled back to
// memberlist and forward again on the way, and a crash of a
// memberlist-only and of a bridged process in the middle; then, once no
// process runs memberlist alone, each leaves migration mode in turn, and
// one is restarted in standby; then one is rolled back to memberlist,
// which brings the others back into migration mode, and forward again.
// After every step every live agent sees every live agent and holds its
// current value; no agent ever drops a live agent from its view.
func TestMigrationOnProcesses(t *testing.T) {
	if !*flagProcs {
		t.Skip("a run on real processes: make migration (or -migration.procs)")
	}
	bin := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/swim-go/swim/examples/agent")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	c := &procCluster{t: t, bin: bin, stops: map[string][]stopSpan{}}
	for i := range *flagN {
		c.agents = append(c.agents, &procAgent{name: fmt.Sprintf("a%02d", i), port: *flagBasePort + i})
	}
	t.Cleanup(func() {
		for _, a := range c.live() {
			_ = a.cmd.Process.Kill()
			<-a.done
		}
		t.Logf("summary:\n  %s", strings.Join(c.report, "\n  "))
	})

	start := time.Now()
	c.start(c.agents[0], "memberlist")
	for _, a := range c.agents[1:] {
		c.start(a, "memberlist", c.agents[0])
	}
	c.agree(fmt.Sprintf("%d memberlist agents formed", len(c.agents)))

	st := c.migrationState(c.agents[0])
	require.False(t, st.Done)
	require.Equal(t, "memberlist", st.Mode)
	n := len(c.agents)
	for i, a := range c.agents {
		c.replace(a, "bridge")
		switch i {
		case n/2 - 1:
			// The last agent still runs memberlist alone; the first is
			// bridged.
			c.crash(c.agents[n-1], c.agents[0])
		case n / 2:
			// A rollback while the cluster is in migration mode, and
			// forward again.
			c.replace(c.agents[1], "memberlist")
			c.replace(c.agents[1], "bridge")
		}
	}

	why := c.waitFor(agreeWithin, func() string {
		for _, a := range c.live() {
			a.mu.Lock()
			only, has := a.mlOnly, a.hasML
			a.mu.Unlock()
			if !has || len(only) > 0 {
				return fmt.Sprintf("%s still reports memberlist-only processes: %v", a.name, only)
			}
		}
		return ""
	})
	require.Empty(t, why)
	for _, a := range c.live() {
		st := c.migrationState(a)
		require.True(t, st.Done, "%s's /migration: %+v", a.name, st)
	}
	c.logf("no process runs memberlist alone: every agent says so, on its lines and at GET /migration")

	for _, a := range c.agents {
		c.leaveMode(a)
		c.agree(a.name + " left migration mode")
	}

	c.waitPhase("standby", agreeWithin)
	c.logf("every agent is out of migration mode, its memberlist port in standby")

	// A process restarted once the cluster left migration mode starts in
	// standby, joining the others' swim sides.
	c.replace(c.agents[5], "standby")
	c.waitPhase("standby", agreeWithin)

	// A rollback after the cluster left migration mode: the process
	// running memberlist alone joins through standby ports, and the
	// cluster comes back into migration mode around it.
	r := c.agents[3]
	c.replace(r, "memberlist")
	for _, a := range c.live() {
		if a == r {
			continue
		}
		st := c.migrationState(a)
		require.Equal(t, "woken", st.Mode, "%s's /migration: %+v", a.name, st)
		require.Equal(t, []string{r.name}, st.MemberlistOnly, "%s's /migration: %+v", a.name, st)
		var got counters
		require.NoError(t, json.Unmarshal([]byte(c.stats(a)), &got), "%s's /stats", a.name)
		require.NotNil(t, got.Bridge, "%s's /stats has no Bridge counters", a.name)
		require.NotZero(t, got.Bridge.Wakes, "%s's /stats counts no wake", a.name)
		require.NotZero(t, got.Swim.Broadcasts.Delivered, "%s's /stats counts no broadcast", a.name)
	}
	c.logf("%s rolled back to memberlist after every process left migration mode: every other process is back in it", r.name)
	c.replace(r, "bridge")
	c.leaveMode(r)
	c.agree(r.name + " forward again and out of migration mode")
	left := time.Now()
	c.waitPhase("standby", agentGrace+agreeWithin)
	c.logf("every process back in standby %v after the last left migration mode (grace %v)", time.Since(left).Round(time.Millisecond), agentGrace)

	// No live agent was ever dropped from a view: the only removals are
	// of agents the test stopped, after it stopped them.
	var false_ []string
	c.mu.Lock()
	for _, r := range c.removals {
		if !c.wasStopped(r.name, r.at) && !c.stopping(r.observer, r.at) {
			false_ = append(false_, fmt.Sprintf("%s dropped %s at %s", r.observer, r.name, r.at.Format(time.TimeOnly)))
		}
	}
	c.mu.Unlock()
	require.Empty(t, false_, "live agents dropped from views")
	c.logf("no live agent dropped from any view; %d removals, all of agents the test stopped or seen by agents as they stopped; %v in all",
		len(c.removals), time.Since(start).Round(time.Second))
}

// leaveMode has a leave migration mode (SIGUSR1) and waits until it says
// it has.
func (c *procCluster) leaveMode(a *procAgent) {
	c.t.Helper()
	require.NoError(c.t, a.cmd.Process.Signal(syscall.SIGUSR1))
	why := c.waitFor(agreeWithin, func() string {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.left {
			return a.name + " has not left migration mode"
		}
		return ""
	})
	require.Empty(c.t, why)
}

// waitPhase waits until every live agent's lines report phase.
func (c *procCluster) waitPhase(phase string, within time.Duration) {
	c.t.Helper()
	// elsewhere is the first live agent whose lines report another phase,
	// and why.
	elsewhere := func() (*procAgent, string) {
		for _, a := range c.live() {
			a.mu.Lock()
			p, only, phases := a.phase, a.mlOnly, a.phases
			a.mu.Unlock()
			if p != phase {
				return a, fmt.Sprintf("%s is %q; it sees running memberlist alone %v; its phases: %v", a.name, p, only, phases)
			}
		}
		return nil, ""
	}
	why := c.waitFor(within, func() string { _, why := elsewhere(); return why })
	if a, _ := elsewhere(); a != nil {
		_ = a.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, on its stderr
	}
	require.Empty(c.t, why, "not every agent reached %s within %v", phase, within)
}

// stats is a's GET /stats, for a failure's report.
func (c *procCluster) stats(a *procAgent) string {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats", a.port+agentHTTPOffset))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// migrationState asks a's GET /migration.
func (c *procCluster) migrationState(a *procAgent) (st struct {
	Mode           string   `json:"mode"`
	MemberlistOnly []string `json:"memberlist_only"`
	Done           bool     `json:"done"`
}) {
	c.t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/migration", a.port+agentHTTPOffset))
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	require.NoError(c.t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// crash kills a (memberlist alone) and b (bridged) at once, and waits
// until every survivor has dropped both; then starts them again.
func (c *procCluster) crash(a, b *procAgent) {
	c.t.Helper()
	killed := time.Now()
	modeA, modeB := a.mode, b.mode
	c.stop(a, syscall.SIGKILL)
	c.stop(b, syscall.SIGKILL)
	why := c.waitFor(crashWithin, func() string {
		for _, s := range c.live() {
			s.mu.Lock()
			view := slices.Clone(s.view)
			s.mu.Unlock()
			for _, dead := range []string{a.name, b.name} {
				if slices.Contains(view, dead) {
					return fmt.Sprintf("%s (%s) still sees %s", s.name, s.mode, dead)
				}
			}
		}
		return ""
	})
	require.Empty(c.t, why, "crash not detected by every survivor")
	c.logf("crash of %s (%s) and %s (%s): every survivor on both sides dropped both after %v",
		a.name, modeA, b.name, modeB, time.Since(killed).Round(time.Millisecond))
	c.start(a, modeA, c.seeds(a)...)
	c.start(b, modeB, c.seeds(b)...)
	c.agree(fmt.Sprintf("%s and %s back", a.name, b.name))
}

// wasStopped reports whether the test had the agent called name stopped
// at at, or had started it again just before (an observer that learns of
// the stop late drops it late) (c.mu held).
func (c *procCluster) wasStopped(name string, at time.Time) bool {
	for _, sp := range c.stops[name] {
		if at.Before(sp.from) {
			continue
		}
		if sp.to.IsZero() || at.Before(sp.to.Add(10*time.Second)) {
			return true
		}
	}
	return false
}

// stopping reports whether the agent called name was being stopped at at:
// a process that leaves sees the others go as it does (c.mu held).
func (c *procCluster) stopping(name string, at time.Time) bool {
	for _, sp := range c.stops[name] {
		if !at.Before(sp.from) && (sp.to.IsZero() || !at.After(sp.to)) {
			return true
		}
	}
	return false
}
