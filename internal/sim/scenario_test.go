package sim

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// scenario is a Cluster of real Machines plus the checks protocol scenarios
// share.
type scenario struct {
	*Cluster
	t     testing.TB
	names []string
}

func lanConfig(string) *swim.Config { return swim.DefaultLANConfig() }

// newScenario starts n members named m0..m(n-1) with the given config and,
// if join is set, has all but m0 join through m0 at once.
func newScenario(t testing.TB, seed uint64, n int, config func(string) *swim.Config, join bool) *scenario {
	t.Helper()
	return newScenarioWith(t, Options{Seed: seed, NodeFactory: MachineFactory(config)}, n, join)
}

// newScenarioWith is newScenario with the cluster's options spelled out.
func newScenarioWith(t testing.TB, opts Options, n int, join bool) *scenario {
	t.Helper()
	c := New(opts)
	c.LogSeedOnFailure(t)
	s := &scenario{Cluster: c, t: t}
	nodes, err := c.AddNodes("m", n)
	require.NoError(t, err)
	for _, nd := range nodes {
		s.names = append(s.names, nd.Name())
	}
	if join {
		seed := c.Addr(s.names[0])
		for _, name := range s.names[1:] {
			s.join(name, seed)
		}
	}
	return s
}

func (s *scenario) join(name string, seeds ...netip.AddrPort) {
	s.t.Helper()
	require.NoError(s.t, s.DoMachine(name, func(m *swim.Machine, now time.Time) { m.Join(now, seeds) }))
}

func (s *scenario) machine(name string) *swim.Machine { return s.Node(name).Machine() }

// view is what observer believes of member (zero Member, false if unknown).
func (s *scenario) view(observer, member string) (swim.Member, bool) {
	return s.machine(observer).Member(member)
}

// allSee reports whether every up member among observers sees each of
// members in state want.
func (s *scenario) allSee(observers, members []string, want swim.State) bool {
	for _, o := range observers {
		if !s.Node(o).Up() {
			continue
		}
		for _, mem := range members {
			if mem == o {
				continue
			}
			got, ok := s.view(o, mem)
			if !ok || got.State != want {
				return false
			}
		}
	}
	return true
}

// converged reports whether every up member sees every other up member
// alive.
func (s *scenario) converged() bool {
	up := s.upNames()
	// Counting first keeps the check O(N) until it can succeed.
	for _, o := range up {
		if s.machine(o).NumMembers() != len(up) {
			return false
		}
	}
	return s.allSee(up, up, swim.StateAlive)
}

func (s *scenario) upNames() []string {
	var up []string
	for _, n := range s.names {
		if s.Node(n).Up() {
			up = append(up, n)
		}
	}
	return up
}

func without(names []string, drop ...string) []string {
	var out []string
	for _, n := range names {
		keep := true
		for _, d := range drop {
			if n == d {
				keep = false
			}
		}
		if keep {
			out = append(out, n)
		}
	}
	return out
}

// falseDeaths counts leave events, as seen by anyone, about members in
// alive that were never crashed and never left.
func (s *scenario) falseDeaths(healthy []string) int {
	set := map[string]bool{}
	for _, h := range healthy {
		set[h] = true
	}
	n := 0
	for _, r := range s.Log().Kind(swim.EventLeave) {
		if set[r.Event.Member.Name] {
			n++
		}
	}
	return n
}

func TestScenarioHundredMembersConvergeThroughOneSeed(t *testing.T) {
	s := newScenario(t, 1, 100, lanConfig, true)
	ok := s.RunUntil(s.converged, 2*time.Minute)
	require.True(t, ok, "100 members did not converge in 2 virtual minutes: %v", s)
	t.Logf("100 members converged in %v of virtual time", s.Elapsed())
	for _, name := range s.names {
		require.Equal(t, 100, s.machine(name).NumMembers(), "%s: %v", name, s)
	}
}

func TestScenarioCrashIsDetectedByEveryone(t *testing.T) {
	s := newScenario(t, 2, 32, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, 2*time.Minute), "no convergence: %v", s)
	victim := "m17"
	crashAt := s.Now()
	require.NoError(t, s.Crash(victim))
	survivors := without(s.names, victim)
	ok := s.RunUntil(func() bool { return s.allSee(survivors, []string{victim}, swim.StateDead) }, time.Minute)
	require.True(t, ok, "not every survivor declared %s dead: %v", victim, s)
	t.Logf("crash known by all 31 survivors after %v", s.Now().Sub(crashAt))
	// Views agree afterwards: every survivor sees exactly the survivors alive.
	s.Run(30 * time.Second)
	require.True(t, s.allSee(survivors, survivors, swim.StateAlive), "views disagree: %v", s)
	require.Zero(t, s.falseDeaths(survivors), "a survivor was declared dead: %v", s)
}

func TestScenarioTenPercentLossNoFalseDeaths(t *testing.T) {
	s := newScenario(t, 3, 32, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, 2*time.Minute), "no convergence: %v", s)
	s.SetLoss(0.10)
	s.Run(10 * time.Minute)
	require.Zero(t, s.falseDeaths(s.names), "live members declared dead under 10%% loss: %v", s)
	s.SetLoss(0)
	require.True(t, s.RunUntil(s.converged, time.Minute), "views did not agree after the loss ended: %v", s)
}

