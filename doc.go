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
// The package's files fall in three layers, told apart by their names; the
// tests in layers_test.go derive each file's layer from the code (what the
// Machine's methods alone use is core, what the Memberlist's alone use is
// runtime) and hold the line between them: no file mixes the two, nothing
// outside the core uses an unexported name of the core, and nothing the
// core reaches does I/O, reads the clock, starts a goroutine, takes a lock
// or draws from a global random source. TestDocLayerMap checks this list
// against them.
//
//   - Core: Machine, the protocol of one member as a pure state machine, in
//     files named for what they hold: machine.go (the Machine, its inputs and
//     outputs), lifecycle.go (join, leave, metadata), probe.go (probes,
//     ping-req, acks and nacks), ring.go (the probe ring), pairing.go (paired
//     probing), suspicion.go (suspicion timers), incarnation.go (precedence,
//     refutation), gates.go (the gates of a claim: the ordered checks a
//     membership delta passes before it takes effect), tombstone.go (what the
//     dead leave behind), deadlist.go (the dead still held), table.go (the
//     member table), memberchange.go (the fan-out of a member's change to the
//     mechanisms that follow the table), addrcheck.go (address checks: the
//     pings an address must answer for a member), moves.go (checking a
//     member's new address), lives.go (a member's process runs: restarts and
//     name conflicts), signatures.go (signed claims: who may say what about
//     whom, asked of internal/claims), witness.go (ping-req helpers that
//     saw a suspect's silence accuse it too), repeats.go (accusers whose
//     accusations were refuted wait), newcomers.go (checking a
//     member not known before it is admitted), registry.go (member identities, shared by
//     Machines), broadcast.go (the piggyback queues, fewest-sent first, the
//     packer that shares a packet's room between membership deltas and
//     applications' broadcasts, and periodic gossip), joinstorm.go (pacing
//     news in a join storm), repair.go (gossip's gaps: asks for missed
//     members, view digests), pushpull.go (anti-entropy and join exchanges),
//     health.go (local health), timers.go (the one timer queue), admission.go
//     (the application's say over who joins), partition.go (the partition
//     alarm), usermsg.go (the applications' messages and broadcasts), tree.go
//     (the adapter of the broadcast trees of internal/plumtree: the member
//     table, packets and timers), userping.go (the applications' pings and
//     round trips), status.go (what a driver reads between inputs), stats.go
//     (the counters, grouped by mechanism) and observer.go (measurements for
//     metrics). Every input carries now; every output (packets, stream
//     exchanges, events, the next deadline) is data; NextDeadline is the head
//     of the timer queue.
//   - Runtime: Memberlist drives one Machine with real time, in the files
//     prefixed memberlist: memberlist.go (New, the API, Shutdown),
//     memberlist_loop.go (the loop that feeds the Machine),
//     memberlist_stream.go and memberlist_streamlimits.go (streams and
//     their limits), memberlist_events.go (callbacks on a goroutine of
//     their own), memberlist_messaging.go (the applications' data),
//     memberlist_security.go and memberlist_keyring.go (sealing and
//     opening traffic, key rotation) and memberlist_seeds.go (seed
//     addresses and names). Two helpers of its own are packages apart,
//     since they need nothing of it: internal/fifo (its queues) and
//     internal/ratelog (refusals logged at a bounded rate).
//   - Shared: what both use, the public types: config.go (Config),
//     member.go (Member, State, Event) and transport.go (Transport, and
//     NetTransport, UDP packets and TCP streams on one port).
//
// The Machine drives the protocols of their own as pure packages, the way
// Memberlist drives the Machine: internal/plumtree, the epidemic broadcast
// trees (eager pushes, announcements, grafts and prunes) and the receive
// rule of broadcasts, fed the member table and calls carrying now, and
// answering with frames per neighbor, the timers to arm and its counters;
// internal/claims, signed claims (claim encoding, signatures, the keys
// names are bound to and the proofs held, the accusers' bounds,
// certificates), asked at the gates of each claim. The public package
// certificate issues and checks member certificates for operators.
//
// Beside the package: internal/wire, the messages and their msgpack
// encoding, written by hand so that every length a peer sends is bounded
// before anything is allocated, and the envelope (cluster label, AES-GCM
// seal); internal/sim, the simulator that drives thousands of Machines in
// virtual time through their exported API; internal/scale, internal/chaos
// and internal/compare, the scale runs, the chaos suite on real processes
// and the side-by-side comparison with hashicorp/memberlist; and
// internal/script, the reader and runner of the datadriven test scripts.
//
// # How it maps to the papers
//
//   - SWIM §3.1, failure detection: each protocol period a member pings one
//     other; without an ack within ProbeTimeout it asks IndirectChecks
//     others to ping the target and relay the ack (probe.go).
//   - SWIM §4.1, dissemination: membership deltas ride on every ping,
//     ping-req, ack and nack, fewest-sent first (the queue in
//     broadcast.go), each sent RetransmitMult·max(2, ceil(log10(N+1)))
//     times (the limit is computed in machine.go), and are also gossiped
//     to GossipNodes members every GossipInterval.
//   - Plumtree §3 (Leitão, Pereira and Rodrigues, SRDS 2007), broadcast
//     trees: applications' broadcasts are pushed along a tree of eager
//     links and announced (IHave) to lazy neighbors; a copy that comes
//     twice prunes its link, an announced broadcast that does not come
//     within Broadcasts.GraftTimeout grafts the announcer (tree.go). Toward
//     members of releases before the trees, or with Broadcasts.Trees off,
//     broadcasts are gossiped as deltas are, each member relaying what it
//     delivers, and share every packet with membership deltas by a fair
//     budget, each kind sure of half (usermsg.go).
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
// This is the whole list, each with its reason; docs/protocol.md explains
// how each mechanism works and docs/figures.md holds the measurements.
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
//   - A leave reported by anyone, a death reported of a member not held
//     suspect for a probe interval, and a move of a live member are
//     checked with the member, by a ping carrying the claim, before they
//     count (suspicion.go, moves.go): one forged packet would otherwise
//     remove a member at once or move it to an attacker's address. A
//     member that leaves tells each member itself and waits for the acks
//     (lifecycle.go), so a leave check it does not answer counts as a
//     death.
//   - News of a member not known is believed only from a live member or
//     in the answer to an exchange this member started; a process may
//     announce itself, and is admitted once its address answered a ping in
//     its name (newcomers.go): SWIM believes any alive, which lets anyone
//     fill the table with invented members.
//   - Forgotten members are remembered by tombstones of their last
//     incarnation, so that replayed or late news of them changes nothing,
//     and a reconnect tells its target it was declared dead.
//   - Strangers get a bare ack no larger than their ping, ping-reqs are
//     served for live members only and at a bounded rate, and acks count
//     only from the address asked: no amplification, no forged liveness.
//   - Incarnations saturate, and a jump of more than MaxIncarnationJump is
//     dropped: no single packet can leave a member unable to refute. An
//     accusation may lie at most 64 above the incarnation held (its own
//     for the accused), so forged accusations raise an incarnation at a
//     bounded rate.
//   - Push-pull merges a peer's "dead" as suspect (as memberlist does), and
//     merges large views a slice per Tick.
//   - Reconnect attempts to dead members are made with probability
//     8·dead/live (after Serf), so a crash costs a large cluster about 8
//     full-state exchanges per ReconnectInterval, not one per member.
//   - The broadcast trees' overlay is the member table, not HyParView:
//     a member's neighbors are its predecessor and successor among the
//     live members on each of three hash rings of the names, so members
//     with the same view agree on the links without a message, and SWIM's
//     failure detector stands in for the overlay's NeighborDown (Plumtree
//     §3.3): a view every member holds already needs no second one.
//   - Two kinds of tree instead of Plumtree's one: a shared tree carries
//     each origin's first broadcast, and each link of it is pruned by the
//     copies of one broadcast (the first this member received, or the
//     first over a link added since), never by concurrent ones; each
//     origin then has a tree of its own, changed by its own prunes and
//     grafts alone: a single tree pruned by every sender's copies lets
//     concurrent senders prune one another's links until it spans nothing
//     (tree.go).
//   - A neighbor's suspicion mends the trees at once: the member asks its
//     other neighbors to carry the trees the suspect carried to it (a
//     Graft naming origins), and the accuser tells the suspect's ring
//     neighbors itself. Plumtree mends a tree only when a broadcast fails
//     to come (§3.2) or the overlay drops the neighbor (§3.3, here at its
//     death), so an origin that broadcasts rarely would find its tree
//     broken at its next broadcast.
//   - Pushes and announcements wait per link for the next flush
//     (Broadcasts.FlushInterval) and go in as few packets as hold them, and
//     announcements also ride on packets going to the neighbor anyway; a
//     link's queue is bounded, and past it the origin with the most bytes
//     queued loses its newest push, so one noisy origin cannot crowd the
//     others out of a relay.
//   - A broadcast with a key replaces the older value of its key wherever
//     it is queued or retained, and no member delivers an older value
//     after a newer one: only the newest value of a key keeps spreading,
//     which is what a replicated map wants.
//   - Every member announces the protocol versions it speaks (and its
//     application's) with its alive; message kinds and fields of a newer
//     protocol are skipped and counted, and a wire feature is used toward
//     a peer only once it announced it, so two adjacent releases share a
//     cluster during a rolling upgrade (docs/upgrades.md).
package swim
