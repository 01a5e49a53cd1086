package claims

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each accuser's accusations are bounded by its bucket: AccuserBurst at
// once, then one per AccuserEvery probe intervals; a copy of an
// accusation taken costs nothing, and accusers do not share buckets.
func TestAccuserBuckets(t *testing.T) {
	accuse := func(tb *Table, from string, n int, at time.Time) (took int) {
		for i := range n {
			if tb.ProveAccusation(at, Accusation{Name: fmt.Sprintf("m%d-%d", at.Unix(), i), From: from, Inc: 1}, nil) {
				took++
			}
		}
		return took
	}
	for _, tc := range []struct {
		name       string
		first      int
		later      time.Duration
		wantFirst  int
		wantLater  int
		wantLimits uint64
	}{
		{"within the burst", 10, 0, 10, 0, 0},
		{"past the burst", 40, 0, AccuserBurst, 0, 40 - AccuserBurst},
		{"refilled by one per interval", 40, 3 * time.Second, AccuserBurst, 3, 40 - AccuserBurst + 7},
		{"refilled no higher than the burst", 40, time.Hour, AccuserBurst, 10, 40 - AccuserBurst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable(ModeSign)
			require.Equal(t, tc.wantFirst, accuse(tb, "a", tc.first, testNow))
			if tc.later > 0 {
				require.Equal(t, tc.wantLater, accuse(tb, "a", 10, testNow.Add(tc.later)))
			}
			taken, limited := tb.AccusationsBy("a")
			require.Equal(t, uint64(tc.wantFirst+tc.wantLater), taken)
			require.Equal(t, tc.wantLimits, limited)
			require.Equal(t, tc.wantLimits, tb.Stats().AccusationsLimited)
		})
	}

	tb := newTable(ModeSign)
	k := Accusation{Name: "b", From: "a", Inc: 1}
	for range 2 * AccuserBurst {
		require.True(t, tb.ProveAccusation(testNow, k, nil), "a copy")
	}
	taken, _ := tb.AccusationsBy("a")
	require.Equal(t, uint64(1), taken)
	require.Equal(t, AccuserBurst, accuse(tb, "c", 40, testNow), "another accuser's bucket")
	taken, limited := tb.AccusationsBy("nobody")
	require.Zero(t, taken+limited)
}
