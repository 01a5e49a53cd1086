package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnstableNamesEveryFailedRun(t *testing.T) {
	ok := result{Library: "swim", Settings: "lan-defaults", N: 64, Converged: true}
	require.Empty(t, unstable([]result{ok}))

	slow := ok
	slow.Converged, slow.Joined, slow.BootBound = false, 40, 60
	dead := ok
	dead.FalseSteady = 3
	lossy := ok
	lossy.FalseLoss = 1
	broken := ok
	broken.Error = "bind: address in use"
	bad := unstable([]result{ok, slow, dead, lossy, broken})
	require.Len(t, bad, 4)
	require.Contains(t, bad[0], "did not converge within 60 s (40 of 63 joins)")
	require.Contains(t, bad[1], "3 in the window")
	require.Contains(t, bad[2], "1 under loss")
	require.Contains(t, bad[3], "bind: address in use")
}
