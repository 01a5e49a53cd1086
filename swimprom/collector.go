package swimprom

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/swim-go/swim"
)

// DefaultNamespace prefixes every metric's name unless WithNamespace says
// otherwise.
const DefaultNamespace = "swim"

// DefaultRTTBuckets are the probe round-trip histogram's buckets, in
// seconds: from 100 µs (one host) to 2.5 s (past the WAN profile's probe
// timeout, after which there is no answer to time).
var DefaultRTTBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
}

// DefaultSuspicionBuckets are the suspicion histogram's buckets, in
// seconds. Refuted suspicions mostly end within a round trip or a few
// gossip rounds, hence the fine low end; suspicions that end in death
// last about PauseTolerance plus the final check (5 s on a LAN, 2 s
// locally, 15 s on a WAN) when accusations confirm each other, and up to
// SuspicionMaxTimeoutMult times that when they do not, hence the steps
// around those values.
var DefaultSuspicionBuckets = []float64{
	0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 2.5, 3, 4, 5, 5.5, 6, 7, 8, 10, 12.5, 15, 17.5, 20, 30, 45, 60, 90, 120,
}

// DefaultBroadcastDelayBuckets are the broadcast delay histogram's
// buckets, in seconds: a broadcast on the trees reaches a member in a few
// hops of a flush interval (5 ms) each, one that needed a graft in a
// Broadcasts.GraftTimeout or more, and one by gossip in gossip rounds (200 ms on
// a LAN).
var DefaultBroadcastDelayBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// Option configures a Collector.
type Option func(*options)

type options struct {
	namespace   string
	constLabels prometheus.Labels
	rtt         []float64
	suspicion   []float64
	bcastDelay  []float64
	err         error
}

// WithNamespace replaces the "swim" prefix of every metric name; "" leaves
// the names unprefixed (probes_total, ...). A namespace is letters, digits
// and underscores, not starting with a digit, so that the names stay
// valid for every Prometheus release and query.
func WithNamespace(ns string) Option {
	return func(o *options) {
		if ns != "" && !namespaceRE.MatchString(ns) {
			o.fail(fmt.Errorf("swimprom: WithNamespace(%q): not letters, digits and underscores, starting with a letter or underscore", ns))
			return
		}
		o.namespace = ns
	}
}

var namespaceRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// WithConstLabels adds labels with fixed values to every metric, as a
// process with several members needs to tell their metrics apart (say
// {"member": cfg.Name}). The labels state, outcome, direction and reason
// are taken by the Collector's own metrics.
func WithConstLabels(l prometheus.Labels) Option {
	return func(o *options) {
		o.constLabels = make(prometheus.Labels, len(l))
		for k, v := range l {
			switch k {
			case "state", "outcome", "direction", "reason":
				o.fail(fmt.Errorf("swimprom: const label %q is a label of the Collector's own metrics", k))
			}
			o.constLabels[k] = v
		}
	}
}

// WithRTTBuckets replaces DefaultRTTBuckets: upper bounds in seconds,
// increasing.
func WithRTTBuckets(b []float64) Option {
	return func(o *options) { o.rtt = o.buckets("WithRTTBuckets", b) }
}

// WithSuspicionBuckets replaces DefaultSuspicionBuckets: upper bounds in
// seconds, increasing.
func WithSuspicionBuckets(b []float64) Option {
	return func(o *options) { o.suspicion = o.buckets("WithSuspicionBuckets", b) }
}

// WithBroadcastDelayBuckets replaces DefaultBroadcastDelayBuckets: upper
// bounds in seconds, increasing.
func WithBroadcastDelayBuckets(b []float64) Option {
	return func(o *options) { o.bcastDelay = o.buckets("WithBroadcastDelayBuckets", b) }
}

