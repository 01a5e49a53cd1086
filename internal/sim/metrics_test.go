package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/wire"
)

func TestSummarizeAndPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 10; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	s := Summarize(ds)
	require.Equal(t, DurationStats{N: 10, Min: time.Second, P50: 5 * time.Second, P90: 9 * time.Second,
		P99: 10 * time.Second, Max: 10 * time.Second, Mean: 5500 * time.Millisecond}, s)
	require.Equal(t, 10*time.Second, ds[0], "the input is not sorted in place")
	require.Equal(t, DurationStats{}, Summarize(nil))
	require.Equal(t, "n=0", Summarize(nil).String())
	require.Equal(t, time.Duration(0), Percentile(nil, 0.5))
}

// A crash is timed from the crash to the first suspicion, the first death
// and the last survivor to learn; its restart under the same name is not a
// false anything, even when the restart comes before anyone noticed.
func TestMetricsTimeACrashAndIgnoreThePreviousLife(t *testing.T) {
	s := convergedScenario(t, 201, 16, lanConfig)
	m := NewMetrics(s.Cluster)
	require.NoError(t, s.Crash("m5"))
	require.True(t, s.RunUntil(func() bool { return m.Failures()[0].AllKnew }, time.Minute), "%v", s)
	f := m.Failures()[0]
	t.Logf("%+v", f)
	require.Equal(t, "m5", f.Member)
	require.Equal(t, 15, f.Observers)
	require.Equal(t, 15, f.Learned)
	require.True(t, f.Suspected && f.Declared && !f.Restarted)
	require.Positive(t, f.FirstSuspect)
	require.LessOrEqual(t, f.FirstSuspect, f.FirstDead)
	require.LessOrEqual(t, f.FirstDead, f.AllKnow)
	cfg := swim.DefaultLANConfig()
	require.LessOrEqual(t, f.AllKnow, cfg.PauseTolerance+6*cfg.ProbeInterval)
	require.Equal(t, s.Now().Sub(f.At), f.AllKnow, "the run stopped when the last one learned")

	// Back under the same name.
	require.NoError(t, s.Restart("m5"))
	s.join("m5", s.Addr("m0"))
	_, ok := s.RunUntilAgree(time.Minute)
	require.True(t, ok, "%v", s)

	// Restarted before anyone declared it dead: the failure ends
	// unfinished, and what is said about the previous life is not false.
	require.NoError(t, s.Crash("m6"))
	s.Run(1500 * time.Millisecond)
	require.NoError(t, s.Restart("m6"))
	s.join("m6", s.Addr("m0"))
	_, ok = s.RunUntilAgree(time.Minute)
	require.True(t, ok, "%v", s)
	s.Run(30 * time.Second)
	d := m.Detection()
	require.Equal(t, 2, d.Crashes)
	require.Equal(t, 1, d.AllKnew)
	require.Equal(t, 1, d.Restarted)
	require.True(t, m.Failures()[1].Restarted)
	require.Zero(t, m.FalseDeaths())
	require.Zero(t, m.FalseSuspicions())
	require.Zero(t, m.FalseSuspicionEvents())
	t.Logf("%v", m.Report())
}

// Anything said of a member that is running is false, paused or not: a
// pause beyond PauseTolerance is a false death, reported by everyone,
// counted once.
func TestMetricsCountFalseDeathsOfARunningMember(t *testing.T) {
	s := convergedScenario(t, 202, 12, lanConfig)
	m := NewMetrics(s.Cluster)
	require.NoError(t, s.Pause("m3", 2*swim.DefaultLANConfig().PauseTolerance))
	s.Run(time.Minute)
	require.Equal(t, 1, m.FalseDeaths())
	require.Equal(t, uint64(11), m.FalseDeathEvents())
	require.Equal(t, []string{"m3"}, m.FalselyDead())
	require.NotZero(t, m.FalseSuspicions())
	require.Empty(t, m.Failures())
	r := m.Report()
	require.InDelta(t, 12.0/60, r.MemberHours, 1e-9)
	require.InDelta(t, 1/r.MemberHours, r.FalseDeathsPerMemberHour, 1e-9)

	// A graceful leave followed by the process exiting is no failure.
	require.NoError(t, s.DoMachine("m4", func(mc *swim.Machine, now time.Time) { require.NoError(t, mc.Leave(now)) }))
	s.Run(time.Second)
	require.NoError(t, s.Crash("m4"))
	s.Run(10 * time.Second)
	require.Empty(t, m.Failures())
	require.Equal(t, 1, m.FalseDeaths())
}

