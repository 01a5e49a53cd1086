package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// starveRun has a ping b every 10ms while b is starved (200ms of every
// second, for 5s from 1s) and returns the harness after 8s.
func starveRun(t *testing.T, seed uint64) *harness {
	h := newHarness(t, Options{Seed: seed, Latency: ConstantLatency(time.Millisecond)})
	h.periods["a"] = 10 * time.Millisecond
	h.periods["b"] = 100 * time.Millisecond
	h.add("a", "b")
	h.target("a", "b")
	h.Run(time.Second)
	require.NoError(t, h.Starve("b", 200*time.Millisecond, time.Second, 5*time.Second))
	require.True(t, h.Starving("b"))
	h.Run(7 * time.Second)
	return h
}

func TestStarveReadsInputsOnlyInSlices(t *testing.T) {
	h := starveRun(t, 1)
	require.False(t, h.Starving("b"))
	b := h.fake("b")

	// In each starved second, b reads its packets within one slice of at
	// most 200ms (the first read of a slice takes the backlog).
	var starts []time.Duration
	for k := 1; k < 6; k++ {
		lo, hi := at(time.Duration(k)*time.Second), at(time.Duration(k+1)*time.Second)
		var first, last time.Time
		for _, r := range b.got {
			if !r.at.Before(lo) && r.at.Before(hi) {
				if first.IsZero() {
					first = r.at
				}
				last = r.at
			}
		}
		require.False(t, first.IsZero(), "b read nothing in second %d", k)
		require.LessOrEqual(t, last.Sub(first), 200*time.Millisecond, "second %d", k)
		starts = append(starts, first.Sub(lo))
	}
	require.NotEqual(t, starts[0], starts[1], "slices are placed at random: %v", starts)

	// Nothing is lost: every ping was read and acked, some late.
	a := h.fake("a")
	pings := 0
	for _, r := range b.got {
		if r.kind == kindPing {
			pings++
		}
	}
	require.Equal(t, int(a.seq)-1, pings, "all but the ping sent this very moment")
	acks := a.gotKind(kindAck)
	require.Len(t, acks, pings)
	var worst time.Duration
	for _, r := range acks {
		worst = max(worst, r.at.Sub(r.sent))
	}
	require.Greater(t, worst, 500*time.Millisecond)
	require.LessOrEqual(t, worst, 1600*time.Millisecond+2*time.Millisecond, "stalls last at most 2·(period-active)")

	// Timers ran on time throughout: b ticked every 100ms.
	for i := 1; i < len(b.ticks); i++ {
		require.Equal(t, 100*time.Millisecond, b.ticks[i].Sub(b.ticks[i-1]), "tick %d", i)
	}

	// After the starvation, b reads at once.
	for _, r := range b.got {
		if !r.at.Before(at(6300 * time.Millisecond)) {
			require.Equal(t, time.Millisecond, r.at.Sub(r.sent))
		}
	}
}

func TestStarveIsDeterministic(t *testing.T) {
	t1, t2 := starveRun(t, 7).trace, starveRun(t, 7).trace
	require.Equal(t, t1, t2)
	require.NotEqual(t, t1, starveRun(t, 8).trace)
}

