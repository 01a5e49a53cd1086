package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// restartRun is a converged cluster of n in which victim crashes and is
// restarted at once, at its address, joining through seed.
type restartRun struct {
	*scenario
	victim  string
	killed  time.Time
	oldLife uint64
}

func newRestartRun(t *testing.T, seed uint64, n int) *restartRun {
	s := newScenario(t, seed, n, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, time.Minute))
	s.Run(5 * time.Second)
	r := &restartRun{scenario: s, victim: s.names[n-1]}
	r.oldLife = s.machine(r.victim).LocalMember().Life
	require.NotZero(t, r.oldLife)
	return r
}

// restart crashes the victim and starts a new process at its address,
// which joins through seed after gap.
func (r *restartRun) restart(gap time.Duration, seed string) {
	r.t.Helper()
	r.killed = r.Now()
	require.NoError(r.t, r.Crash(r.victim))
	r.Run(gap)
	require.NoError(r.t, r.Restart(r.victim))
	r.join(r.victim, r.Addr(seed))
}

// seenRestarted reports whether every live member holds the victim at its
// new life, alive.
func (r *restartRun) seenRestarted() bool {
	life := r.machine(r.victim).LocalMember().Life
	for _, o := range r.upNames() {
		if o == r.victim {
			continue
		}
		mb, ok := r.view(o, r.victim)
		if !ok || mb.Life != life || mb.State != swim.StateAlive {
			return false
		}
	}
	return true
}

// A member killed and restarted at once at its address: every survivor
// gets EventRestart within two probe intervals of the restart, with the
// new life, and none suspects the member or declares it dead.
func TestRestartIsAnEvent(t *testing.T) {
	r := newRestartRun(t, 41, 32)
	cfg := swim.DefaultLANConfig()
	r.restart(100*time.Millisecond, r.names[0])
	restarted := r.Now()
	require.True(t, r.RunUntil(r.seenRestarted, 2*cfg.ProbeInterval), "not every member holds the new life within two probe intervals")
	r.Run(30 * time.Second)
	newLife := r.machine(r.victim).LocalMember().Life
	require.NotEqual(t, r.oldLife, newLife)
	log := r.Log().About(r.victim).Since(r.killed)
	restarts := log.Kind(swim.EventRestart)
	for _, o := range r.names[:len(r.names)-1] {
		got := restarts.By(o)
		require.Len(t, got, 1, "%s: restart events", o)
		require.Equal(t, newLife, got[0].Event.Member.Life)
		require.LessOrEqual(t, got[0].At.Sub(restarted), 2*cfg.ProbeInterval)
	}
	require.Empty(t, log.Kind(swim.EventSuspect), "suspicions of the restarted member")
	require.Empty(t, log.Kind(swim.EventLeave), "deaths of the restarted member")
	require.True(t, r.converged())
}

// TestMassRestartHeals: 32 members, all but one killed and restarted
// at once, one every 100 ms, each new process joining through the one
// that stayed, its state lost. Every view agrees within 30 s, every
// member ends alive at its new life in every view, and no member whose
// new life was running is reported dead.
func TestMassRestartHeals(t *testing.T) {
	s := newScenario(t, 43, 32, lanConfig, true)
	require.True(t, s.RunUntil(s.converged, time.Minute))
	s.Run(5 * time.Second)
	keeper := s.names[0]
	restartedAt := map[string]time.Time{}
	for _, name := range s.names[1:] {
		require.NoError(t, s.Restart(name))
		s.join(name, s.Addr(keeper))
		restartedAt[name] = s.Now()
		s.Run(100 * time.Millisecond)
	}
	last := s.Now()
	lives := map[string]uint64{}
	for _, name := range s.names {
		lives[name] = s.machine(name).LocalMember().Life
	}
	healed := func() bool {
		for _, o := range s.names {
			for _, name := range s.names {
				if o == name {
					continue
				}
				mb, ok := s.view(o, name)
				if !ok || mb.State != swim.StateAlive || mb.Life != lives[name] {
					return false
				}
			}
		}
		return true
	}
	require.True(t, s.RunUntil(healed, 30*time.Second), "views differ 30 s after the last restart")
	t.Logf("every view holds every new life %v after the last restart", s.Now().Sub(last))
	s.Run(30 * time.Second)
	require.True(t, healed(), "a view changed after healing")
	for name, at := range restartedAt {
		deaths := s.Log().About(name).Since(at).Kind(swim.EventLeave)
		require.Empty(t, deaths, "%s reported dead after its new life started", name)
	}
}
