package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFlagsSetTheConfig(t *testing.T) {
	o, err := parseFlags([]string{
		"-name", "x", "-profile", "wan", "-pause-tolerance", "20s", "-indirect-checks", "5",
		"-probe-interval", "2s", "-probe-timeout", "700ms", "-meta", "zone=eu", "-advertise", "10.1.2.3:9000",
	}, io.Discard)
	require.NoError(t, err)
	cfg, err := o.config()
	require.NoError(t, err)
	require.Equal(t, 20*time.Second, cfg.PauseTolerance)
	require.Equal(t, 5, cfg.IndirectChecks)
	require.Equal(t, 2*time.Second, cfg.ProbeInterval)
	require.Equal(t, 700*time.Millisecond, cfg.ProbeTimeout)
	require.Equal(t, []byte("zone=eu"), cfg.Meta)
	require.Equal(t, "10.1.2.3", cfg.AdvertiseAddr)
	require.Equal(t, 9000, cfg.AdvertisePort)
	require.Equal(t, 60*time.Second, cfg.GossipToDeadTime, "the rest is the profile's")

	// Flags not given keep the profile's values.
	o, err = parseFlags([]string{"-profile", "local"}, io.Discard)
	require.NoError(t, err)
	cfg, err = o.config()
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, cfg.PauseTolerance)
	require.Equal(t, 3, cfg.IndirectChecks)
	require.Empty(t, cfg.Meta)
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-profile", "moon"}, `-profile: swim: invalid config: profile "moon"`},
		{[]string{"-pause-tolerance", "-1s"}, "-pause-tolerance -1s: must be positive"},
		{[]string{"-pause-tolerance", "soon"}, `invalid value "soon" for flag -pause-tolerance`},
		{[]string{"-profile", "local", "-pause-tolerance", "100ms"}, "-pause-tolerance: PauseTolerance (100ms) must be at least ProbeInterval (200ms)"},
		{[]string{"-probe-timeout", "2s"}, "-probe-timeout: ProbeTimeout (2s) must be shorter than ProbeInterval (1s)"},
		{[]string{"-indirect-checks", "0"}, "-indirect-checks 0: must be at least 1"},
		{[]string{"-meta", string(make([]byte, 600))}, "-meta: Meta is 600 bytes, over MaxMetaSize 512"},
		{[]string{"-meta", "\xff"}, "-meta: not UTF-8 text"},
		{[]string{"-advertise", "0.0.0.0"}, "-advertise: \"0.0.0.0\" cannot be reached by peers"},
		{[]string{"-advertise", "host"}, "-advertise: \"host\" is neither an IP address nor ip:port"},
		{[]string{"-http", "8080"}, `-http "8080": want host:port`},
		{[]string{"-bind", "localhost"}, `-bind: BindAddr "localhost" is not an IP address`},
		{[]string{"-name", ""}, "-name: Name is empty"},
		{[]string{"-load-rate", "-1"}, "-load-rate -1: must be 0 (no load) or a positive number of broadcasts a second"},
		{[]string{"-load-rate", "NaN"}, "-load-rate NaN: must be 0 (no load)"},
		{[]string{"-load-rate", "2e6"}, "-load-rate 2e+06: must be 0 (no load) or a positive number of broadcasts a second, at most 1000000"},
		{[]string{"-load-rate", "often"}, `invalid value "often" for flag -load-rate`},
		{[]string{"-load-size", "0"}, "-load-size 0: must be at least 1 byte"},
		{[]string{"-load-rate", "10", "-load-size", "2000"}, "-load-size 2000: over the largest broadcast this member can send"},
		{[]string{"-load-size", "1400"}, "-load-size 1400: over the largest broadcast this member can send"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if err == nil {
				_, err = o.config()
			}
			require.Error(t, err)
			require.ErrorIs(t, err, errUsage, "a bad command line exits with status 2")
			require.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := parseFlags([]string{"-h"}, io.Discard)
	require.True(t, errors.Is(err, flag.ErrHelp))
	require.False(t, errors.Is(err, errUsage), "-h is no error")
}

// TestKubernetesManifestArgs: the agent's arguments in k8s.yaml, with the
// downward API's variables filled in, are a valid command line.
func TestKubernetesManifestArgs(t *testing.T) {
	b, err := os.ReadFile("k8s.yaml")
	require.NoError(t, err)
	var args []string
	inArgs := false
	for l := range strings.SplitSeq(string(b), "\n") {
		s := strings.TrimSpace(l)
		switch {
		case s == "args:":
			inArgs = true
		case inArgs && strings.HasPrefix(s, "- -"):
			args = append(args, strings.TrimPrefix(s, "- "))
		default:
			inArgs = false
		}
	}
	require.NotEmpty(t, args, "no container args in k8s.yaml")
	vars := strings.NewReplacer("$(POD_NAME)", "swim-0", "$(POD_NAMESPACE)", "default",
		"$(POD_IP)", "10.1.2.3", "$(NODE_NAME)", "node-a")
	for i := range args {
		args[i] = vars.Replace(args[i])
		require.NotContains(t, args[i], "$(", "a variable the test does not know")
	}
	o, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	cfg, err := o.config()
	require.NoError(t, err)
	require.Equal(t, "swim-0", cfg.Name)
	require.Equal(t, "10.1.2.3", cfg.AdvertiseAddr)
	require.Equal(t, "swim.default.svc.cluster.local:7946", o.join)
	require.True(t, o.leaveOnTerm)
	require.Equal(t, ":8080", o.httpAddr)
}

// TestLoadFlags: the load is off by default; the largest -load-size
// accepted is the library's, for this member's name and label, which take
// room from the packet.
func TestLoadFlags(t *testing.T) {
	o, err := parseFlags([]string{"-name", "x"}, io.Discard)
	require.NoError(t, err)
	require.Zero(t, o.loadRate, "no load unless asked")
	require.Equal(t, 100, o.loadSize)

	o, err = parseFlags([]string{"-name", "x", "-load-rate", "0.5"}, io.Discard)
	require.NoError(t, err)
	cfg, err := o.config()
	require.NoError(t, err)
	most, err := maxLoadSize(cfg)
	require.NoError(t, err)
	// "About 1,300 bytes at the default PacketBudget" (Memberlist.Broadcast).
	require.Greater(t, most, 1200)
	require.Less(t, most, cfg.PacketBudget)

	accepts := func(args ...string) error {
		o, err := parseFlags(args, io.Discard)
		if err == nil {
			_, err = o.config()
		}
		return err
	}
	require.NoError(t, accepts("-name", "x", "-load-rate", "10", "-load-size", strconv.Itoa(most)))
	require.ErrorIs(t, accepts("-name", "x", "-load-rate", "10", "-load-size", strconv.Itoa(most+1)), errUsage)

	// A longer name and a label leave less room: at least their own bytes
	// (and their length prefixes).
	o, err = parseFlags([]string{"-name", "x" + strings.Repeat("y", 50), "-label", strings.Repeat("l", 40), "-load-rate", "10"}, io.Discard)
	require.NoError(t, err)
	cfg, err = o.config()
	require.NoError(t, err)
	smaller, err := maxLoadSize(cfg)
	require.NoError(t, err)
	require.LessOrEqual(t, smaller, most-50-40)
	require.Positive(t, smaller)
}
