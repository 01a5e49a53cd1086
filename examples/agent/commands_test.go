package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateCommandLine: agent migrate refuses a bad command line with
// its reason and exit status 2, before it listens.
func TestMigrateCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-mode", "bridge"}, "-name is required"},
		{[]string{"-name", "a", "-mode", "consul"}, `-mode "consul": want memberlist, bridge, standby or swim`},
		{[]string{"-name", "a", "-port", "65000", "-swim-offset", "1000"}, "both ports must be in 1..65535"},
		{[]string{"-name", "a", "-standby-grace", "0s"}, "-standby-grace 0s: must be positive"},
		{[]string{"-name", "a", "extra"}, `want 0 arguments, got ["extra"]`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			err := run(append([]string{"migrate"}, tc.args...), io.Discard, io.Discard)
			require.ErrorIs(t, err, errUsage, "a bad command line exits with status 2")
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.ErrorIs(t, run([]string{"migrate", "-h"}, io.Discard, io.Discard), flag.ErrHelp)
}