func TestStarveEndsOnRequestAndOnCrash(t *testing.T) {
	h := newHarness(t, Options{Seed: 3, Latency: ConstantLatency(time.Millisecond)})
	h.periods["a"] = 10 * time.Millisecond
	h.add("a", "b", "c")
	h.target("a", "b", "c")
	require.NoError(t, h.Starve("b", 10*time.Millisecond, time.Hour, time.Hour))
	require.NoError(t, h.Starve("c", 10*time.Millisecond, time.Hour, time.Hour))
	h.Run(10 * time.Second)
	require.Less(t, len(h.fake("b").got), 5, "b barely reads")

	// Starve with d = 0 ends it at once: the backlog is read now, up to
	// the ping sent 10ms ago (the one sent now is on its way).
	require.NoError(t, h.Starve("b", 0, 0, 0))
	require.False(t, h.Starving("b"))
	got := h.fake("b").got
	require.Greater(t, len(got), 990)
	require.Equal(t, h.Now(), got[len(got)-1].at)
	require.Equal(t, h.Now().Add(-10*time.Millisecond), got[len(got)-1].sent)

	// A crash ends it, and the restarted node reads normally.
	require.NoError(t, h.Restart("c"))
	require.False(t, h.Starving("c"))
	h.Run(time.Second)
	require.Len(t, h.fake("c").got, 100)
	require.Equal(t, h.fake("b").got[len(h.fake("b").got)-1].at, h.Now().Add(-9*time.Millisecond))

	require.ErrorIs(t, h.Starve("nobody", time.Millisecond, time.Second, time.Second), ErrUnknownNode)
	require.NoError(t, h.Crash("c"))
	require.ErrorIs(t, h.Starve("c", time.Millisecond, time.Second, time.Second), ErrNodeDown)
}

func TestStarveAndPauseCombine(t *testing.T) {
	h := newHarness(t, Options{Seed: 4, Latency: ConstantLatency(time.Millisecond)})
	h.periods["a"] = 10 * time.Millisecond
	h.add("a", "b")
	h.target("a", "b")
	require.NoError(t, h.Starve("b", 100*time.Millisecond, time.Second, 10*time.Second))
	require.NoError(t, h.Pause("b", 3*time.Second))
	h.Run(3*time.Second - time.Millisecond)
	require.Empty(t, h.fake("b").got, "paused: no slice reads")
	h.Run(8 * time.Second)
	require.Len(t, h.fake("b").got, int(h.fake("a").seq), "everything read in the end, in order")
	got := h.fake("b").got
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1].seq, got[i].seq)
	}
}

func TestSlowMemberDelaysItsPacketsBothWays(t *testing.T) {
	h := newHarness(t, Options{Seed: 5, Latency: ConstantLatency(time.Millisecond)})
	h.add("a", "b", "c")
	require.NoError(t, h.SetSlow("b", ConstantLatency(200*time.Millisecond)))
	require.True(t, h.Slow("b"))
	require.False(t, h.Slow("a"))
	h.send("a", "b", 1)
	h.send("a", "c", 1)
	h.Run(time.Second)
	require.Equal(t, at(201*time.Millisecond), h.fake("b").got[0].at, "to the slow member")
	require.Equal(t, at(time.Millisecond), h.fake("c").got[0].at, "others are not slowed")
	for _, r := range h.fake("a").got {
		if r.from == h.Addr("b") {
			require.Equal(t, at(402*time.Millisecond), r.at, "from the slow member too")
		} else {
			require.Equal(t, at(2*time.Millisecond), r.at)
		}
	}

	// Two slow ends add up; streams are slowed as packets are.
	require.NoError(t, h.SetSlow("c", UniformLatency(100*time.Millisecond, 100*time.Millisecond)))
	start := h.Now()
	h.send("b", "c", 1)
	var id uint64
	h.do("a", func(f *fake, _ time.Time) { id = f.stream(h.Addr("b"), "x", 5*time.Second) })
	h.Run(time.Second)
	require.Equal(t, start.Add(301*time.Millisecond), h.fake("c").got[1].at)
	res := h.fake("a").results
	require.Len(t, res, 1)
	require.Equal(t, id, res[0].id)
	require.NoError(t, res[0].err)
	require.Equal(t, start.Add(402*time.Millisecond), res[0].at)

	// Slowness outlives a restart; a zero Latency ends it.
	require.NoError(t, h.Restart("b"))
	require.True(t, h.Slow("b"))
	require.NoError(t, h.SetSlow("b", Latency{}))
	require.False(t, h.Slow("b"))
	start = h.Now()
	h.send("a", "b", 1)
	h.Run(time.Second)
	require.Equal(t, start.Add(time.Millisecond), h.fake("b").got[0].at)
	require.ErrorIs(t, h.SetSlow("nobody", ConstantLatency(time.Second)), ErrUnknownNode)
}
