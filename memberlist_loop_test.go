package swim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLargeMergePacedWhilePacketsArrive: between two slices of a large
// merge the loop's timer waits a share of the slice's time when packets
// were fed since the last slice, and not at all when none were.
func TestLargeMergePacedWhilePacketsArrive(t *testing.T) {
	cfg := mtConfig()
	cfg.MaxMembers = 20_000
	m, err := NewMachine(cfg, mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
	require.NoError(t, err)
	_, err = m.HandleStream(mtStart, mtStranger, largePushPull(t, 10*mergeSlice))
	require.NoError(t, err)
	require.NotEmpty(t, m.merges, "a merge in slices is in progress")

	ml := &Memberlist{machine: m, timer: time.NewTimer(math.MaxInt64)}
	defer ml.timer.Stop()
	const slice = 40 * time.Millisecond

	// No packet since the last slice: the next one is due at once.
	ml.paceMerge(time.Now().Add(-slice))
	require.True(t, ml.mergeRest.IsZero())
	ml.rearm()
	require.Equal(t, m.NextDeadline(), ml.armed)

	// Packets fed meanwhile: the next slice waits.
	ml.fed++
	before := time.Now()
	ml.paceMerge(before.Add(-slice))
	require.False(t, ml.mergeRest.Before(before.Add(slice/mergeRestDivisor)), "rest %v", ml.mergeRest.Sub(before))
	ml.rearm()
	require.Equal(t, ml.mergeRest, ml.armed, "the timer waits for the rest, not the merge's deadline")

	// Once the merge is done, nothing is delayed.
	for len(m.merges) > 0 {
		m.Tick(mtStart)
	}
	ml.rearm()
	require.Equal(t, m.NextDeadline(), ml.armed)
}