// buckets checks b, returning a copy, or nil (the default) and the error.
func (o *options) buckets(opt string, b []float64) []float64 {
	if len(b) == 0 {
		o.fail(fmt.Errorf("swimprom: %s: no bucket", opt))
		return nil
	}
	for i := 1; i < len(b); i++ {
		if !(b[i] > b[i-1]) {
			o.fail(fmt.Errorf("swimprom: %s: buckets must increase, %v follows %v", opt, b[i], b[i-1]))
			return nil
		}
	}
	return slices.Clone(b)
}

func (o *options) fail(err error) { o.err = errors.Join(o.err, err) }

// Collector exposes one member's counters, gauges and histograms to
// Prometheus; see the package doc for the metrics and how to wire it. It is
// a prometheus.Collector and a swim.Observer. All its methods are safe for
// concurrent use.
type Collector struct {
	ml  atomic.Pointer[swim.Memberlist]
	err error // an invalid option, reported by Describe

	stats      []statMetric
	statDescs  []*prometheus.Desc // each metric of stats once
	members    *prometheus.Desc
	health     *prometheus.Desc
	streams    *prometheus.Desc
	rtt        prometheus.Histogram
	suspicion  *prometheus.HistogramVec
	suspDead   prometheus.Observer
	suspRefute prometheus.Observer
	bcastDelay prometheus.Histogram
}

// statMetric is a field of MemberlistStats with the Desc of its metric.
type statMetric struct {
	statField
	desc   *prometheus.Desc
	labels []string // the reason label's value, if any
}

// New returns a Collector with no member attached. Set it as
// Config.Observer before swim.New for the histograms, Attach the
// Memberlist for the counters and gauges, and register it. An invalid
// option (a bad bucket list, a const label the Collector's metrics use) is
// reported when the Collector is registered; prometheus's own checks of
// names and labels are reported the same way.
func New(opts ...Option) *Collector {
	o := options{namespace: DefaultNamespace}
	for _, opt := range opts {
		opt(&o)
	}
	if o.rtt == nil {
		o.rtt = DefaultRTTBuckets
	}
	if o.suspicion == nil {
		o.suspicion = DefaultSuspicionBuckets
	}
	if o.bcastDelay == nil {
		o.bcastDelay = DefaultBroadcastDelayBuckets
	}
	c := &Collector{err: o.err}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(o.namespace, "", name), help, labels, o.constLabels)
	}

	byName := make(map[string]*prometheus.Desc)
	for _, f := range statFields {
		d := byName[f.name]
		if d == nil {
			var labels []string
			if f.reason != "" {
				labels = []string{"reason"}
			}
			d = desc(f.name, f.help, labels...)
			byName[f.name] = d
			c.statDescs = append(c.statDescs, d)
		}
		sm := statMetric{statField: f, desc: d}
		if f.reason != "" {
			sm.labels = []string{f.reason}
		}
		c.stats = append(c.stats, sm)
	}
	c.members = desc("members", "Members in this member's table by state: alive and suspect (the live members, this one among them while it has not left), dead and left (gone, still remembered for GossipToDeadTime; this one among the left once it left).", "state")
	c.health = desc("health_score", "This member's local health (Lifeguard): 0 when it hears from its peers as expected, up to AwarenessMaxMultiplier-1 when it keeps failing to, when it probes more slowly and accuses no one in haste.")
	c.streams = desc("streams_in_use", "TCP exchanges in flight, each holding one of MaxConcurrentStreams slots of its direction: inbound (opened by peers) or outbound (this member's joins, push-pulls, TCP pings and reliable messages).", "direction")

	c.rtt = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace:   o.namespace,
		Name:        "probe_rtt_seconds",
		Help:        "Round trips to peers, from a ping this member sent to the ack that came straight back: direct probes (with paired probing, only the fallback probes of partners not heard in time), pings sent for other members' ping-reqs, and Memberlist.Ping. Needs the Collector as Config.Observer.",
		ConstLabels: o.constLabels,
		Buckets:     o.rtt,
	})
	c.suspicion = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace:   o.namespace,
		Name:        "suspicion_duration_seconds",
		Help:        "How long this member held a peer suspect, by how the suspicion ended: outcome dead (declared dead, by this member or by another's gossip) or refuted (the peer announced itself alive at a newer incarnation). Needs the Collector as Config.Observer.",
		ConstLabels: o.constLabels,
		Buckets:     o.suspicion,
	}, []string{"outcome"})
	c.suspDead = c.suspicion.WithLabelValues("dead")
	c.suspRefute = c.suspicion.WithLabelValues("refuted")
	c.bcastDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace:   o.namespace,
		Name:        "broadcast_delay_seconds",
		Help:        "Delay of the application broadcasts this member delivered, from the moment their origin sent them (on its clock) to the delivery (on this member's): as accurate as the members' clocks agree. Needs the Collector as Config.Observer.",
		ConstLabels: o.constLabels,
		Buckets:     o.bcastDelay,
	})
	return c
}

