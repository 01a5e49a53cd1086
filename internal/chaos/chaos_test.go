//go:build linux

package chaos

import (
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

	"github.com/swim-go/swim"
)

// The suite runs for minutes and needs root, so `go test ./...` (and make
// test) skips it unless SWIM_CHAOS=1, which `make chaos` sets.
const gateEnv = "SWIM_CHAOS"

var (
	flagN       = flag.Int("chaos.n", 32, "agents in the cluster")
	flagProfile = flag.String("chaos.profile", "lan", "the agents' timing profile: lan, wan or local")
	flagFault   = flag.Duration("chaos.fault", 60*time.Second, "how long the loss, starvation and one-way faults last")
	flagMargin  = flag.Duration("chaos.margin", 4*time.Second,
		"crash detection bound: PauseTolerance + ProbeInterval + this margin")
	flagPause = flag.Duration("chaos.pause", 3*time.Second,
		"how long the Pause case stops a member: under the LAN PauseTolerance (5s); lower it for -chaos.profile local (2s)")
	flagTCPLoss  = flag.Int("chaos.tcploss", 30, "TCP loss (percent) of the UDPTCPLoss case")
	flagTCPFault = flag.Duration("chaos.tcpfault", 30*time.Second, "how long the UDPTCPLoss fault lasts")
	flagKeepLogs = flag.Bool("chaos.keeplogs", false, "keep the agents' stderr logs even when the suite passes")
	flagStrays   = flag.Int("chaos.strays", 1,
		"accusations of live members tolerated in each case that should draw none (a member of a loaded machine descheduled past a probe timeout)")
	flagSecure = flag.Bool("chaos.secure", false,
		"run every agent with encryption (one AES-256 key, new each run) and the cluster label "+secureLabel+"; the cases and bounds stay the same")
	flagSigned = flag.Bool("chaos.signed", false,
		"run every agent with signed claims required (-signatures required, an identity of its own per process); the cases and bounds stay the same")
	flagLoad = flag.Float64("chaos.load", 0,
		"broadcasts a second each agent sends throughout the run (the agents' -load-rate, payloads of 100 bytes), an application's load beside the cases; 0 for none; the cases and bounds stay the same")
)

// loadSize is the payload of each broadcast of -chaos.load: the agent's
// default, an application's small message.
const loadSize = 100

// loadLinesWithin bounds the wait, at setup, for every agent's first load
// line showing broadcasts sent and received: the agents print one every
// 10 s.
const loadLinesWithin = 30 * time.Second

// secureLabel is the agents' cluster label under -chaos.secure.
const secureLabel = "swim-chaos"

// Bounds of the waits, none of them tight: a healthy run needs a fraction of
// each (the suite logs the measured times). The machine has 2 cores for 32
// agents and may be shared with other work.
const (
	readyWithin = 30 * time.Second // each agent prints its ready line
	// convergeWithin: every live agent sees every other alive, at start and
	// after each fault heals. After heavy loss a member that missed a
	// refutation holds its stale suspicion until its own timer and final
	// check end it, up to SuspicionMaxTimeoutMult·PauseTolerance (30s on
	// LAN); measured up to 42s on a loaded machine.
	convergeWithin = 90 * time.Second
	leaveWithin    = 20 * time.Second // every other agent reports a graceful leave
	basePort       = 7000             // agent i listens on 127.0.0.1:7000+i in the namespace
	baseUID        = 47000            // agent i runs as uid 47000+i
)

// The fault parameters of the issue.
const (
	udpLossPct   = 30
	starveN      = 4
	starveActive = 200 * time.Millisecond
	starvePeriod = time.Second
	oneWayPairs  = 8
	deafPct      = 80 // how much of what is sent to the deaf member it loses
	crashes      = 3  // members killed, one after the other, for detection figures
)

// Bounds on accusations of live members (distinct member and incarnation
// suspected). No false death is the weak check: the final check, TCP checks
// and refutation can each save a member that was wrongly accused, so one
// broken mechanism hides behind the others. The faults below draw no
// accusation of a live member at all when every mechanism works, so the
// accusations are counted too:
//
//   - UDP loss alone: the TCP ping that runs beside the indirect probes
//     answers (Detection.TCPChecks), and any packet heard counts as an ack
//     (Detection.AnyTrafficHeartbeat). With Detection.TCPChecks off: 96 and 109 accusations
//     in two runs, and no false death.
//   - Starvation: a starved member's timers stop with it (SIGSTOP), so on
//     resuming it finds the acks that arrived meanwhile and accuses no
//     healthy member. (The starved ones are suspected, rightly.) This case
//     stays at zero with Detection.Nacks off, and without the loop's hand-over of
//     waiting packets before deadlines: unlike the simulator's starvation,
//     where timers run on, it does not exercise them.
//   - Deafness: the deaf member hears neither acks nor nacks from its
//     relays, blames its own links and withholds its accusations (Detection.Nacks,
//     Lifeguard). With Detection.Nacks off: 4 to 7 accusations in three runs, and
//     each time a false death (the deaf member missed a refutation).
//   - One-way links: the indirect probes and TCP pings go around the dead
//     direction.
//   - Pause: the member paused is suspected (that is the fault working) at
//     one incarnation only, since it refutes as soon as it resumes; no one
//     else is suspected, in particular not by the paused member.
//
// With every mechanism working these cases drew no accusation of a live
// member in 35 of 37 case runs (eight runs of the suite on 2 cores; the
// deafness case in four of them and once alone), and one in each of the
// other two: in the starvation case, while other jobs loaded the 2 cores
// (load average up to 6), a healthy member was accused once, one member
// descheduled past another's probe timeout. So each case allows one stray
// accusation (-chaos.strays; raise it on a busy machine), no more: the
// broken mechanisms above make 4 to 109. Each case also waits out the
// longest probe period after the previous heal before it starts (begin):
// without that, the starvation case counted the accusations of probes the
// UDP and TCP loss case had failed, two or three, in 2 of 5 runs.
//
// UDP and TCP loss together does draw accusations (37 to 53 per run), which
// refutation clears; that case keeps the no-false-death check only.