func TestMetricsTrafficAndStop(t *testing.T) {
	s := convergedScenario(t, 203, 10, lanConfig)
	before := s.Counters()
	m := NewMetrics(s.Cluster)
	s.Run(time.Minute)
	require.NoError(t, s.Crash("m9"))
	s.Run(time.Minute)
	tr := m.Traffic()
	after := s.Counters()
	require.Equal(t, after.PacketsSent-before.PacketsSent, tr.PacketsSent)
	require.Equal(t, after.BytesSent-before.BytesSent, tr.BytesSent)
	require.Equal(t, 2*time.Minute, tr.Window)
	memberSeconds := 10.0*60 + 9*60
	require.InDelta(t, memberSeconds/3600, m.MemberHours(), 1e-9)
	require.InDelta(t, float64(tr.PacketsSent)/memberSeconds, tr.PacketsPerMemberSecond, 1e-9)
	require.NotEmpty(t, tr.Busiest)
	t.Logf("%.2f packets, %.0f bytes per member-second; busiest %s at %.0f B/s", tr.PacketsPerMemberSecond, tr.BytesPerMemberSecond, tr.Busiest, tr.BusiestBytesPerSecond)
	require.Zero(t, m.DeltasDropped())

	m.Stop()
	frozen := m.Report()
	s.Run(time.Minute)
	require.NoError(t, s.Crash("m8"))
	s.Run(time.Minute)
	require.Equal(t, frozen, m.Report(), "nothing is measured after Stop")
	require.Len(t, m.Failures(), 1)
}

func TestViewsAgree(t *testing.T) {
	s := newScenario(t, 204, 12, lanConfig, false)
	require.False(t, s.ViewsAgree(), "nobody has joined")
	for _, name := range s.names[1:] {
		s.join(name, s.Addr("m0"))
	}
	took, ok := s.RunUntilAgree(time.Minute)
	require.True(t, ok)
	require.Equal(t, s.converged(), s.ViewsAgree())
	t.Logf("12 members agree %v after joining", took)
	require.True(t, s.ViewsAgree(), "checked again from the cache")

	require.NoError(t, s.Crash("m4"))
	require.False(t, s.ViewsAgree(), "everyone still sees the crashed member")
	took, ok = s.RunUntilAgree(time.Minute)
	require.True(t, ok)
	t.Logf("agree again %v after a crash", took)

	// A change in one view that keeps the counts is noticed: m2 sees m3
	// suspect.
	inc := s.machine("m3").LocalMember().Incarnation
	s.blockAll("m2", true)
	s.inject("m2", "m1", &wire.Suspect{Name: "m3", Incarnation: inc, From: "m1"})
	got, _ := s.view("m2", "m3")
	require.Equal(t, swim.StateSuspect, got.State)
	require.False(t, s.ViewsAgree())
	s.Heal()

	// A member that left is no longer expected in anyone's view.
	require.NoError(t, s.DoMachine("m7", func(mc *swim.Machine, now time.Time) { require.NoError(t, mc.Leave(now)) }))
	_, ok = s.RunUntilAgree(time.Minute)
	require.True(t, ok)
	require.True(t, s.Node("m7").Up())

	h := newHarness(t, Options{Seed: 1})
	h.add("a")
	require.False(t, h.ViewsAgree(), "fakes have no view")
}
