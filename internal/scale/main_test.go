package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A small run prints every figure, and each crash is reported by every
// survivor (the run crashes one member a minute).
func TestSmallRunReportsItsFigures(t *testing.T) {
	var out, errs bytes.Buffer
	require.NoError(t, run([]string{"-n", "40", "-duration", "2m30s", "-memlimit", "0"}, &out, &errs))
	s := out.String()
	for _, want := range []string{"members  ", "faster than real time", "member-seconds per wall second", "bytes per member", "traffic per member"} {
		require.Contains(t, s, want)
	}
	m := regexp.MustCompile(`crashes / death and suspect events\s+(\d+) / (\d+)`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	crashes, _ := strconv.Atoi(m[1])
	deaths, _ := strconv.Atoi(m[2])
	require.Equal(t, 2, crashes)
	require.Equal(t, 39+38, deaths, "each crash reported once by every survivor:\n%s", s)
	require.Contains(t, errs.String(), "boot (converge)")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "1"}, {"-duration", "0s"}, {"-boot", "magic"}, {"-crash-every", "-1s"}} {
		require.Error(t, run(args, &bytes.Buffer{}, &bytes.Buffer{}), "%v", args)
	}
}
