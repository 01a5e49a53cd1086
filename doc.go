// Package swim is cluster membership and failure detection for Go services,
// with no central server: SWIM (Das, Gupta and Motivala, DSN 2002) with its
// suspicion sub-protocol, the local-health improvements of Lifeguard
// (Dadgar et al., 2018) and two ideas of Apache Geode's health monitor (any
// traffic is a heartbeat; a final check before a member is removed).
//
// Most users fill a Config (from DefaultLANConfig, DefaultWANConfig or
// DefaultLocalConfig), call New, Join a few seeds, and react to Events;
// Example_quickStart runs three members in one process. The repository's
// docs/ directory has the configuration guide (tuning.md), the protocol in
// full (protocol.md), the measured figures (figures.md) and the threat
// model (security.md).
//
// # Layers
//
// Four layers, each in files of its own:
//
//   - Core: Machine, the protocol of one member as a pure state machine
//     (machine.go, lifecycle.go, probe.go, suspicion.go, incarnation.go,
//     pushpull.go, broadcast.go, table.go, ring.go, health.go, timers.go,
//     deadlist.go; the applications' messages and broadcasts in
//     usermsg.go, pings and round trips in ping.go, admission and name
//     conflicts in admission.go, the partition alarm in partition.go, the
//     asks for members gossip missed in holes.go, the Observer's
//     measurements and the counts by state in observer.go), and the types
//     it reports in (member.go: State, Member, Event). It
//     does no I/O, reads no clock, starts no goroutine and draws
//     randomness only from the *rand.Rand it is given; every input
//     carries now, and every output (packets, stream exchanges, events,
//     the next deadline) is data. Every pending timeout is an entry in
//     one queue (timers.go), so NextDeadline is the head of that queue.
//     TestCoreIsPure checks this on the source.
//   - Runtime: Memberlist drives one Machine with real time (memberlist.go,
//     loop.go, stream.go, streamlimits.go, events.go, queue.go, join.go,
//     messaging.go for the applications' data), seals and opens traffic (security.go,
//     keyring.go), logs refused traffic at a bounded rate (ratelog.go), and
//     runs callbacks on a goroutine of their own. The simulator in internal/sim drives
//     thousands of Machines in virtual time instead.
//   - Transport: Transport and NetTransport, UDP packets and TCP streams
//     on one port (transport.go).
//   - Wire: internal/wire, the messages and their msgpack encoding, written
//     by hand so that every length a peer sends is bounded before anything
//     is allocated, and the envelope (cluster label, AES-GCM seal).
//
// Config (config.go) configures the core and the runtime alike.
//
// # How it maps to the papers
//
//   - SWIM §3.1, failure detection: each protocol period a member pings one
//     other; without an ack within ProbeTimeout it asks IndirectChecks
//     others to ping the target and relay the ack (probe.go).
//   - SWIM §4.1, dissemination: membership deltas ride on every ping,
//     ping-req, ack and nack, fewest-sent first, each sent
//     RetransmitMult·max(2, ceil(log10(N+1))) times (broadcast.go), and are
//     also gossiped to GossipNodes members every GossipInterval.
//     Applications' broadcasts spread the same way, each member relaying
//     what it delivers (usermsg.go); they share every packet with
//     membership deltas by a fair budget, each kind sure of half.
//   - SWIM §4.2, suspicion and incarnations: a failed probe makes its
//     target suspect, not dead; only a member raises its own incarnation,
//     to refute (suspicion.go, incarnation.go).
//   - SWIM §4.3, round-robin target selection, used when AlignedProbing is
//     off (probe.go).
//   - Lifeguard §IV-A, local health: a score that rises on failed probes,
//     missing nacks and refutations of oneself scales a member's probe
//     interval and timeout (health.go); relays answer a silent target with
//     a nack.
//   - Lifeguard §IV-B, dynamic suspicion: the timeout falls from Max toward
//     Min as independent confirmations arrive (suspicion.go).
//   - Lifeguard §IV-C, buddy system: a ping to a suspect carries the
//     suspicion, so it can refute at once, and the accuser sends it one
//     such ping as it accuses it (machine.go, probe.go).
//   - Geode: any packet from a member is a heartbeat, and a suspect gets a
//     final check over UDP and TCP before it is declared dead.
//   - hashicorp/memberlist: push-pull anti-entropy over TCP, join as a
//     push-pull with each seed, and a TCP ping beside the indirect probes
//     (pushpull.go, lifecycle.go, probe.go).
//
// # Where it departs from the papers
//
// Each with its reason; docs/protocol.md has the full list and the
// measurements behind it.
//
//   - Aligned probing replaces SWIM §4.3's randomized round-robin: probe
//     rounds are numbered from the clock on a ring all members share, so
//     every member is probed once per round and a crash is probed within
//     one ProbeInterval instead of after several.
//   - Paired probing halves its packets: each round the ring is split into
//     pairs whose members send each other one Heartbeat at their own
//     phases instead of a ping and an ack each; a partner not heard from
//     in time is probed as from its phase, so detection is unchanged.
//   - The suspicion timeout is PauseTolerance, anchored at the start of the
//     failed probe and carried with the suspicion, so that all members
//     decide together and a pause shorter than the tolerance never kills.
//   - No accusation without a word from the relays: a failed probe whose
//     ping-req relays all stayed silent, not even a nack, accuses no one
//     (beyond Lifeguard §IV-A, which only raises the health score).
//   - A member that wakes late (a timer handled more than ProbeTimeout/5
//     after it was due) does not accuse: its own silence is the likelier
//     cause.
//   - The final check (Geode) pings twice over UDP and once over TCP, and
//     overlaps the end of the suspicion window.
//   - A leave reported by anyone is checked with the member, by a ping
//     carrying the claim, before it counts: a forged leave would otherwise
//     remove a member at once.
//   - Forgotten members are remembered by tombstones of their last
//     incarnation, so that replayed or late news of them changes nothing,
//     and a reconnect tells its target it was declared dead.
//   - Strangers get a bare ack no larger than their ping, ping-reqs are
//     served for live members only and at a bounded rate, and acks count
//     only from the address asked: no amplification, no forged liveness.
//   - Incarnations saturate, and a jump of more than MaxIncarnationJump is
//     dropped: no single packet can leave a member unable to refute.
//   - Push-pull merges a peer's "dead" as suspect (as memberlist does), and
//     merges large views a slice per Tick.
//   - Reconnect attempts to dead members are made with probability
//     8·dead/live (after Serf), so a crash costs a large cluster about 8
//     full-state exchanges per ReconnectInterval, not one per member.
//   - Every member announces the protocol versions it speaks (and its
//     application's) with its alive; message kinds and fields of a newer
//     protocol are skipped and counted, and a wire feature is used toward
//     a peer only once it announced it, so two adjacent releases share a
//     cluster during a rolling upgrade (docs/upgrades.md).
package swim
