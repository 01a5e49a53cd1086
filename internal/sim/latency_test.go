package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLognormalLatencyHasItsPercentiles(t *testing.T) {
	l := LognormalLatency(time.Millisecond, 50*time.Millisecond)
	require.InDelta(t, float64(time.Millisecond), float64(l.Quantile(0.5)), 1e3)
	require.InDelta(t, float64(50*time.Millisecond), float64(l.Quantile(0.99)), 1e4)
	require.Equal(t, "lognormal(p50 1ms, p99 50ms)", l.String())

	rng := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, 200_000)
	for i := range ds {
		ds[i] = l.Sample(rng)
	}
	slices.Sort(ds)
	require.InEpsilon(t, float64(time.Millisecond), float64(Percentile(ds, 0.5)), 0.02)
	require.InEpsilon(t, float64(50*time.Millisecond), float64(Percentile(ds, 0.99)), 0.05)

	// Clamped: nothing outside [Min, Max], and both bounds are hit.
	capped := l
	capped.Min, capped.Max = 200*time.Microsecond, 20*time.Millisecond
	var atMin, atMax int
	for range 20_000 {
		d := capped.Sample(rng)
		require.GreaterOrEqual(t, d, capped.Min)
		require.LessOrEqual(t, d, capped.Max)
		atMin += map[bool]int{true: 1}[d == capped.Min]
		atMax += map[bool]int{true: 1}[d == capped.Max]
	}
	require.NotZero(t, atMin)
	require.NotZero(t, atMax)
	require.Equal(t, capped.Max, capped.Quantile(1))
	require.Equal(t, capped.Min, capped.Quantile(0))
}

func TestLatencyDegenerateCases(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	require.Equal(t, 5*time.Millisecond, LognormalLatency(5*time.Millisecond, 5*time.Millisecond).Sample(rng), "p99 = p50: constant")
	require.Equal(t, 5*time.Millisecond, LognormalLatency(5*time.Millisecond, time.Millisecond).Sample(rng), "p99 < p50: constant")
	require.Equal(t, time.Duration(0), LognormalLatency(0, time.Second).Sample(rng), "p50 0: the constant Min")
	require.Equal(t, 3*time.Millisecond, ConstantLatency(3*time.Millisecond).Sample(rng))
	require.Equal(t, "constant(3ms)", ConstantLatency(3*time.Millisecond).String())
	require.Equal(t, "uniform(1ms, 2ms)", UniformLatency(time.Millisecond, 2*time.Millisecond).String())
	require.Equal(t, 1500*time.Microsecond, UniformLatency(time.Millisecond, 2*time.Millisecond).Quantile(0.5))
	require.Equal(t, time.Duration(0), Latency{Min: -time.Second}.Sample(rng), "negative delays are 0")
}

// Through the network: every packet of a lognormal link is delayed by a
// draw, and the delays have the distribution's percentiles; other links
// keep the default.
func TestLognormalLatencyOnTheNetwork(t *testing.T) {
	h := newHarness(t, Options{Seed: 5, Latency: ConstantLatency(time.Millisecond)})
	h.add("a", "b", "c")
	h.quiet()
	require.NoError(t, h.SetLinkLatency("a", "b", LognormalLatency(2*time.Millisecond, 40*time.Millisecond)))
	h.send("a", "b", 20_000)
	h.send("a", "c", 10)
	h.Run(time.Minute)

	pings := h.fake("b").gotKind(kindPing)
	require.Len(t, pings, 20_000, "nothing lost, however late")
	ds := make([]time.Duration, len(pings))
	for i, p := range pings {
		ds[i] = p.at.Sub(p.sent)
	}
	slices.Sort(ds)
	require.InEpsilon(t, float64(2*time.Millisecond), float64(Percentile(ds, 0.5)), 0.04)
	require.InEpsilon(t, float64(40*time.Millisecond), float64(Percentile(ds, 0.99)), 0.08)
	for _, p := range h.fake("c").got {
		require.Equal(t, time.Millisecond, p.at.Sub(p.sent))
	}
	for _, a := range h.fake("a").gotKind(kindAck) {
		if a.from == h.Addr("b") {
			// The way back keeps the constant default.
			require.GreaterOrEqual(t, a.at.Sub(a.sent), time.Millisecond)
		}
	}

	// As the default for every link.
	h.SetLatency(LognormalLatency(time.Millisecond, 10*time.Millisecond))
	h.ResetLinks()
	before := len(h.fake("c").got)
	h.send("a", "c", 5000)
	h.Run(time.Minute)
	ds = ds[:0]
	for _, p := range h.fake("c").got[before:] {
		ds = append(ds, p.at.Sub(p.sent))
	}
	slices.Sort(ds)
	require.InEpsilon(t, float64(time.Millisecond), float64(Percentile(ds, 0.5)), 0.06)
}
