//go:build linux

package chaos

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The upgrade test builds two agents and runs for minutes as root, so `go
// test ./...` (and make test) skips it unless SWIM_UPGRADE=1, which `make
// upgrade` sets.
const upgradeGateEnv = "SWIM_UPGRADE"

var (
	flagUpFrom = flag.String("upgrade.from", "",
		"the commit or tag whose examples/agent the cluster starts with; `make upgrade` passes UPGRADE_FROM")
	flagUpN        = flag.Int("upgrade.n", 16, "agents in the cluster")
	flagUpProfile  = flag.String("upgrade.profile", "lan", "the agents' timing profile: lan, wan or local")
	flagUpRollback = flag.Int("upgrade.rollback", 2, "members rolled back to the old agent once every member runs the new one")
	flagUpSoak     = flag.Duration("upgrade.soak", 30*time.Second,
		"how long the mixed cluster runs untouched, half upgraded and after the roll-back: one PushPullInterval on LAN, so that old and new members exchange full state on their own")
	flagUpStrays = flag.Int("upgrade.strays", 1,
		"accusations of running members tolerated over the whole run (a member of a loaded machine descheduled past a probe timeout)")
	flagUpSecure = flag.Bool("upgrade.secure", false,
		"run every agent with one AES-256 key (new each run) and the cluster label "+secureLabel)
	flagUpKeepLogs = flag.Bool("upgrade.keeplogs", false, "keep the agents' stderr logs even when the test passes")
)

// upgradeFlags are the agent flags the test passes (Cluster.start); both
// builds must define them.
var upgradeFlags = []string{"name", "bind", "port", "profile", "join"}

// Which binary a member runs.
const (
	binOld = "old"
	binNew = "new"
)

// upgrade is the state of TestUpgrade.
type upgrade struct {
	t       *testing.T
	c       *Cluster
	bins    map[string]string // binOld, binNew -> path
	running map[string]string // member -> binOld or binNew
	// stops are the graceful stops, one per replacement: the only times at
	// which a member may be reported gone (left) or suspected.
	stops   []stop
	converg []time.Duration // from each new process's start to convergence
	summary []string
}

// stop is one member's graceful stop and restart: from its SIGUSR1 until
// every member saw its new process alive (to is zero while it lasts).
type stop struct {
	name     string
	from, to time.Time
}

func (u *upgrade) report(format string, args ...any) {
	u.summary = append(u.summary, fmt.Sprintf(format, args...))
	u.t.Log(u.summary[len(u.summary)-1])
}

