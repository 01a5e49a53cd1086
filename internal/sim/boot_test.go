package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// Converge starts a running cluster: everyone sees everyone at once, no
// death or suspicion follows, and a crash afterwards is detected as in a
// cluster that joined the slow way.
func TestConvergeStartsARunningCluster(t *testing.T) {
	s := newScenario(t, 5, 200, lanConfig, false)
	require.False(t, s.converged())
	require.NoError(t, s.Converge())
	require.True(t, s.converged(), "not converged right after Converge")
	from := s.Now()
	s.Run(30 * time.Second)
	require.True(t, s.converged())
	require.Zero(t, s.deathsOf(from, s.names))
	sus, _ := s.suspicionsOf(from, s.names)
	require.Zero(t, sus)

	victim := s.names[7]
	require.NoError(t, s.Crash(victim))
	survivors := without(s.names, victim)
	require.True(t, s.RunUntil(func() bool { return s.allSee(survivors, []string{victim}, swim.StateDead) }, 20*time.Second))
}

// A crashed member costs the cluster about reconnectFanout (8) reconnect
// attempts per ReconnectInterval, not one per member: each attempt pushes
// the sender's full state.
func TestReconnectAttemptsDoNotGrowWithTheCluster(t *testing.T) {
	s := newScenario(t, 6, 300, lanConfig, false)
	require.NoError(t, s.Converge())
	s.Run(30 * time.Second)
	victim := s.names[9]
	require.NoError(t, s.Crash(victim))
	survivors := without(s.names, victim)
	require.True(t, s.RunUntil(func() bool { return s.allSee(survivors, []string{victim}, swim.StateDead) }, 20*time.Second))
	before := s.sumStats(survivors, func(st swim.Stats) uint64 { return st.Reconnects })
	const intervals = 10
	s.Run(intervals * swim.DefaultLANConfig().ReconnectInterval)
	attempts := s.sumStats(survivors, func(st swim.Stats) uint64 { return st.Reconnects }) - before
	t.Logf("%d survivors made %d reconnect attempts at the crashed member in %d intervals", len(survivors), attempts, intervals)
	require.NotZero(t, attempts)
	require.Less(t, attempts, uint64(3*8*intervals))
}