// Attach makes the Collector report ml's counters and gauges. Until it is
// called, only the histograms are collected. Attaching another
// Memberlist (a member restarted in the same process) replaces the
// first; the histograms keep what they observed.
func (c *Collector) Attach(ml *swim.Memberlist) { c.ml.Store(ml) }

// ObserveProbeRTT implements swim.Observer: it adds a sample to the
// probe_rtt_seconds histogram, without allocating.
func (c *Collector) ObserveProbeRTT(rtt time.Duration) { c.rtt.Observe(rtt.Seconds()) }

// ObserveSuspicion implements swim.Observer: it adds a sample to the
// suspicion_duration_seconds histogram of its outcome, without
// allocating.
func (c *Collector) ObserveSuspicion(held time.Duration, refuted bool) {
	if refuted {
		c.suspRefute.Observe(held.Seconds())
		return
	}
	c.suspDead.Observe(held.Seconds())
}

// ObserveBroadcastDelay implements swim.Observer: it adds a sample to the
// broadcast_delay_seconds histogram, without allocating.
func (c *Collector) ObserveBroadcastDelay(d time.Duration) { c.bcastDelay.Observe(d.Seconds()) }

var _ swim.Observer = (*Collector)(nil)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.err != nil {
		ch <- prometheus.NewInvalidDesc(c.err)
	}
	for _, d := range c.statDescs {
		ch <- d
	}
	ch <- c.members
	ch <- c.health
	ch <- c.streams
	c.rtt.Describe(ch)
	c.suspicion.Describe(ch)
	c.bcastDelay.Describe(ch)
}

// Collect implements prometheus.Collector. It reads the attached member's
// Stats, MemberCounts, HealthScore and StreamsInUse, each waiting at most
// for the input the member is handling; it never waits for the network.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if ml := c.ml.Load(); ml != nil {
		c.collectStats(ch, ml.Stats())
		n := ml.MemberCounts()
		for _, s := range []struct {
			state string
			n     int
		}{{"alive", n.Alive}, {"suspect", n.Suspect}, {"dead", n.Dead}, {"left", n.Left}} {
			ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(s.n), s.state)
		}
		ch <- prometheus.MustNewConstMetric(c.health, prometheus.GaugeValue, float64(ml.HealthScore()))
		in, out := ml.StreamsInUse()
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(in), "inbound")
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(out), "outbound")
	}
	c.rtt.Collect(ch)
	c.suspicion.Collect(ch)
	c.bcastDelay.Collect(ch)
}

// collectStats sends a metric for every field of st.
func (c *Collector) collectStats(ch chan<- prometheus.Metric, st swim.MemberlistStats) {
	v := reflect.ValueOf(&st).Elem()
	for _, s := range c.stats {
		f := v.FieldByIndex(s.index)
		if s.counter {
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(f.Uint()), s.labels...)
		} else {
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(f.Int()), s.labels...)
		}
	}
}