// TestUpgrade is a rolling upgrade on real processes, as an operator rolls
// a fleet. It builds examples/agent twice, at -upgrade.from (from a
// detached git worktree of that commit, with that commit's go.mod) and
// from the working tree, and starts -upgrade.n (16) old agents in a private
// network namespace (the chaos suite's harness). Then it replaces each
// member in turn by the new agent under the same name, port and uid: a
// graceful stop (SIGUSR1, the agent's leave, then SIGTERM once it printed
// its left line), then the new binary, joining through the member
// opposite it in the list (an old one for the first half, a new one
// after). When every member runs the new agent it rolls -upgrade.rollback
// (2) of them back to the old one the same way. The cluster runs untouched
// for -upgrade.soak (30s) twice: half upgraded, and after the roll-back.
//
// It asserts throughout:
//
//   - each stopped member printed its left line, exited with status 0, and
//     was reported left, not dead, by every other member;
//   - after each restart every member sees every other alive (the
//     restarted one from its own fresh events), and again after each soak;
//   - nobody is reported gone (a leave event, dead or left) except a
//     member during its own graceful stop, and then only as left: nobody
//     is declared dead at all, since nobody crashes;
//   - at most -upgrade.strays (1) accusations (suspect events, distinct
//     member and incarnation) of a member that was not being stopped.
//
// It logs the time each step took (left line, exit, every member
// reporting the leave, ready line, convergence) and a summary at the end.
// On failure the agents' stderr (<name>.log, <name>.<k>.log for the k-th
// restart) and every event line are kept in a temporary directory the log
// names.
func TestUpgrade(t *testing.T) {
	if os.Getenv(upgradeGateEnv) != "1" {
		t.Skipf("upgrade test: builds two agents and runs %d processes for minutes; run `make upgrade` (sets %s=1)", *flagUpN, upgradeGateEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("upgrade test: needs root (network namespaces, agents under their own uids)")
	}
	require.NotEmpty(t, *flagUpFrom, "-upgrade.from: the commit or tag to upgrade from (make upgrade passes UPGRADE_FROM)")
	require.GreaterOrEqual(t, *flagUpN, 4, "-upgrade.n")
	require.Less(t, *flagUpRollback, *flagUpN, "-upgrade.rollback")

	u := &upgrade{t: t, running: make(map[string]string)}
	defer func() {
		mode := "plaintext"
		if *flagUpSecure {
			mode = "encrypted, label " + secureLabel
		}
		t.Logf("summary (%d agents, profile %s, %s, from %s):\n  %s", *flagUpN, *flagUpProfile, mode, *flagUpFrom, strings.Join(u.summary, "\n  "))
	}()
	u.setup()

	start := time.Now()
	n := len(u.c.Agents)
	for i, a := range u.c.Agents {
		u.replace(a, binNew)
		if i == n/2-1 {
			u.soak()
		}
	}
	u.report("upgrade: %d members replaced one at a time in %v; from start to convergence p50 %v, max %v",
		n, time.Since(start).Round(time.Millisecond), percentiles(u.converg)(0.5), percentiles(u.converg)(1))

	start = time.Now()
	from := len(u.converg)
	for j := range *flagUpRollback {
		u.replace(u.c.Agents[(j+1)*n/(*flagUpRollback+1)], binOld)
	}
	u.report("roll-back: %d members back to the old agent in %v; from start to convergence p50 %v, max %v",
		*flagUpRollback, time.Since(start).Round(time.Millisecond), percentiles(u.converg[from:])(0.5), percentiles(u.converg[from:])(1))
	u.soak()

	deaths := u.falseDeaths(time.Time{})
	acc, events := u.accusations()
	u.report("whole run: %d events, %d graceful stops, %d unexpected leave events, %d accusations of running members (%d suspect events)",
		u.c.Log.Len(), len(u.stops), len(deaths), len(acc), len(events))
	if len(deaths) > 0 {
		t.Errorf("%d leave events about members not being stopped, or with state dead: %s", len(deaths), describe(deaths, 10))
	}
	if len(acc) > *flagUpStrays {
		t.Errorf("%d accusations of running members (%d suspect events), over the bound %d (-upgrade.strays): old and new members do not hear each other; first events: %s",
			len(acc), len(events), *flagUpStrays, describe(events, 10))
	}
	if garbage := u.c.Log.Garbage(); len(garbage) > 0 {
		t.Errorf("%d stdout lines are not events, the first: %q", len(garbage), garbage[0])
	}
}

// setup builds both agents, creates the namespace and starts a converged
// cluster of old agents, all undone by t.Cleanup.
func (u *upgrade) setup() {
	t := u.t
	require.NoError(t, EnsureTools(t.Logf))
	if cleaned, err := CleanStaleNamespaces(); err != nil {
		t.Logf("stale namespaces: %v", err)
	} else if len(cleaned) > 0 {
		t.Logf("deleted stale namespaces of dead runs: %v", cleaned)
	}
	repo, err := RepoRoot()
	require.NoError(t, err, "the upgrade test builds the old agent from a git worktree: it needs the repository")
	if cleaned := CleanStaleCheckouts(repo); len(cleaned) > 0 {
		t.Logf("deleted checkouts of dead runs: %v", cleaned)
	}
	if cleaned := CleanStaleBinDirs(""); len(cleaned) > 0 {
		t.Logf("deleted agent builds of dead runs: %v", cleaned)
	}

	ns, err := NewNamespace()
	if err != nil {
		t.Skipf("upgrade test: cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := ns.Nft("add table inet " + nftTable + "\n"); err != nil {
		t.Skipf("upgrade test: nftables unusable in the namespace: %v", err)
	}

	binDir, err := NewBinDir("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(binDir) })
	u.bins = map[string]string{binOld: filepath.Join(binDir, "agent-old"), binNew: filepath.Join(binDir, "agent-new")}

	start := time.Now()
	co, err := AddCheckout(repo, *flagUpFrom)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := co.Remove(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	require.NoError(t, BuildAgentAt("go", co.Dir, u.bins[binOld]))
	require.NoError(t, co.Remove(), "removing the checkout once built")
	oldTook := time.Since(start)
	start = time.Now()
	require.NoError(t, BuildAgentAt("go", repo, u.bins[binNew]))
	newTook := time.Since(start)

	oldRev, _, err := AgentRevision(u.bins[binOld])
	require.NoError(t, err)
	newRev, newModified, err := AgentRevision(u.bins[binNew])
	require.NoError(t, err)
	if oldRev != "" {
		// The stamp shows the old build really came from the old tree.
		require.Equal(t, co.Commit, oldRev, "the revision go build stamped into the old agent")
	}
	head := newRev
	if newModified {
		head += " with local changes"
	}
	oldBytes, err := os.ReadFile(u.bins[binOld])
	require.NoError(t, err)
	newBytes, err := os.ReadFile(u.bins[binNew])
	require.NoError(t, err)
	if bytes.Equal(oldBytes, newBytes) || (oldRev == newRev && !newModified && oldRev != "") {
		t.Logf("warning: the old and new agents are the same build: this run tests restarts, not an upgrade")
	}
	if head == "" {
		head = "the working tree (no VCS stamp: -buildvcs=false)"
	}
	u.report("builds: old agent at %s (%s) in %v, new agent at %s in %v",
		*flagUpFrom, co.Commit, oldTook.Round(time.Millisecond), head, newTook.Round(time.Millisecond))

	want := slices.Clone(upgradeFlags)
	if *flagUpSecure {
		want = append(want, "key", "label")
	}
	for _, which := range []string{binOld, binNew} {
		have, err := AgentFlags(u.bins[which])
		require.NoError(t, err)
		for _, f := range want {
			require.Contains(t, have, f, "the %s agent has no -%s flag, which the test passes", which, f)
		}
	}

	logDir, log := agentLogDir(t, *flagUpKeepLogs)

	cc := ClusterConfig{
		N: *flagUpN, Profile: *flagUpProfile, Bin: u.bins[binOld],
		BasePort: basePort, BaseUID: baseUID, LogDir: logDir,
	}
	if *flagUpSecure {
		key := make([]byte, 32)
		_, err := rand.Read(key)
		require.NoError(t, err)
		cc.Keys, cc.Label = []string{base64.StdEncoding.EncodeToString(key)}, secureLabel
	}
	start = time.Now()
	c, err := StartCluster(ns, cc, readyWithin)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	*log = c.Log
	u.c = c
	for _, a := range c.Agents {
		u.running[a.Name] = binOld
	}
	ok, why := u.waitConverged(convergeWithin)
	require.True(t, ok, "the cluster of old agents did not form within %v: %s", convergeWithin, why)
	u.report("setup: %d old agents in namespace %s, all see each other in %v", len(c.Agents), ns.Name, time.Since(start).Round(time.Millisecond))
}

// waitConverged waits until every member sees every other alive, and says
// what differed when it gives up.
func (u *upgrade) waitConverged(within time.Duration) (bool, string) {
	var why string
	ok := WaitUntil(within, func() bool {
		var ok bool
		ok, why = u.c.Converged(u.c.Agents, nil)
		return ok
	})
	return ok, why
}

// replace stops a gracefully and starts the binary to in its place, under
// the same name and port, and waits until every member sees every other
// alive. Any check that fails ends the test: the next step would start
// from a broken cluster.
func (u *upgrade) replace(a *Agent, to string) {
	t := u.t
	t.Helper()
	agents := u.c.Agents
	seed := agents[(slices.Index(agents, a)+len(agents)/2)%len(agents)]
	others := without(agents, a)
	was := u.running[a.Name]

	from := time.Now()
	u.stops = append(u.stops, stop{name: a.Name, from: from})
	require.NoError(t, a.Signal(syscall.SIGUSR1))
	var leftAt time.Time
	ok := WaitUntil(leaveWithin, func() bool {
		e, ok := u.c.Log.First(func(e Event) bool {
			return e.Observer == a.Name && e.Ev == "left" && !e.Arrived.Before(from)
		})
		leftAt = e.Arrived
		return ok
	})
	require.True(t, ok, "%s (%s) printed no left line within %v of SIGUSR1", a.Name, was, leaveWithin)
	require.NoError(t, a.Signal(syscall.SIGTERM))
	exited, err := a.Wait(leaveWithin)
	require.True(t, exited, "%s (%s) did not exit within %v of SIGTERM", a.Name, was, leaveWithin)
	require.NoError(t, err, "%s (%s): exit status after SIGTERM", a.Name, was)
	exitAt := time.Now()

	// Every other member reports it left, none dead.
	var why string
	var dead bool
	ok = WaitUntil(leaveWithin, func() bool {
		ok, why, dead = u.reportedLeft(a, others)
		return ok || dead
	})
	require.False(t, dead, "%s (%s) stopped gracefully: %s", a.Name, was, why)
	require.True(t, ok, "%s (%s) stopped gracefully, not reported left by all within %v: %s", a.Name, was, leaveWithin, why)
	allLeft := u.lastLeaveReport(a, others, from)

	start := time.Now()
	require.NoError(t, u.c.Restart(a, u.bins[to], seed.Addr()))
	ok = WaitUntil(readyWithin, func() bool { return u.c.ReadySince(a, start) })
	require.True(t, ok, "%s (%s) printed no ready line within %v", a.Name, to, readyWithin)
	readyAt := time.Now()
	ok, why = u.waitConverged(convergeWithin)
	require.True(t, ok, "%s restarted as %s: no convergence within %v: %s", a.Name, to, convergeWithin, why)
	convergedAt := time.Now()
	u.stops[len(u.stops)-1].to = convergedAt
	u.running[a.Name] = to
	u.converg = append(u.converg, convergedAt.Sub(start))

	if deaths := u.falseDeaths(from); len(deaths) > 0 {
		t.Fatalf("while %s was replaced: %d leave events about members not being stopped, or with state dead: %s", a.Name, len(deaths), describe(deaths, 10))
	}
	var aboutIt, aboutOthers int
	for _, e := range u.c.Log.Select(func(e Event) bool { return e.Ev == "suspect" && !e.Time().Before(from) }) {
		if e.Node == a.Name {
			aboutIt++
		} else {
			aboutOthers++
		}
	}
	oldN, newN := u.counts()
	u.report("%s %s->%s (seed %s, %s): left line %v after SIGUSR1, exit %v after, reported left by all %d others %v after SIGUSR1; new process ready %v after start, all see all %v after start; suspect events: %d about it, %d about others [%d old, %d new]",
		a.Name, was, to, seed.Name, u.running[seed.Name], leftAt.Sub(from).Round(time.Millisecond), exitAt.Sub(leftAt).Round(time.Millisecond),
		len(others), allLeft.Round(time.Millisecond), readyAt.Sub(start).Round(time.Millisecond), convergedAt.Sub(start).Round(time.Millisecond),
		aboutIt, aboutOthers, oldN, newN)
}

// reportedLeft reports whether every member in others sees a as left;
// when not, it describes the first that does not, and dead says whether
// one sees it dead.
func (u *upgrade) reportedLeft(a *Agent, others []*Agent) (ok bool, why string, dead bool) {
	for _, o := range others {
		switch v := u.c.Log.View(o.Name, a.Name); v {
		case ViewLeft:
		case ViewDead:
			return false, fmt.Sprintf("%s reports it dead, not left", o.Name), true
		default:
			return false, fmt.Sprintf("%s sees it as %q", o.Name, v), false
		}
	}
	return true, "", false
}

// lastLeaveReport returns how long after from the last of others printed
// its leave event about a.
func (u *upgrade) lastLeaveReport(a *Agent, others []*Agent, from time.Time) time.Duration {
	first := make(map[string]time.Time)
	for _, e := range u.c.Log.Select(func(e Event) bool {
		return e.Ev == "leave" && e.Node == a.Name && !e.Time().Before(from)
	}) {
		if _, ok := first[e.Observer]; !ok {
			first[e.Observer] = e.Time()
		}
	}
	var last time.Duration
	for _, o := range others {
		if d := first[o.Name].Sub(from); d > last {
			last = d
		}
	}
	return last
}

// soak lets the mixed cluster run untouched for -upgrade.soak, ending early
// on a false death, then checks that it is still converged.
func (u *upgrade) soak() {
	t := u.t
	t.Helper()
	from := time.Now()
	WaitUntil(*flagUpSoak, func() bool { return len(u.falseDeaths(from)) > 0 })
	held := time.Since(from)
	if deaths := u.falseDeaths(from); len(deaths) > 0 {
		t.Fatalf("mixed cluster left alone: %d leave events about running members after %v: %s", len(deaths), held.Round(time.Millisecond), describe(deaths, 10))
	}
	converged := "all see all at its end"
	if ok, was := u.c.Converged(u.c.Agents, nil); !ok {
		// A stray suspicion may be pending at the end: give it time.
		start := time.Now()
		ok, why := u.waitConverged(convergeWithin)
		require.True(t, ok, "mixed cluster left alone for %v: no convergence within %v after: %s", held, convergeWithin, why)
		converged = fmt.Sprintf("converged %v after its end (at its end: %s)", time.Since(start).Round(time.Millisecond), was)
	}
	suspects := u.c.Log.Select(func(e Event) bool { return e.Ev == "suspect" && !e.Time().Before(from) })
	oldN, newN := u.counts()
	u.report("soak [%d old, %d new]: untouched for %v: %d suspect events, no false death; %s",
		oldN, newN, held.Round(time.Millisecond), len(suspects), converged)
}

// counts returns how many members run the old agent and the new one.
func (u *upgrade) counts() (oldN, newN int) {
	for _, b := range u.running {
		if b == binOld {
			oldN++
		} else {
			newN++
		}
	}
	return oldN, newN
}

// stopping reports whether member name was being stopped (or not yet seen
// alive again after its restart) at t.
func (u *upgrade) stopping(name string, t time.Time) bool {
	for _, s := range u.stops {
		if s.name == name && !t.Before(s.from) && (s.to.IsZero() || !t.After(s.to)) {
			return true
		}
	}
	return false
}

// falseDeaths returns the leave events since from other than a member
// reported left during its own graceful stop.
func (u *upgrade) falseDeaths(from time.Time) []Event {
	return u.c.Log.Select(func(e Event) bool {
		if e.Ev != "leave" || e.Time().Before(from) {
			return false
		}
		return e.State != "left" || !u.stopping(e.Node, e.Time())
	})
}

// accusations returns the distinct accusations (member and incarnation)
// of members that were not being stopped, over the whole run, and the
// suspect events behind them.
func (u *upgrade) accusations() (map[string]bool, []Event) {
	events := u.c.Log.Select(func(e Event) bool {
		return e.Ev == "suspect" && !u.stopping(e.Node, e.Time())
	})
	acc := make(map[string]bool)
	for _, e := range events {
		acc[fmt.Sprintf("%s/%d", e.Node, e.Inc)] = true
	}
	return acc, events
}
