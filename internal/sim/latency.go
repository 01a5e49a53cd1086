package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// LatencyDist is the shape of a Latency distribution.
type LatencyDist uint8

const (
	// DistUniform (the zero value) draws uniformly from [Min, Max], or
	// gives the constant Min when Max <= Min.
	DistUniform LatencyDist = iota
	// DistLognormal draws exp(mu + sigma·Z), Z standard normal, with mu and
	// sigma chosen so that the median is P50 and the 99th percentile is
	// P99: mu = ln(P50), sigma = (ln(P99) - ln(P50)) / 2.3263 (2.3263 is
	// the 99th percentile of the standard normal). Min and Max, when
	// positive, clamp the draws.
	DistLognormal
)

func (d LatencyDist) String() string {
	switch d {
	case DistUniform:
		return "uniform"
	case DistLognormal:
		return "lognormal"
	}
	return fmt.Sprintf("LatencyDist(%d)", uint8(d))
}

// z99 is the 99th percentile of the standard normal distribution.
const z99 = 2.3263478740408408

// Latency is a one-way delay distribution. Every draw comes from the
// Cluster's seeded random source, so runs stay reproducible. The zero value
// is a delay of 0 (but Options.Latency treats it as "use DefaultLatency").
//
// Build one with ConstantLatency, UniformLatency or LognormalLatency; a
// literal Latency{Min: lo, Max: hi} is a uniform one, as it always was.
type Latency struct {
	// Min and Max bound the delay. For DistUniform the delay is uniform
	// in [Min, Max], or the constant Min when Max <= Min. For
	// DistLognormal, when positive, they clamp the draws: a draw below Min
	// is Min, one above Max is Max.
	Min, Max time.Duration
	// Dist is the shape of the distribution; the zero value is DistUniform.
	Dist LatencyDist
	// P50 and P99 are the median and the 99th percentile of a
	// DistLognormal delay. P50 <= 0 makes it the constant Min; P99 <= P50
	// makes it the constant P50 (clamped).
	P50, P99 time.Duration
}

// ConstantLatency delays every packet by d.
func ConstantLatency(d time.Duration) Latency { return Latency{Min: d, Max: d} }

// UniformLatency delays each packet by a uniform draw from [lo, hi]. Packets
// on one link can therefore overtake each other, as UDP datagrams do.
func UniformLatency(lo, hi time.Duration) Latency { return Latency{Min: lo, Max: hi} }

// LognormalLatency delays each packet by a lognormal draw with median p50
// and 99th percentile p99, the usual shape of network delay: most packets
// are fast, a heavy tail is slow. It is not capped: with p50 1ms and p99
// 50ms, one packet in 10,000 takes over 0.5s and one in a million over
// 2.8s. Set Max on the result to cap it.
func LognormalLatency(p50, p99 time.Duration) Latency {
	return Latency{Dist: DistLognormal, P50: p50, P99: p99}
}

// DefaultLatency is used when Options.Latency is zero: a LAN with an RTT of
// one to three milliseconds.
var DefaultLatency = UniformLatency(500*time.Microsecond, 1500*time.Microsecond)

// Sample draws one delay from rng. The Cluster draws from its own source;
// Sample is for tools and tests that want to look at the distribution.
func (l Latency) Sample(rng *rand.Rand) time.Duration {
	m := l.model()
	return time.Duration(m.sample(rng))
}

// Quantile is the delay below which a fraction q of the draws fall, for q
// in (0, 1); q <= 0 gives the smallest possible draw and q >= 1 the
// largest (for an uncapped lognormal, a bound of about 73 years).
func (l Latency) Quantile(q float64) time.Duration {
	m := l.model()
	switch m.dist {
	case DistLognormal:
		var v float64
		switch {
		case q <= 0:
			v = 0
		case q >= 1:
			v = math.Inf(1)
		default:
			v = math.Exp(m.mu + m.sigma*math.Sqrt2*math.Erfinv(2*q-1))
		}
		return time.Duration(m.clamp(v))
	default:
		q = min(max(q, 0), 1)
		return time.Duration(m.lo + int64(q*float64(m.hi-m.lo)))
	}
}

func (l Latency) String() string {
	switch l.Dist {
	case DistLognormal:
		s := fmt.Sprintf("lognormal(p50 %v, p99 %v)", l.P50, l.P99)
		if l.Min > 0 || l.Max > 0 {
			s += fmt.Sprintf(" clamped to [%v, %v]", max(l.Min, 0), l.Max)
		}
		return s
	default:
		if l.Max <= l.Min {
			return fmt.Sprintf("constant(%v)", max(l.Min, 0))
		}
		return fmt.Sprintf("uniform(%v, %v)", max(l.Min, 0), l.Max)
	}
}

// latencyModel is a Latency with its parameters worked out once, as the
// network keeps it: sampling is a few operations, with no logarithm.
type latencyModel struct {
	dist      LatencyDist
	lo, hi    int64 // uniform: the range; lognormal: clamps (hi 0: none)
	mu, sigma float64
}

func (l Latency) model() latencyModel {
	m := latencyModel{dist: l.Dist, lo: max(int64(l.Min), 0), hi: int64(l.Max)}
	switch l.Dist {
	case DistLognormal:
		if l.P50 <= 0 {
			// Degenerate: the constant Min.
			return latencyModel{lo: m.lo, hi: m.lo}
		}
		m.mu = math.Log(float64(l.P50))
		if l.P99 > l.P50 {
			m.sigma = (math.Log(float64(l.P99)) - m.mu) / z99
		}
		if m.hi > 0 && m.hi < m.lo {
			m.hi = m.lo
		}
	default:
		m.dist = DistUniform
		if m.hi < m.lo {
			m.hi = m.lo
		}
	}
	return m
}

// sample draws one delay in nanoseconds. A uniform draw consumes one
// number from rng unless the range is empty; a lognormal one consumes a
// normal variate unless sigma is 0.
func (m *latencyModel) sample(rng *rand.Rand) int64 {
	if m.dist == DistLognormal {
		v := math.Exp(m.mu)
		if m.sigma > 0 {
			v = math.Exp(m.mu + m.sigma*rng.NormFloat64())
		}
		return m.clamp(v)
	}
	if m.hi <= m.lo {
		return m.lo
	}
	return m.lo + rng.Int64N(m.hi-m.lo+1)
}

// clamp turns a lognormal draw in nanoseconds into a delay within the
// model's bounds.
func (m *latencyModel) clamp(v float64) int64 {
	const maxDelay = float64(math.MaxInt64 / 4) // no overflow of now+delay
	var d int64
	if v >= maxDelay || math.IsNaN(v) {
		d = int64(maxDelay)
	} else {
		d = int64(v)
	}
	if d < m.lo {
		d = m.lo
	}
	if m.hi > 0 && d > m.hi {
		d = m.hi
	}
	return d
}

// isZero reports whether the model always gives 0 without a draw.
func (m *latencyModel) isZero() bool { return m.dist == DistUniform && m.hi <= 0 }
