package sim

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type churnRun struct {
	joined, crashed []string
	joinTimes       []time.Duration
	up              int
	skipped         int
}

// runChurn runs a Churn over 20 silent fakes for 15 minutes (the churn
// lasts 10) and checks what every join was given.
func runChurn(t *testing.T, seed uint64, opts ChurnOptions) churnRun {
	h := newHarness(t, Options{Seed: seed})
	for i := range 20 {
		h.add(fmt.Sprintf("m%d", i))
	}
	var r churnRun
	opts.Join = func(n Node, now time.Time, via netip.AddrPort) {
		r.joinTimes = append(r.joinTimes, now.Sub(Epoch))
		v := h.NodeByAddr(via)
		require.NotNil(t, v, "a join through nobody")
		require.True(t, v.Up(), "a join through a crashed member")
		require.NotEqual(t, n, v.Node(), "a join through itself")
	}
	opts.Duration = 10 * time.Minute
	ch, err := h.StartChurn(opts)
	require.NoError(t, err)
	h.Run(15 * time.Minute)
	r.joined, r.crashed, r.skipped = ch.Joined(), ch.Crashed(), ch.Skipped()
	for _, n := range h.Nodes() {
		if n.Up() {
			r.up++
		}
	}
	for _, name := range r.crashed {
		require.False(t, h.Node(name).Up())
	}
	return r
}

func TestChurnJoinsAndCrashesAtItsRates(t *testing.T) {
	opts := ChurnOptions{JoinsPerMinute: 6, CrashesPerMinute: 3, Protect: []string{"m0"}}
	a := runChurn(t, 1, opts)
	t.Logf("Poisson: %d joins, %d crashes in 10 minutes", len(a.joined), len(a.crashed))
	require.InDelta(t, 60, len(a.joined), 20)
	require.InDelta(t, 30, len(a.crashed), 15)
	require.Equal(t, "churn0", a.joined[0])
	require.NotContains(t, a.crashed, "m0", "protected")
	require.Equal(t, 20+len(a.joined)-len(a.crashed), a.up)
	for _, d := range a.joinTimes {
		require.LessOrEqual(t, d, 10*time.Minute)
	}

	// Deterministic: the same seed gives the same churn, another seed
	// another.
	require.Equal(t, a, runChurn(t, 1, opts))
	require.NotEqual(t, a.crashed, runChurn(t, 2, opts).crashed)

	// Regular: evenly spaced, exactly the rate.
	opts.Regular = true
	r := runChurn(t, 1, opts)
	require.Len(t, r.joined, 60)
	require.Len(t, r.crashed, 30)
	for i, d := range r.joinTimes {
		require.Equal(t, time.Duration(i+1)*10*time.Second, d)
	}
}

func TestChurnKeepsMinUpAndStops(t *testing.T) {
	r := runChurn(t, 3, ChurnOptions{CrashesPerMinute: 60, MinUp: 5})
	require.Equal(t, 5, r.up)
	require.Len(t, r.crashed, 15)
	require.NotZero(t, r.skipped)
	require.Empty(t, r.joined)

	h := newHarness(t, Options{Seed: 4})
	h.add("a", "b")
	ch, err := h.StartChurn(ChurnOptions{JoinsPerMinute: 60, Regular: true})
	require.NoError(t, err)
	h.Run(5*time.Second + time.Millisecond)
	require.Len(t, ch.Joined(), 5)
	ch.Stop()
	h.Run(time.Minute)
	require.Len(t, ch.Joined(), 5)
	require.Len(t, h.Nodes(), 7)

	_, err = h.StartChurn(ChurnOptions{JoinsPerMinute: -1})
	require.Error(t, err)
	_, err = h.StartChurn(ChurnOptions{Protect: []string{"nobody"}})
	require.ErrorIs(t, err, ErrUnknownNode)
}
