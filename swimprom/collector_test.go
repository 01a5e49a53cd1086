package swimprom

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Bounds of the waits on real members over loopback with the local
// profile (as in the swim package's tests): generous, so that a loaded
// machine under -race does not flake; a healthy run takes a fraction.
const (
	formTimeout   = 10 * time.Second
	detectTimeout = 20 * time.Second
	pollEvery     = 20 * time.Millisecond
)

// member is a real member on 127.0.0.1 with its Collector.
type member struct {
	*swim.Memberlist
	col *Collector
	reg *prometheus.Registry
}

// startMember starts a member named name with a Collector as its
// Observer, attached and registered on a registry of its own; it shuts
// down at the end of the test.
func startMember(t *testing.T, name string) *member {
	t.Helper()
	cfg := swim.DefaultLocalConfig()
	cfg.Name = name
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	col := New(WithConstLabels(prometheus.Labels{"member": name}))
	cfg.Observer = col
	ml, err := swim.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ml.Shutdown()) })
	col.Attach(ml)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(col))
	return &member{Memberlist: ml, col: col, reg: reg}
}

// startCluster starts n members, joins them through the first and waits
// until each sees all.
func startCluster(t *testing.T, n int) []*member {
	t.Helper()
	ms := make([]*member, n)
	for i := range ms {
		ms[i] = startMember(t, fmt.Sprintf("node-%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	seed := ms[0].LocalMember().Addr.String()
	for _, m := range ms[1:] {
		_, err := m.Join(ctx, seed)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, m := range ms {
			if m.NumMembers() != n {
				return false
			}
		}
		return true
	}, formTimeout, pollEvery, "the cluster did not form")
	return ms
}

// sample is the value of the named metric's one sample whose labels
// include want (alongside the member label), from a gather of m's
// registry: a counter's or gauge's value, a histogram's sample count.
// ok is false when there is no such sample.
func (m *member) sample(t *testing.T, name string, want ...string) (v float64, ok bool) {
	t.Helper()
	mfs, err := m.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, s := range mf.GetMetric() {
			labels := make(map[string]string)
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if labels[want[i]] != want[i+1] {
					continue metrics
				}
			}
			switch {
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue(), true
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue(), true
			case s.GetHistogram() != nil:
				return float64(s.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// value is sample, failing the test when there is none.
func (m *member) value(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	v, ok := m.sample(t, name, want...)
	require.True(t, ok, "no sample of %s%v", name, want)
	return v
}

// TestCollectorOnRealMembers: on a cluster of real members the counters
// rise with the traffic, the gauges show the table, Ping adds a round
// trip, and a crash shows as a death in the table and a suspicion that
// ended in death, with no lint problem in any of it.
func TestCollectorOnRealMembers(t *testing.T) {
	ms := startCluster(t, 3)
	a := ms[0]

	// Traffic flows: every member probes, gossips and answers.
	require.Eventually(t, func() bool {
		return a.value(t, "swim_packets_sent_total") > 0 && a.value(t, "swim_packets_received_total") > 0 &&
			a.value(t, "swim_sent_bytes_total") > 0 && a.value(t, "swim_received_bytes_total") > 0
	}, formTimeout, pollEvery)
	require.Positive(t, ms[1].value(t, "swim_push_pulls_total"), "node-1 joined with a push-pull")
	before := a.value(t, "swim_packets_sent_total")
	require.Eventually(t, func() bool { return a.value(t, "swim_packets_sent_total") > before },
		formTimeout, pollEvery, "packets sent keep rising")
	require.Equal(t, 3.0, a.value(t, "swim_members", "state", "alive"))
	require.Zero(t, a.value(t, "swim_members", "state", "dead"))
	require.Zero(t, a.value(t, "swim_health_score"))
	_, ok := a.sample(t, "swim_streams_in_use", "direction", "inbound")
	require.True(t, ok)

	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	rtts := a.value(t, "swim_probe_rtt_seconds")
	_, err := a.Ping(ctx, "node-1")
	require.NoError(t, err)
	require.Greater(t, a.value(t, "swim_probe_rtt_seconds"), rtts, "an answered Ping is a round trip")

	// node-2 crashes: no leave, its sockets close.
	require.NoError(t, ms[2].Shutdown())
	require.Eventually(t, func() bool {
		return a.value(t, "swim_members", "state", "dead") == 1 &&
			a.value(t, "swim_suspicion_duration_seconds", "outcome", "dead") >= 1
	}, detectTimeout, pollEvery, "node-0 did not report node-2's death")
	require.Equal(t, 2.0, a.value(t, "swim_members", "state", "alive"))
	require.Zero(t, a.value(t, "swim_members", "state", "suspect"))

	problems, err := testutil.CollectAndLint(a.col)
	require.NoError(t, err)
	require.Empty(t, problems)
	// About 90 samples, whatever happened: the count depends on the
	// table only, not on the traffic.
	require.Equal(t, len(statSpecs)+4+1+2+1+2+1, testutil.CollectAndCount(a.col))
}

// TestCollectorDetached: before Attach only the histograms are collected,
// and they lint clean too.
func TestCollectorDetached(t *testing.T) {
	c := New()
	require.Equal(t, 4, testutil.CollectAndCount(c), "the RTT histogram, the suspicion histograms of both outcomes and the broadcast delay histogram")
	c.ObserveSuspicion(time.Second, true)
	require.Equal(t, 4, testutil.CollectAndCount(c))
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestObserverHistograms: each observation lands in its histogram and
// bucket, in seconds.
func TestObserverHistograms(t *testing.T) {
	c := New(WithNamespace("test"), WithRTTBuckets([]float64{0.001, 0.01}), WithSuspicionBuckets([]float64{1, 10}),
		WithBroadcastDelayBuckets([]float64{0.01, 0.1}))
	c.ObserveBroadcastDelay(20 * time.Millisecond)
	c.ObserveProbeRTT(500 * time.Microsecond)
	c.ObserveProbeRTT(5 * time.Millisecond)
	c.ObserveSuspicion(5*time.Second, false)
	c.ObserveSuspicion(200*time.Millisecond, true)
	c.ObserveSuspicion(700*time.Millisecond, true)
	want := `
# HELP test_broadcast_delay_seconds ` + helpOf(t, c, "test_broadcast_delay_seconds") + `
# TYPE test_broadcast_delay_seconds histogram
test_broadcast_delay_seconds_bucket{le="0.01"} 0
test_broadcast_delay_seconds_bucket{le="0.1"} 1
test_broadcast_delay_seconds_bucket{le="+Inf"} 1
test_broadcast_delay_seconds_sum 0.02
test_broadcast_delay_seconds_count 1
# HELP test_probe_rtt_seconds ` + helpOf(t, c, "test_probe_rtt_seconds") + `
# TYPE test_probe_rtt_seconds histogram
test_probe_rtt_seconds_bucket{le="0.001"} 1
test_probe_rtt_seconds_bucket{le="0.01"} 2
test_probe_rtt_seconds_bucket{le="+Inf"} 2
test_probe_rtt_seconds_sum 0.0055
test_probe_rtt_seconds_count 2
# HELP test_suspicion_duration_seconds ` + helpOf(t, c, "test_suspicion_duration_seconds") + `
# TYPE test_suspicion_duration_seconds histogram
test_suspicion_duration_seconds_bucket{outcome="dead",le="1"} 0
test_suspicion_duration_seconds_bucket{outcome="dead",le="10"} 1
test_suspicion_duration_seconds_bucket{outcome="dead",le="+Inf"} 1
test_suspicion_duration_seconds_sum{outcome="dead"} 5
test_suspicion_duration_seconds_count{outcome="dead"} 1
test_suspicion_duration_seconds_bucket{outcome="refuted",le="1"} 2
test_suspicion_duration_seconds_bucket{outcome="refuted",le="10"} 2
test_suspicion_duration_seconds_bucket{outcome="refuted",le="+Inf"} 2
test_suspicion_duration_seconds_sum{outcome="refuted"} 0.8999999999999999
test_suspicion_duration_seconds_count{outcome="refuted"} 2
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want)))
}

// helpOf is the help of the named metric as c describes it.
func helpOf(t *testing.T, c *Collector, name string) string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 200)
	c.Describe(ch)
	close(ch)
	re := regexp.MustCompile(`fqName: "([^"]*)", help: "((?:[^"\\]|\\.)*)"`)
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil && m[1] == name {
			return m[2]
		}
	}
	t.Fatalf("no metric %s", name)
	return ""
}

// TestObserverDoesNotAllocate: the calls the protocol makes cost no
// allocation.
func TestObserverDoesNotAllocate(t *testing.T) {
	var obs swim.Observer = New()
	allocs := testing.AllocsPerRun(1000, func() {
		obs.ObserveProbeRTT(time.Millisecond)
		obs.ObserveSuspicion(time.Second, false)
		obs.ObserveSuspicion(time.Second, true)
		obs.ObserveBroadcastDelay(time.Millisecond)
	})
	require.Zero(t, allocs)
}

// TestInvalidOptions: a bad option is reported when the Collector is
// registered, naming it.
func TestInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithRTTBuckets([]float64{0.1, 0.01}), "WithRTTBuckets: buckets must increase"},
		{WithSuspicionBuckets(nil), "WithSuspicionBuckets: no bucket"},
		{WithBroadcastDelayBuckets([]float64{1, 1}), "WithBroadcastDelayBuckets: buckets must increase"},
		{WithConstLabels(prometheus.Labels{"state": "x"}), `const label "state"`},
		{WithNamespace("not a name"), `WithNamespace("not a name"): not letters`},
	} {
		err := prometheus.NewRegistry().Register(New(tc.opt))
		require.ErrorContains(t, err, tc.want, tc.want)
	}
}

// TestRefutationInVirtualTime: a Machine driven in virtual time, with the
// Collector as its Observer, holds a peer suspect for 1.5 virtual seconds
// until the peer refutes; the refuted histogram gets that sample, though
// the test takes no time.
func TestRefutationInVirtualTime(t *testing.T) {
	col := New()
	cfg := swim.DefaultLANConfig()
	cfg.Name = "self"
	cfg.Observer = col
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	self := netip.MustParseAddrPort("10.0.0.1:7946")
	seed := netip.MustParseAddrPort("10.0.0.2:7946")
	peer := netip.MustParseAddrPort("10.0.0.3:7946")
	m, err := swim.NewMachine(cfg, self, rand.New(rand.NewPCG(1, 2)), start)
	require.NoError(t, err)

	// Join through a seed whose state lists the peer.
	ids := m.Join(start, []netip.AddrPort{seed})
	require.Len(t, ids, 1)
	reply, err := wire.AppendPacket(nil, &wire.PushPull{From: "seed", Members: []wire.MemberState{
		{Name: "seed", Addr: wire.EncodeAddr(seed), Incarnation: 1, State: uint8(swim.StateAlive)},
		{Name: "peer", Addr: wire.EncodeAddr(peer), Incarnation: 1, State: uint8(swim.StateAlive)},
	}})
	require.NoError(t, err)
	require.NoError(t, m.HandleStreamResponse(start, ids[0], reply, nil))
	require.Equal(t, 3, m.NumMembers())

	packet := func(msg wire.Message) []byte {
		f, err := wire.AppendFrame(nil, msg)
		require.NoError(t, err)
		return wire.AppendCompound(nil, [][]byte{f})
	}
	at := start.Add(time.Second)
	require.NoError(t, m.HandlePacket(at, seed, packet(&wire.Suspect{Name: "peer", Incarnation: 1, From: "seed"})))
	require.Equal(t, swim.MemberCounts{Alive: 2, Suspect: 1}, m.MemberCounts())
	at = at.Add(1500 * time.Millisecond)
	require.NoError(t, m.HandlePacket(at, peer, packet(&wire.Alive{Name: "peer", Addr: wire.EncodeAddr(peer), Incarnation: 2})))
	require.Equal(t, swim.MemberCounts{Alive: 3}, m.MemberCounts())

	want := `
# HELP swim_suspicion_duration_seconds ` + helpOf(t, col, "swim_suspicion_duration_seconds") + `
# TYPE swim_suspicion_duration_seconds histogram
swim_suspicion_duration_seconds_count{outcome="dead"} 0
swim_suspicion_duration_seconds_sum{outcome="dead"} 0
` + bucketLines("dead", 0, 0) + `
swim_suspicion_duration_seconds_count{outcome="refuted"} 1
swim_suspicion_duration_seconds_sum{outcome="refuted"} 1.5
` + bucketLines("refuted", 1.5, 1)
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(want), "swim_suspicion_duration_seconds"))
}

// bucketLines are the bucket lines of the default suspicion histogram of
// outcome holding n samples of v seconds.
func bucketLines(outcome string, v float64, n int) string {
	var b strings.Builder
	for _, le := range DefaultSuspicionBuckets {
		in := 0
		if v <= le {
			in = n
		}
		fmt.Fprintf(&b, "swim_suspicion_duration_seconds_bucket{outcome=%q,le=%q} %d\n", outcome, fmt.Sprint(le), in)
	}
	fmt.Fprintf(&b, "swim_suspicion_duration_seconds_bucket{outcome=%q,le=\"+Inf\"} %d\n", outcome, n)
	return b.String()
}

// TestDocsListEveryMetric: docs/metrics.md has a line for every metric.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	require.NoError(t, err)
	ch := make(chan *prometheus.Desc, 200)
	New().Describe(ch)
	close(ch)
	re := regexp.MustCompile(`fqName: "([^"]*)"`)
	n := 0
	for d := range ch {
		name := re.FindStringSubmatch(d.String())[1]
		listed := strings.Contains(string(doc), "| `"+name+"`") || strings.Contains(string(doc), "| `"+name+"{")
		require.True(t, listed, "docs/metrics.md has no row for %s", name)
		n++
	}
	require.Greater(t, n, 60)
}

// TestCoreDoesNotImportPrometheus: package swim reports through
// swim.Observer and never depends on Prometheus; only swimprom does.
func TestCoreDoesNotImportPrometheus(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the core's dependencies")
	}
	out, err := exec.Command(goCmd, "list", "-deps", "github.com/swim-go/swim").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "go.uber.org/zap", "the listing has the core's dependencies")
	for _, dep := range strings.Fields(string(out)) {
		require.NotContains(t, dep, "prometheus", "package swim depends on %s", dep)
	}
}