func TestScenarioWronglySuspectedMemberRefutes(t *testing.T) {
	s := newScenario(t, 4, 16, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, time.Minute), "no convergence: %v", s)
	victim := "m5"
	before := s.machine(victim).LocalMember().Incarnation
	// m0 cannot reach m5 directly nor through anyone, long enough for one
	// failed probe; then the network is whole again.
	for _, o := range without(s.names, victim) {
		require.NoError(t, s.BlockOneWay(o, victim))
	}
	ok := s.RunUntil(func() bool {
		return len(s.Log().Kind(swim.EventSuspect).About(victim)) > 0
	}, time.Minute)
	require.True(t, ok, "%s was never suspected: %v", victim, s)
	s.Heal()
	ok = s.RunUntil(func() bool { return s.allSee(s.names, []string{victim}, swim.StateAlive) }, time.Minute)
	require.True(t, ok, "%s's refutation did not spread: %v", victim, s)
	after := s.machine(victim).LocalMember().Incarnation
	require.Greater(t, after, before, "refutation must raise the incarnation")
	s.Run(time.Minute)
	require.Zero(t, s.falseDeaths([]string{victim}), "%s was declared dead: %v", victim, s)
	require.NotZero(t, s.machine(victim).Stats().Refutations)
}

func TestScenarioGracefulLeaveIsReportedAsLeft(t *testing.T) {
	s := newScenario(t, 5, 20, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, time.Minute), "no convergence: %v", s)
	leaver := "m7"
	require.NoError(t, s.DoMachine(leaver, func(m *swim.Machine, now time.Time) { require.NoError(t, m.Leave(now)) }))
	ok := s.RunUntil(func() bool { return s.machine(leaver).Status().LeaveDone }, 10*time.Second)
	require.True(t, ok, "leave was never sent: %v", s)
	require.NoError(t, s.Crash(leaver)) // the process exits after leaving
	rest := without(s.names, leaver)
	ok = s.RunUntil(func() bool { return s.allSee(rest, []string{leaver}, swim.StateLeft) }, 30*time.Second)
	require.True(t, ok, "not everyone saw %s leave: %v", leaver, s)
	leaves := s.Log().Kind(swim.EventLeave).About(leaver)
	require.Len(t, leaves, len(rest), "one leave event per member: %v", s)
	for _, r := range leaves {
		require.Equal(t, swim.StateLeft, r.Event.Member.State, "%s reported %s as failed: %v", r.Observer, leaver, s)
	}
}

// TestScenarioPartitionHeals splits the cluster in two for a minute, long
// enough that each half declares the other dead, then checks that the views
// merge again without any operator action.
func TestScenarioPartitionHeals(t *testing.T) {
	s := newScenario(t, 6, 20, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, time.Minute), "no convergence: %v", s)
	a, b := s.names[:10], s.names[10:]
	require.NoError(t, s.Partition(a, b))
	s.Run(time.Minute)
	// Each half declared the other dead (and may have forgotten it since).
	for _, pair := range [][2][]string{{a, b}, {b, a}} {
		for _, o := range pair[0] {
			for _, mem := range pair[1] {
				got, ok := s.view(o, mem)
				require.True(t, !ok || got.State == swim.StateDead, "%s still sees %s %v after a minute apart: %v", o, mem, got.State, s)
			}
		}
	}
	require.NotEmpty(t, s.Log().Kind(swim.EventLeave), "nobody was declared dead during the partition")
	healAt := s.Now()
	s.Heal()
	ok := s.RunUntil(s.converged, 2*time.Minute)
	require.True(t, ok, "views did not merge within 2 minutes of healing: %v", s)
	t.Logf("views agree %v after the partition healed", s.Now().Sub(healAt))
	require.LessOrEqual(t, s.Now().Sub(healAt), partitionHealBound(swim.DefaultLANConfig()), "merge slower than the documented bound")
}

func TestScenarioCrashedMemberRestartsAndRejoins(t *testing.T) {
	s := newScenario(t, 7, 10, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, time.Minute), "no convergence: %v", s)
	require.NoError(t, s.Crash("m3"))
	rest := without(s.names, "m3")
	require.True(t, s.RunUntil(func() bool { return s.allSee(rest, []string{"m3"}, swim.StateDead) }, time.Minute), "%v", s)
	require.NoError(t, s.Restart("m3"))
	s.join("m3", s.Addr("m0"))
	require.True(t, s.RunUntil(s.converged, time.Minute), "restarted member not accepted again: %v", s)
	require.Greater(t, s.machine("m3").LocalMember().Incarnation, uint64(0), "the restarted member had to overtake its old incarnation")
}

// partitionHealBound is the documented bound on how long after a partition
// heals the views agree again: the next reconnect attempt comes within
// 1.5·ReconnectInterval (jittered), and the merge it starts spreads by
// gossip and push-pull within a few probe periods.
func partitionHealBound(cfg *swim.Config) time.Duration {
	return cfg.ReconnectInterval*3/2 + 10*cfg.ProbeInterval
}