// maxAccusationsOfPaused bounds the incarnations at which the paused
// member is suspected: one, since it cannot refute while stopped and does
// at once when it resumes.
const maxAccusationsOfPaused = 1

// suite is the state shared by the cases of TestChaos: one cluster, in which
// each case injects its fault, heals it and waits for full convergence
// before the next case starts.
type suite struct {
	c    *Cluster
	cfg  *swim.Config
	live []*Agent // running members, in the cluster
	gone []*Agent // crashed or left: every live member must see them so
	// expected says which leave events are no false death: those about
	// members crashed, isolated or leaving on purpose.
	expected []func(Event) bool
	summary  []string
	broken   string    // why the cluster could not be healed, if it could not
	healedAt time.Time // when the last fault was lifted
}

func (s *suite) report(format string, args ...any) {
	s.summary = append(s.summary, fmt.Sprintf(format, args...))
}

// TestChaos is the chaos suite. It starts -chaos.n agents (32) in a private
// network namespace with the LAN profile and runs, on that one cluster:
//
//	Pause         one member SIGSTOPped for 3s (< PauseTolerance): never reported leave; it is
//	              suspected, at one incarnation only; nobody else is suspected
//	UDPLoss       30% of all UDP packets dropped for 60s: nobody reported leave, nor suspected
//	UDPTCPLoss    30% of UDP packets and 30% of TCP segments dropped for 30s: nobody reported leave
//	Starvation    four members running 200ms of every second for 60s: nobody reported leave;
//	              no healthy member suspected
//	OneWayLinks   eight pairs, A's packets to B dropped (UDP and TCP), 60s: nobody reported leave,
//	              nor suspected
//	Deafness      one member losing 80% of what is sent to it (UDP and TCP), 60s: nobody reported
//	              leave; no healthy member suspected
//	Isolation     one member cut off: reported dead by all within the crash bound, back after healing
//	Crash         three members SIGKILLed in turn: each reported dead by every survivor within
//	              PauseTolerance + ProbeInterval + margin (5s + 1s + 4s on LAN)
//	GracefulLeave SIGUSR1: reported as leave with state "left" by every other member
//	NoFalseDeaths over the whole run, no leave event about a live member except the expected ones
//
// "Nor suspected" allows one stray accusation of a live member
// (-chaos.strays; see the bounds below): a broken mechanism makes many.
//
// Every case logs what it measured (detection times, suspect events, packets
// dropped by each rule, time to converge after healing) and the summary at
// the end collects those lines. On failure the agents' stderr and every
// event line are kept in a temporary directory the log names.
//
// With -chaos.secure every agent runs with one AES-256 key (-key, drawn
// anew each run) and the label swim-chaos (-label), and setup checks that
// each agent's keyring holds that key, primary, with plaintext refused;
// the cases and their bounds are the same. `make chaos` runs the suite
// both ways, and a third time plaintext under a broadcast load.
//
// With -chaos.signed every agent runs with -signatures required, under an
// identity generated per process, and setup checks each agent's ready line
// for the mode; `make chaos` runs its secure pass this way.
//
// With -chaos.load R every agent sends R broadcasts a second of 100 bytes
// (-load-rate, -load-size) from its start to the end of the run, and
// counts those delivered to it: setup waits until every agent reports
// broadcasts sent and received, and the summary ends with the totals of
// the agents' last load lines; the cases and their bounds are the same.
func TestChaos(t *testing.T) {
	s := setup(t)
	mode := "plaintext"
	if *flagSecure {
		mode = "encrypted, label " + secureLabel
	}
	if *flagSigned {
		mode += ", signed claims required"
	}
	if *flagLoad > 0 {
		mode += fmt.Sprintf(", broadcast load %g/s per agent of %d B", *flagLoad, loadSize)
	}
	defer func() {
		if *flagLoad > 0 {
			// As the faults' drop counters do for theirs: a load that did
			// not run would make this pass the plain one under a new name.
			report, ran := s.loadReport()
			s.report("%s", report)
			if !ran {
				t.Errorf("the broadcast load did not run: %s", report)
			}
		}
		t.Logf("summary (%d agents, profile %s, %s):\n  %s", *flagN, *flagProfile, mode, strings.Join(s.summary, "\n  "))
	}()
	// The pause comes first: after heavy loss, members' local health
	// (Lifeguard) stretches their probe periods for a while, and a short
	// pause may then go unnoticed, which tests nothing.
	t.Run("Pause", s.testPause)
	t.Run("UDPLoss", s.testLoss(udpLossPct, 0, *flagFault))
	t.Run("UDPTCPLoss", s.testLoss(udpLossPct, *flagTCPLoss, *flagTCPFault))
	t.Run("Starvation", s.testStarvation)
	t.Run("OneWayLinks", s.testOneWayLinks)
	t.Run("Deafness", s.testDeafness)
	t.Run("Isolation", s.testIsolation)
	t.Run("Crash", s.testCrash)
	t.Run("GracefulLeave", s.testGracefulLeave)
	t.Run("NoFalseDeaths", s.testNoFalseDeaths)
}

