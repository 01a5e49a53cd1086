// Package swimprom exposes a swim member to Prometheus: every counter of
// its Stats, gauges of its member table, health and streams, and
// histograms of probe round trips and of how long suspicions last, by
// outcome. Package swim itself does not depend on Prometheus: it reports
// its measurements through the swim.Observer interface, which a Collector
// implements.
//
// A Collector is wired in three steps: it is the member's Observer, so it
// must exist before swim.New; the Memberlist is attached once it exists;
// and the Collector is registered like any other:
//
//	col := swimprom.New(swimprom.WithConstLabels(prometheus.Labels{"member": cfg.Name}))
//	cfg.Observer = col // the histograms
//	ml, err := swim.New(cfg)
//	if err != nil { ... }
//	col.Attach(ml) // the counters and gauges
//	reg.MustRegister(col)
//
// and reg is served with promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
// (or prometheus.MustRegister(col) and promhttp.Handler()). One Collector
// serves one member; a process with several members gives each its own,
// told apart by a const label. Without Attach only the histograms are
// collected; without Config.Observer they stay empty.
//
// # Metrics
//
// With the default namespace every name starts with swim_. docs/metrics.md
// lists them all with their meaning and example queries; in short:
//
//   - One counter per counter of swim.MemberlistStats, the core's Stats
//     included, named after it in snake case with _total (PacketsSent is
//     swim_packets_sent_total, BytesSent swim_sent_bytes_total), except
//     the refusals of traffic (swim_traffic_refused_total) and of
//     streams (swim_streams_refused_total), one counter each with a
//     reason label. The help of each says what it counts.
//   - Gauges: swim_members{state="alive"|"suspect"|"dead"|"left"} (the
//     table, swim.Memberlist.MemberCounts), swim_health_score
//     (HealthScore), swim_streams_in_use{direction="inbound"|"outbound"}
//     (StreamsInUse), and the queues of Stats:
//     swim_delta_queue_length, swim_user_broadcast_queue_length and
//     swim_user_broadcast_queue_bytes.
//   - Histograms, in seconds: swim_probe_rtt_seconds,
//     swim_suspicion_duration_seconds{outcome="dead"|"refuted"}, how long
//     this member held a peer suspect before it was declared dead or
//     refuted the suspicion, and swim_broadcast_delay_seconds, how long
//     the broadcasts it delivered took from their origin.
//
// Durations are those of the clock driving the member: real time under
// swim.Memberlist, virtual time when a Machine is driven by a simulator,
// so a Collector set as the Observer of simulated Machines measures
// simulated time.
//
// # Cost
//
// The Observer methods run inside the protocol, with the member's state
// locked: each is one lock-free histogram update, with no allocation.
// Collect takes the member's read lock three times, briefly (Stats,
// MemberCounts, HealthScore; all O(1)), and builds about 90 samples.
package swimprom