// setup skips where the suite cannot run, then builds the agent, creates the
// namespace and starts a converged cluster, all undone by t.Cleanup.
func setup(t *testing.T) *suite {
	if os.Getenv(gateEnv) != "1" {
		t.Skipf("chaos suite: runs %d processes and kernel faults for minutes; run `make chaos` (sets %s=1)", *flagN, gateEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("chaos suite: needs root (network namespaces, nftables, signals to other uids)")
	}
	cfg, err := swim.DefaultConfig(*flagProfile)
	require.NoError(t, err, "-chaos.profile")
	require.GreaterOrEqual(t, *flagN, 32, "-chaos.n: the cases pick members up to n31")
	require.GreaterOrEqual(t, *flagLoad, 0.0, "-chaos.load: broadcasts a second, 0 for none")

	require.NoError(t, EnsureTools(t.Logf))
	if cleaned, err := CleanStaleNamespaces(); err != nil {
		t.Logf("stale namespaces: %v", err)
	} else if len(cleaned) > 0 {
		t.Logf("deleted stale namespaces of dead runs: %v", cleaned)
	}

	ns, err := NewNamespace()
	if err != nil {
		t.Skipf("chaos suite: cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := ns.Nft("add table inet " + nftTable + "\n"); err != nil {
		t.Skipf("chaos suite: nftables unusable in the namespace: %v", err)
	}

	if cleaned := CleanStaleBinDirs(""); len(cleaned) > 0 {
		t.Logf("deleted agent builds of dead runs: %v", cleaned)
	}
	binDir, err := NewBinDir("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(binDir) })
	logDir, log := agentLogDir(t, *flagKeepLogs)

	start := time.Now()
	bin, err := BuildAgent("go", binDir)
	require.NoError(t, err)
	t.Logf("built examples/agent in %v", time.Since(start).Round(time.Millisecond))

	cc := ClusterConfig{
		N: *flagN, Profile: *flagProfile, Bin: bin,
		BasePort: basePort, BaseUID: baseUID, LogDir: logDir,
	}
	var key []byte
	if *flagSecure {
		key = make([]byte, 32)
		_, err := rand.Read(key)
		require.NoError(t, err)
		cc.Keys, cc.Label = []string{base64.StdEncoding.EncodeToString(key)}, secureLabel
	}
	if *flagLoad > 0 {
		cc.LoadRate, cc.LoadSize = *flagLoad, loadSize
	}
	if *flagSigned {
		cc.Signatures = swim.SignaturesRequired.String()
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
	if *flagSecure {
		// The agent prints its keyring (ListKeys, Plaintext) right after
		// its ready line: the key must have reached every Memberlist.
		want := []string{Fingerprint(key)}
		for _, a := range c.Agents {
			var kr Line
			ok := WaitUntil(readyWithin, func() bool {
				var ok bool
				kr, ok = c.Keyring(a)
				return ok
			})
			require.True(t, ok, "%s printed no keyring line", a.Name)
			require.Equal(t, want, kr.Keys, "%s's keys", a.Name)
			require.Equal(t, swim.PlaintextRefuse.String(), kr.Plaintext, "%s's plaintext mode", a.Name)
		}
	}
	if *flagSigned {
		for _, a := range c.Agents {
			rl, ok := c.ReadyLine(a)
			require.True(t, ok, "%s printed no ready line", a.Name)
			require.Equal(t, swim.SignaturesRequired.String(), rl.Signatures, "%s's signature mode", a.Name)
			require.NotEmpty(t, rl.Identity, "%s's identity", a.Name)
		}
	}
	s := &suite{c: c, cfg: cfg, live: slices.Clone(c.Agents)}
	ok, why := s.waitConverged(convergeWithin)
	require.True(t, ok, "the cluster did not form within %v: %s", convergeWithin, why)
	s.report("setup: %d agents in namespace %s, all see each other in %v", len(c.Agents), ns.Name, time.Since(start).Round(time.Millisecond))
	t.Log(s.summary[len(s.summary)-1])
	if *flagSecure {
		s.report("setup: every agent's keyring holds the run's key (%s), primary, plaintext refused; label %s", Fingerprint(key), secureLabel)
		t.Log(s.summary[len(s.summary)-1])
	}
	if *flagSigned {
		s.report("setup: every agent signs its claims and requires the others' (signatures required), each under an identity of its own")
		t.Log(s.summary[len(s.summary)-1])
	}
	if *flagLoad > 0 {
		// The cases must all run under the load, so it has to be running
		// everywhere before the first.
		var idle string
		ok := WaitUntil(loadLinesWithin, func() bool {
			idle = s.loadIdle()
			return idle == ""
		})
		require.True(t, ok, "the broadcast load did not start within %v of the cluster forming: %s", loadLinesWithin, idle)
		s.report("setup: every agent sending %g broadcasts a second of %d B and receiving the others' (load lines) %v after start",
			*flagLoad, loadSize, time.Since(start).Round(time.Millisecond))
		t.Log(s.summary[len(s.summary)-1])
	}
	return s
}

// lastLoads returns each agent's last load line: its counts so far, up to
// the 10 s between two lines behind.
func (s *suite) lastLoads() map[string]LoadCounts {
	last := make(map[string]LoadCounts)
	for _, e := range s.c.Log.Select(func(e Event) bool { return e.Ev == "load" && e.Load != nil }) {
		last[e.Observer] = *e.Load
	}
	return last
}

// loadIdle names the first live agent whose load lines show no broadcast
// sent or none received yet; "" when every one shows both.
func (s *suite) loadIdle() string {
	last := s.lastLoads()
	for _, a := range s.live {
		c, ok := last[a.Name]
		switch {
		case !ok:
			return a.Name + " printed no load line"
		case c.Sent == 0 || c.Received == 0:
			return fmt.Sprintf("%s has sent %d broadcasts and received %d", a.Name, c.Sent, c.Received)
		}
	}
	return ""
}

// loadReport sums the agents' last load lines, and says whether the load
// ran: broadcasts sent and delivered.
func (s *suite) loadReport() (string, bool) {
	last := s.lastLoads()
	var total LoadCounts
	for _, c := range last {
		total.Sent += c.Sent
		total.Failed += c.Failed
		total.Received += c.Received
	}
	per := 0.0
	if total.Sent > 0 {
		per = float64(total.Received) / float64(total.Sent)
	}
	return fmt.Sprintf("Load: %g broadcasts/s per agent of %d B; the last load lines of %d agents (each up to 10 s old) count %d broadcasts sent, %d refused, %d deliveries: %.1f per broadcast (%d if each reached every other agent of the %d started)",
		*flagLoad, loadSize, len(last), total.Sent, total.Failed, total.Received, per, len(s.c.Agents)-1, len(s.c.Agents)), total.Sent > 0 && total.Received > 0
}

// waitConverged waits until every live member sees every other alive and
// every gone one gone, and says what differed when it gives up.
func (s *suite) waitConverged(within time.Duration) (bool, string) {
	var why string
	ok := WaitUntil(within, func() bool {
		var ok bool
		ok, why = s.c.Converged(s.live, s.gone)
		return ok
	})
	return ok, why
}

// heal ends the faults and waits for convergence. It returns a description
// for the reports: how long convergence took and, when it was not at once,
// the last difference that remained. When the cluster does not converge it
// fails the case, without stopping it (its own checks still run), and the
// cases that follow.
func (s *suite) heal(t *testing.T) (healed string, took time.Duration) {
	t.Helper()
	start := time.Now()
	require.NoError(t, s.c.Heal())
	s.healedAt = start
	var last string
	ok := WaitUntil(convergeWithin, func() bool {
		ok, why := s.c.Converged(s.live, s.gone)
		if !ok {
			last = why
		}
		return ok
	})
	took = time.Since(start)
	if !ok {
		s.broken = fmt.Sprintf("no convergence within %v of healing: %s", convergeWithin, last)
		t.Error(s.broken)
		return "NOT converged within " + convergeWithin.String() + " of healing (" + last + ")", took
	}
	if last == "" {
		return fmt.Sprintf("converged %v after healing", took.Round(time.Millisecond)), took
	}
	return fmt.Sprintf("converged %v after healing (last: %s)", took.Round(time.Millisecond), last), took
}

// begin checks that the cluster is converged (a failed case may have left
// it otherwise; healing then gives the next case a clean start) and returns
// the case's start time. Once a heal failed, the cases that follow fail at
// once: each would wait for convergence in vain.
//
// A case starts no sooner than settle after the last fault was lifted.
// Convergence alone is not enough: a probe sent just before the heal, by a
// member whose local health the fault had worsened, ends up to
// AwarenessMaxMultiplier probe intervals later (Lifeguard §IV-A), and an
// accusation it makes then belongs to the fault before, not to the case
// that follows. Without the wait the starvation case, run after the loss
// cases, counted such leftovers (two or three accusations within 0.3 s of
// its start, each time right after a heal).
func (s *suite) begin(t *testing.T) time.Time {
	t.Helper()
	if s.broken != "" {
		t.Fatalf("not run: the cluster never converged again after an earlier case (%s)", s.broken)
	}
	if ok, _ := s.c.Converged(s.live, s.gone); !ok {
		if s.heal(t); s.broken != "" {
			t.FailNow()
		}
	}
	if wait := s.settle() - time.Since(s.healedAt); !s.healedAt.IsZero() && wait > 0 {
		var last string
		if !WaitUntil(wait+convergeWithin, func() bool {
			if time.Since(s.healedAt) < s.settle() {
				return false
			}
			ok, why := s.c.Converged(s.live, s.gone)
			last = why
			return ok
		}) {
			s.broken = fmt.Sprintf("no convergence within %v of settling: %s", convergeWithin, last)
			t.Fatal(s.broken)
		}
	}
	return time.Now()
}

// settle is the longest a probe period can last: the probe interval
// stretched by the largest local health multiplier.
func (s *suite) settle() time.Duration {
	return time.Duration(s.cfg.AwarenessMaxMultiplier) * s.cfg.ProbeInterval
}

// falseDeaths returns the leave events since from that no fault explains.
func (s *suite) falseDeaths(from time.Time) []Event {
	return s.c.Log.Select(func(e Event) bool {
		if e.Ev != "leave" || e.Time().Before(from) {
			return false
		}
		for _, ok := range s.expected {
			if ok(e) {
				return false
			}
		}
		return true
	})
}

// holdFault lets a fault act for d, ending early if a false death shows.
func (s *suite) holdFault(from time.Time, d time.Duration) {
	WaitUntil(d, func() bool { return len(s.falseDeaths(from)) > 0 })
}

// requireNoFalseDeaths fails the case if anyone reported a live member as
// gone since from.
func (s *suite) requireNoFalseDeaths(t *testing.T, from time.Time) {
	t.Helper()
	if deaths := s.falseDeaths(from); len(deaths) > 0 {
		t.Fatalf("%d leave events about live members: %s", len(deaths), describe(deaths, 10))
	}
}

// suspicions counts the suspect events since from about the members in
// about, as seen by anyone, and the distinct accusations (member and
// incarnation) behind them.
func (s *suite) suspicions(from time.Time, about []*Agent) (events, accusations int) {
	names := names(about)
	seen := make(map[string]bool)
	for _, e := range s.c.Log.Select(func(e Event) bool {
		return e.Ev == "suspect" && !e.Time().Before(from) && slices.Contains(names, e.Node)
	}) {
		events++
		seen[fmt.Sprintf("%s/%d", e.Node, e.Inc)] = true
	}
	return events, len(seen)
}

// requireAccusationsAtMost fails the case (without stopping it) if the
// distinct accusations (member and incarnation suspected) since from about
// the members in about exceed bound, and lists the first suspect events:
// who printed it about whom, at which incarnation. One accusation shows as
// a suspect event at nearly every member, as it spreads; accusations are
// what a broken mechanism multiplies.
func (s *suite) requireAccusationsAtMost(t *testing.T, from time.Time, about []*Agent, bound int, what string) {
	t.Helper()
	names := names(about)
	events := s.c.Log.Select(func(e Event) bool {
		return e.Ev == "suspect" && !e.Time().Before(from) && slices.Contains(names, e.Node)
	})
	accused := make(map[string]bool)
	for _, e := range events {
		accused[fmt.Sprintf("%s/%d", e.Node, e.Inc)] = true
	}
	if len(accused) > bound {
		t.Errorf("%d distinct accusations (%d suspect events) of %s, over the bound %d: a mechanism that keeps live members above suspicion failed; first events: %s",
			len(accused), len(events), what, bound, describe(events, 10))
	}
}

// testLoss drops udpPct% of UDP packets and tcpPct% of TCP segments, at
// random, for the fault's length.
func (s *suite) testLoss(udpPct, tcpPct int, length time.Duration) func(*testing.T) {
	return func(t *testing.T) {
		from := s.begin(t)
		rules := []Rule{UDPLoss(udpPct)}
		if tcpPct > 0 {
			rules = append(rules, TCPLoss(tcpPct))
		}
		require.NoError(t, s.c.SetFaults(rules...))
		s.holdFault(from, length)
		drops, err := s.c.Drops()
		require.NoError(t, err)
		healed, _ := s.heal(t)
		sus, acc := s.suspicions(from, s.live)
		s.report("%s: %d%% UDP and %d%% TCP loss for %v: dropped %d UDP, %d TCP packets; %d suspect events (%d distinct accusations) about live members; %d false deaths; %s",
			strings.TrimPrefix(t.Name(), "TestChaos/"), udpPct, tcpPct, length, drops["udp-loss"], drops["tcp-loss"], sus, acc, len(s.falseDeaths(from)), healed)
		t.Log(s.summary[len(s.summary)-1])
		if tcpPct == 0 {
			s.requireAccusationsAtMost(t, from, s.live, *flagStrays, "live members under UDP loss alone")
		}
		s.requireNoFalseDeaths(t, from)
		require.NotZero(t, drops["udp-loss"], "the loss rule dropped nothing: the fault was not applied")
		if tcpPct > 0 {
			require.NotZero(t, drops["tcp-loss"], "the TCP loss rule dropped nothing: the fault was not applied")
		}
	}
}

func (s *suite) testPause(t *testing.T) {
	from := s.begin(t)
	victim := s.live[7]
	require.NoError(t, victim.Signal(syscall.SIGSTOP))
	stopped := WaitUntil(time.Second, victim.Stopped)
	time.Sleep(*flagPause) // the length of the fault, not a wait for the protocol
	require.NoError(t, victim.Signal(syscall.SIGCONT))
	require.True(t, stopped, "%s was not stopped by SIGSTOP", victim.Name)
	healed, _ := s.heal(t)
	sus, acc := s.suspicions(from, []*Agent{victim})
	others, _ := s.suspicions(from, without(s.live, victim))
	first := "never suspected"
	if e, ok := s.c.Log.First(func(e Event) bool {
		return e.Ev == "suspect" && e.Node == victim.Name && !e.Time().Before(from)
	}); ok {
		first = fmt.Sprintf("first suspected %v into the pause", e.Time().Sub(from).Round(time.Millisecond))
	}
	s.report("Pause: %s SIGSTOPped for %v (PauseTolerance %v): %s; %d suspect events (%d distinct accusations) about it, %d about others; %d false deaths; %s",
		victim.Name, *flagPause, s.cfg.PauseTolerance, first, sus, acc, others, len(s.falseDeaths(from)), healed)
	t.Log(s.summary[len(s.summary)-1])
	s.requireAccusationsAtMost(t, from, without(s.live, victim), *flagStrays, "members other than the paused one")
	if first == "never suspected" {
		t.Errorf("%s was never suspected during its %v pause: the fault went unnoticed and tested nothing", victim.Name, *flagPause)
	}
	if acc > maxAccusationsOfPaused {
		t.Errorf("%s was suspected at %d incarnations (bound %d): it did not refute at once on resuming, or was accused again after",
			victim.Name, acc, maxAccusationsOfPaused)
	}
	s.requireNoFalseDeaths(t, from)
}

func (s *suite) testStarvation(t *testing.T) {
	from := s.begin(t)
	starved := s.live[2 : 2+starveN]
	st, err := s.c.Starve(starved, starveActive, starvePeriod, uint64(from.UnixNano()))
	require.NoError(t, err)
	s.holdFault(from, *flagFault)
	st.Stop()
	slicesRun := st.Slices()
	healed, _ := s.heal(t)
	healthy := without(s.live, starved...)
	susH, accH := s.suspicions(from, healthy)
	susS, accS := s.suspicions(from, starved)
	s.report("Starvation: %s running %v of every %v for %v (%d slices): %d suspect events (%d distinct accusations) about healthy members, %d (%d) about starved ones; %d false deaths; %s",
		strings.Join(names(starved), ","), starveActive, starvePeriod, *flagFault, slicesRun, susH, accH, susS, accS, len(s.falseDeaths(from)), healed)
	t.Log(s.summary[len(s.summary)-1])
	s.requireAccusationsAtMost(t, from, healthy, *flagStrays, "healthy members while four were starved")
	s.requireNoFalseDeaths(t, from)
}

// testDeafness makes one member lose deafPct% of what is sent to it, UDP
// and TCP, while what it sends arrives: a member that cannot hear its
// peers, the situation Lifeguard's nacks are for. Its probes fail for want
// of acks, but it hears nothing from its ping-req relays either, not even a
// nack (a relay nacks only a target that is silent to it too), so it blames
// its own links and accuses no one; without nacks it accuses the healthy
// members it probes, again and again. It is suspected by the others,
// rightly, and hears enough to refute. One member only: two deaf members
// miss each other's refutations, and one declares the other dead, which is
// the fault at work, not a mechanism failing.
func (s *suite) testDeafness(t *testing.T) {
	from := s.begin(t)
	deaf := s.live[10:11]
	var rules []Rule
	for _, a := range deaf {
		rules = append(rules, Deaf(a, deafPct)...)
	}
	require.NoError(t, s.c.SetFaults(rules...))
	s.holdFault(from, *flagFault)
	drops, err := s.c.Drops()
	require.NoError(t, err)
	healed, _ := s.heal(t)
	var dropped []string
	var total uint64
	for _, a := range deaf {
		total += drops["deaf "+a.Name]
		dropped = append(dropped, fmt.Sprintf("%s %d", a.Name, drops["deaf "+a.Name]))
	}
	healthy := without(s.live, deaf...)
	susH, accH := s.suspicions(from, healthy)
	susD, accD := s.suspicions(from, deaf)
	s.report("Deafness: %s losing %d%% of what is sent to it for %v (dropped: %s): %d suspect events (%d distinct accusations) about healthy members, %d (%d) about deaf ones; %d false deaths; %s",
		strings.Join(names(deaf), ","), deafPct, *flagFault, strings.Join(dropped, ", "), susH, accH, susD, accD, len(s.falseDeaths(from)), healed)
	t.Log(s.summary[len(s.summary)-1])
	s.requireAccusationsAtMost(t, from, healthy, *flagStrays, "healthy members while one was deaf")
	s.requireNoFalseDeaths(t, from)
	require.NotZero(t, total, "the deafness rules dropped nothing: the fault was not applied")
}

func (s *suite) testOneWayLinks(t *testing.T) {
	from := s.begin(t)
	var rules []Rule
	var pairs []string
	for i := range oneWayPairs {
		a, b := s.live[16+2*i], s.live[1+2*i] // a's packets to b are lost
		rules = append(rules, OneWay(a, b)...)
		pairs = append(pairs, a.Name+"->"+b.Name)
	}
	require.NoError(t, s.c.SetFaults(rules...))
	s.holdFault(from, *flagFault)
	drops, err := s.c.Drops()
	require.NoError(t, err)
	healed, _ := s.heal(t)
	var udp, tcp uint64
	var perPair []string
	for _, p := range pairs {
		udp += drops[p+" udp"]
		tcp += drops[p+" tcp"]
		perPair = append(perPair, fmt.Sprintf("%s %d/%d", p, drops[p+" udp"], drops[p+" tcp"]))
	}
	sus, acc := s.suspicions(from, s.live)
	s.report("OneWayLinks: %d one-way failures for %v: dropped %d UDP, %d TCP packets (udp/tcp per pair: %s); %d suspect events (%d distinct accusations); %d false deaths; %s",
		oneWayPairs, *flagFault, udp, tcp, strings.Join(perPair, ", "), sus, acc, len(s.falseDeaths(from)), healed)
	t.Log(s.summary[len(s.summary)-1])
	s.requireAccusationsAtMost(t, from, s.live, *flagStrays, "live members with one-way link failures")
	s.requireNoFalseDeaths(t, from)
	require.NotZero(t, udp, "the one-way rules dropped no UDP packet: the fault was not applied")
	require.NotZero(t, tcp, "the one-way rules dropped no TCP segment: the fault was not applied")
}

// crashBound is the documented bound on the time until every survivor knows
// of a crash: PauseTolerance + ProbeInterval (README, "PauseTolerance: the
// knob to choose") plus a margin for 32 processes on 2 shared cores.
func (s *suite) crashBound() time.Duration {
	return s.cfg.PauseTolerance + s.cfg.ProbeInterval + *flagMargin
}

// detection waits until every observer reported victim gone since from
// (giving them the bound and 15s more, so that a slow one is measured, not
// just failed) and returns each observer's latency; an observer that never
// reported it is missing from the map.
func (s *suite) detection(victim *Agent, observers []*Agent, from time.Time) map[string]time.Duration {
	report := func() map[string]time.Duration {
		lat := make(map[string]time.Duration)
		for _, e := range s.c.Log.Select(func(e Event) bool {
			return e.Ev == "leave" && e.Node == victim.Name && !e.Time().Before(from)
		}) {
			if _, ok := lat[e.Observer]; !ok && slices.Contains(observers, s.c.Agent(e.Observer)) {
				lat[e.Observer] = e.Time().Sub(from)
			}
		}
		return lat
	}
	var lat map[string]time.Duration
	WaitUntil(s.crashBound()+15*time.Second, func() bool {
		lat = report()
		return len(lat) == len(observers)
	})
	return lat
}

// checkDetected asserts that every observer reported victim dead within the
// crash bound, and returns the latencies.
func (s *suite) checkDetected(t *testing.T, victim *Agent, observers []*Agent, from time.Time) []time.Duration {
	t.Helper()
	lat := s.detection(victim, observers, from)
	var all []time.Duration
	for _, o := range observers {
		d, ok := lat[o.Name]
		if !ok {
			t.Errorf("%s never reported %s gone (waited %v)", o.Name, victim.Name, s.crashBound()+15*time.Second)
			continue
		}
		all = append(all, d)
		if d > s.crashBound() {
			t.Errorf("%s reported %s gone after %v, over the bound %v", o.Name, victim.Name, d.Round(time.Millisecond), s.crashBound())
		}
		if v := s.c.Log.View(o.Name, victim.Name); v != ViewDead {
			t.Errorf("%s reports %s as %q, want dead", o.Name, victim.Name, v)
		}
	}
	return all
}

func (s *suite) testIsolation(t *testing.T) {
	from := s.begin(t)
	victim := s.live[27]
	isolated := func(e Event) bool {
		return (e.Node == victim.Name || e.Observer == victim.Name) && !e.Time().Before(from)
	}
	s.expected = append(s.expected, isolated)
	require.NoError(t, s.c.SetFaults(Isolate(victim)...))
	others := without(s.live, victim)
	lat := s.checkDetected(t, victim, others, from)
	drops, err := s.c.Drops()
	require.NoError(t, err)
	healStart := time.Now()
	healed, took := s.heal(t)
	// From now on, a leave about the member or by it is a false death again.
	s.expected[len(s.expected)-1] = func(e Event) bool { return isolated(e) && e.Time().Before(healStart.Add(took)) }
	p := percentiles(lat)
	s.report("Isolation: %s cut off (%d packets dropped): reported dead by %d of %d others, p50 %v, max %v (bound %v); back in: %s",
		victim.Name, drops["isolate "+victim.Name], len(lat), len(others), p(0.5), p(1), s.crashBound(), healed)
	t.Log(s.summary[len(s.summary)-1])
}

func (s *suite) testCrash(t *testing.T) {
	s.begin(t)
	var all []time.Duration
	var lines []string
	for i := range crashes {
		victim := s.live[len(s.live)-1]
		survivors := s.live[:len(s.live)-1]
		from := time.Now()
		require.NoError(t, victim.Signal(syscall.SIGKILL))
		s.expected = append(s.expected, func(e Event) bool { return e.Node == victim.Name && !e.Time().Before(from) })
		s.live, s.gone = survivors, append(s.gone, victim)
		lat := s.checkDetected(t, victim, survivors, from)
		all = append(all, lat...)
		p := percentiles(lat)
		suspected := "never suspected"
		if e, ok := s.c.Log.First(func(e Event) bool {
			return e.Ev == "suspect" && e.Node == victim.Name && !e.Time().Before(from)
		}); ok {
			suspected = fmt.Sprintf("first suspected after %v", e.Time().Sub(from).Round(time.Millisecond))
		}
		lines = append(lines, fmt.Sprintf("crash %d: %s %s; known dead by %d survivors: first %v, p50 %v, max %v",
			i+1, victim.Name, suspected, len(lat), p(0), p(0.5), p(1)))
		t.Log(lines[len(lines)-1])
	}
	p := percentiles(all)
	s.report("Crash: %d members SIGKILLed in turn, %d survivor reports: time until reported dead p50 %v, p90 %v, max %v (bound %v = PauseTolerance %v + ProbeInterval %v + margin %v)\n    %s",
		crashes, len(all), p(0.5), p(0.9), p(1), s.crashBound(), s.cfg.PauseTolerance, s.cfg.ProbeInterval, *flagMargin, strings.Join(lines, "\n    "))
	t.Log(s.summary[len(s.summary)-1])
}

func (s *suite) testGracefulLeave(t *testing.T) {
	s.begin(t)
	leaver := s.live[len(s.live)-1]
	others := s.live[:len(s.live)-1]
	from := time.Now()
	require.NoError(t, leaver.Signal(syscall.SIGUSR1))
	s.expected = append(s.expected, func(e Event) bool {
		return e.Node == leaver.Name && e.State == "left" && !e.Time().Before(from)
	})
	s.live, s.gone = others, append(s.gone, leaver)
	lat := make(map[string]time.Duration)
	done := WaitUntil(leaveWithin, func() bool {
		for _, e := range s.c.Log.Select(func(e Event) bool {
			return e.Ev == "leave" && e.Node == leaver.Name && !e.Time().Before(from)
		}) {
			if _, ok := lat[e.Observer]; !ok {
				lat[e.Observer] = e.Time().Sub(from)
			}
		}
		_, left := s.c.Log.First(func(e Event) bool { return e.Observer == leaver.Name && e.Ev == "left" })
		return left && len(lat) >= len(others)
	})
	var all []time.Duration
	for _, o := range others {
		if d, ok := lat[o.Name]; ok {
			all = append(all, d)
		}
		if v := s.c.Log.View(o.Name, leaver.Name); v != ViewLeft {
			t.Errorf("%s reports %s as %q, want left", o.Name, leaver.Name, v)
		}
	}
	_, left := s.c.Log.First(func(e Event) bool { return e.Observer == leaver.Name && e.Ev == "left" })
	require.True(t, left, "%s printed no left line within %v", leaver.Name, leaveWithin)
	require.True(t, done, "only %d of %d members reported %s's leave within %v", len(lat), len(others), leaver.Name, leaveWithin)
	require.False(t, leaver.Exited(), "%s exited on SIGUSR1", leaver.Name)
	p := percentiles(all)
	s.report("GracefulLeave: %s sent SIGUSR1: reported leave by %d of %d others (checked: state \"left\"), p50 %v, max %v",
		leaver.Name, len(all), len(others), p(0.5), p(1))
	t.Log(s.summary[len(s.summary)-1])
}

func (s *suite) testNoFalseDeaths(t *testing.T) {
	deaths := s.falseDeaths(time.Time{})
	events := s.c.Log.Len()
	s.report("NoFalseDeaths: %d events over the run, %d unexpected leave events", events, len(deaths))
	t.Log(s.summary[len(s.summary)-1])
	if len(deaths) > 0 {
		t.Errorf("%d leave events about live members: %s", len(deaths), describe(deaths, 10))
	}
	if garbage := s.c.Log.Garbage(); len(garbage) > 0 {
		t.Errorf("%d stdout lines are not events, the first: %q", len(garbage), garbage[0])
	}
}

// percentiles returns a function giving the q-quantile (0 the least, 1 the
// most) of ds, rounded to the millisecond.
func percentiles(ds []time.Duration) func(q float64) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return func(q float64) time.Duration {
		if len(sorted) == 0 {
			return 0
		}
		i := int(q * float64(len(sorted)-1))
		return sorted[i].Round(time.Millisecond)
	}
}

func names(agents []*Agent) []string {
	var out []string
	for _, a := range agents {
		out = append(out, a.Name)
	}
	return out
}

func without(agents []*Agent, drop ...*Agent) []*Agent {
	return slices.DeleteFunc(slices.Clone(agents), func(a *Agent) bool { return slices.Contains(drop, a) })
}

func describe(events []Event, most int) string {
	var parts []string
	for i, e := range events {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(events)-most))
			break
		}
		d := fmt.Sprintf("%s: %s %s", e.Observer, e.Ev, e.Node)
		if e.State != "" {
			d += " (" + e.State + ")"
		}
		parts = append(parts, fmt.Sprintf("%s inc %d at %s", d, e.Inc, e.Time().Format("15:04:05.000")))
	}
	return strings.Join(parts, "; ")
}

// agentLogDir makes the directory the agents' stderr logs go to. It is
// removed when the test passes (unless keep); when it fails, it is kept and
// the event lines are written beside the logs. Set *log once the cluster
// runs.
func agentLogDir(t *testing.T, keep bool) (dir string, log **EventLog) {
	t.Helper()
	dir, err := os.MkdirTemp("", "swimchaos-logs-")
	require.NoError(t, err)
	log = new(*EventLog)
	t.Cleanup(func() {
		if !t.Failed() && !keep {
			_ = os.RemoveAll(dir)
			return
		}
		if *log != nil {
			if f, err := os.Create(filepath.Join(dir, "events.jsonl")); err == nil {
				_ = (*log).WriteJSONL(f)
				_ = f.Close()
			}
		}
		t.Logf("agent logs (stderr) and events.jsonl (every event line) kept in %s", dir)
	})
	return dir, log
}
