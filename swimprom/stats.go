package swimprom

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/swim-go/swim"
)

// statSpec maps one numeric field of swim.MemberlistStats (the embedded
// swim.Stats included) to a metric. A uint64 field is a counter, an int
// field a gauge (the core's convention: its few gauges are ints). Fields
// that count one thing for different reasons share a metric, told apart
// by a reason label; the first field of such a metric carries its help.
type statSpec struct {
	field  string
	name   string // without the namespace
	help   string
	reason string // the reason label's value; "" for a metric of one field
}

// statSpecs lists every numeric field of MemberlistStats. TestEveryStat
// fails when a field has no entry, so a counter added to the core gets a
// metric before it ships.
var statSpecs = []statSpec{
	// Traffic.
	{field: "PacketsSent", name: "packets_sent_total", help: "UDP packets this member built and handed to the transport: probes, acks, heartbeats, gossip and messages, each with the deltas it carried."},
	{field: "PacketsReceived", name: "packets_received_total", help: "UDP packets that reached the protocol (after the label, source and key checks)."},
	{field: "BytesSent", name: "sent_bytes_total", help: "Bytes of the UDP packets sent, before the label and encryption envelope."},
	{field: "BytesReceived", name: "received_bytes_total", help: "Bytes of the UDP packets received, after the label and encryption envelope were removed."},
	{field: "PacketsDropped", name: "packets_dropped_total", help: "Packets and deltas dropped: malformed, of a kind that belongs on a stream, or an answer to a stranger larger than its request."},
	{field: "UnknownMessages", name: "unknown_messages_total", help: "Messages of a kind from a newer protocol, skipped."},
	{field: "UnknownFields", name: "unknown_fields_total", help: "Messages carrying fields from a newer protocol, read without those fields."},
	{field: "EncodeErrors", name: "encode_errors_total", help: "Own messages that did not encode and were not sent; any is a bug."},

	// Defences of the member table.
	{field: "MembersRefused", name: "members_refused_total", help: "New members not added because the table held MaxMembers, or a Registry shared by Machines its most member versions."},
	{field: "DeltasImplausible", name: "deltas_implausible_total", help: "Deltas whose incarnation lay more than MaxIncarnationJump beyond the one known, dropped as forgeries."},
	{field: "VersionsRefused", name: "versions_refused_total", help: "Alives claiming other versions for a member's life, not its own word: the held versions kept."},
	{field: "AcksRefused", name: "acks_refused_total", help: "Acks and nacks from an address that was not asked."},
	{field: "PushPullsRefused", name: "push_pulls_refused_total", help: "Push-pulls refused: announcing more than MaxMembers, or arriving while too many merges were in progress."},
	{field: "DeltasStale", name: "deltas_stale_total", help: "News of a forgotten member no newer than its tombstone (a replay, or a rumor that outlived it), dropped."},
	{field: "TombstoneNudges", name: "tombstone_nudges_total", help: "Forgotten members told of their death because stale news of them arrived."},

	// Failure detection.
	{field: "Probes", name: "probes_total", help: "Direct probes started: a ping awaiting an ack. With paired probing only partners not heard from in time are probed."},
	{field: "ProbesFailed", name: "probes_failed_total", help: "Probes whose target did not answer, directly or through the relays, and was not heard from otherwise."},
	{field: "HeartbeatsSent", name: "heartbeats_sent_total", help: "Heartbeats sent to the partner of a paired round."},
	{field: "HeartbeatsReceived", name: "heartbeats_received_total", help: "Heartbeats received from partners of paired rounds."},
	{field: "PairChecks", name: "pair_checks_total", help: "Paired partners heard from in time, so checked without a probe."},
	{field: "PairFallbacks", name: "pair_fallbacks_total", help: "Paired partners not heard from in time, probed instead."},
	{field: "HeartbeatsWithheld", name: "heartbeats_withheld_total", help: "Heartbeats not sent because no member was heard from for two rounds."},
	{field: "ProbesSavedByTraffic", name: "probes_saved_by_traffic_total", help: "Probes whose ack was lost but whose target was heard from during the probe, so they succeeded."},
	{field: "TCPProbesSaved", name: "tcp_probes_saved_total", help: "Probes that failed over UDP and were answered by the fallback TCP ping."},
	{field: "NacksSent", name: "nacks_sent_total", help: "Nacks sent to ping-req requesters whose target stayed silent."},
	{field: "NacksReceived", name: "nacks_received_total", help: "Nacks received from relays of this member's probes."},
	{field: "NacksMissing", name: "nacks_missing_total", help: "Nacks expected from relays that stayed silent, each a sign that this member may be the one in trouble."},
	{field: "PingReqsSent", name: "ping_reqs_sent_total", help: "Ping-reqs sent: relays asked to ping a silent probe target."},
	{field: "PingReqsServed", name: "ping_reqs_served_total", help: "Ping-reqs of other members served by pinging their target."},
	{field: "PingReqsRefused", name: "ping_reqs_refused_total", help: "Ping-reqs refused: from a stranger, for a target or address not known, or over the rate or the bound in flight."},

	// Suspicion and its outcomes.
	{field: "SuspicionsRaised", name: "suspicions_raised_total", help: "Suspicions this member raised itself after a failed probe."},
	{field: "SuspicionsConfirmed", name: "suspicions_confirmed_total", help: "Independent accusations that shortened a suspicion held."},
	{field: "SuspicionsWithheld", name: "suspicions_withheld_total", help: "Failed probes whose relays all stayed silent, so no one was accused."},
	{field: "AccusationsWaited", name: "accusations_waited_total", help: "Accusations dropped while their accuser waits after its last one of the member was refuted."},
	{field: "SuspectsTold", name: "suspects_told_total", help: "Members this member accused, pinged at once with the suspicion so that a live one refutes."},
	{field: "SuspicionsSavedByTraffic", name: "suspicions_saved_by_traffic_total", help: "Suspects heard from since they were accused, so not declared dead when the suspicion ran out."},
	{field: "Refutations", name: "refutations_total", help: "Suspicions or deaths of this member that it refuted, and newer incarnations of its name (a previous life) that it overtook, each by raising its incarnation."},
	{field: "Reasserts", name: "reasserts_total", help: "Stale accusations of this member answered with its current alive."},
	{field: "StaleAccusationsAnswered", name: "stale_accusations_answered_total", help: "Accusations of other members older than their alive, answered by gossiping that alive again."},
	{field: "DeathsDeclared", name: "deaths_declared_total", help: "Members this member declared dead itself, at the end of a suspicion."},
	{field: "FinalChecks", name: "final_checks_total", help: "Suspects pinged once more before being declared dead."},
	{field: "FinalChecksSaved", name: "final_checks_saved_total", help: "Final checks answered: the suspect lived, and was not declared dead."},
	{field: "FinalChecksExtended", name: "final_checks_extended_total", help: "Final checks run again instead of ended, because their verdict came late (this member was not running in time)."},
	{field: "LeaveChecks", name: "leave_checks_total", help: "Leaves reported by others, checked with the member before they count."},
	{field: "DeathChecks", name: "death_checks_total", help: "Deaths reported by others of members not held suspect for long, checked with the member before they count."},
	{field: "DeathClaimsRefuted", name: "death_claims_refuted_total", help: "Death checks the member answered: the report was wrong, or forged."},
	{field: "DeathClaimsUnanswered", name: "death_claims_unanswered_total", help: "Death checks the member did not answer: suspected with the usual window, not dead at once."},
	{field: "Moves.Checked", name: "moves_checked_total", help: "Live members reported at a new address, checked at both addresses before the move counts."},
	{field: "Moves.Refused", name: "moves_refused_total", help: "Reported moves not applied: the member answered at its old address, not at the new one, or too many were being checked."},
	{field: "LeaveClaimsUnanswered", name: "leave_claims_unanswered_total", help: "Leaves reported by others whose check the member did not answer: suspected with the usual window, not left."},
	{field: "LeaveNoticesUnanswered", name: "leave_notices_unanswered_total", help: "Members this one, leaving, told of its leave five times with no acknowledgement."},
	{field: "Admission.NewcomersChecked", name: "newcomers_checked_total", help: "Members not known that announced themselves (not through a member), pinged at their address before being admitted."},
	{field: "Admission.NewcomersRefused", name: "newcomers_refused_total", help: "News of members not known not believed: a stranger's news of another, an address silent now or lately, or over the checks in flight."},
	{field: "ClaimChecksRefused", name: "claim_checks_refused_total", help: "Deaths reported while the most death checks were in flight, held as suspicions instead."},
	{field: "ProbesInconclusive", name: "probes_inconclusive_total", help: "Failed probes ended late (this member was not running in time), so no one was accused."},

	// Dissemination of membership news.
	{field: "DeltasDropped", name: "deltas_dropped_total", help: "Membership deltas dropped from the gossip queue because it held DeltaQueueLimit."},
	{field: "DeltaQueueLen", name: "delta_queue_length", help: "Membership deltas waiting in the gossip queue."},

	// Applications' data.
	{field: "Messages.Sent", name: "user_messages_sent_total", help: "Application messages sent (SendBestEffort and SendReliable calls that sent)."},
	{field: "Messages.Received", name: "user_messages_received_total", help: "Application messages and broadcasts handed to the application."},
	{field: "Messages.Refused", name: "user_messages_refused_total", help: "Application messages refused: from an address that is no member, in another member's name, or over MaxMessageSize."},
	{field: "MessagesDropped", name: "user_messages_dropped_total", help: "Application messages dropped because MessageBuffer messages were already waiting for the handler."},
	{field: "MessagesUnhandled", name: "user_messages_unhandled_total", help: "Application messages dropped because no Config.Messages handler is set."},
	{field: "Broadcasts.Queued", name: "user_broadcasts_queued_total", help: "Application broadcasts this member started (Broadcast calls)."},
	{field: "Broadcasts.Delivered", name: "user_broadcasts_delivered_total", help: "Other members' application broadcasts received for the first time and delivered."},
	{field: "Broadcasts.Duplicate", name: "user_broadcasts_duplicate_total", help: "Application broadcasts received again, or too late to tell, and not delivered."},
	{field: "Broadcasts.Refused", name: "user_broadcasts_refused_total", help: "Application broadcasts refused because MaxMembers origins were already tracked."},
	{field: "Broadcasts.Dropped", name: "user_broadcasts_dropped_total", help: "Application broadcasts dropped from the queue because it held Broadcasts.QueueLimit broadcasts or Broadcasts.QueueBytes."},
	{field: "Broadcasts.QueueLen", name: "user_broadcast_queue_length", help: "Application broadcasts waiting to be sent or relayed."},
	{field: "Broadcasts.QueueBytes", name: "user_broadcast_queue_bytes", help: "Bytes of the application broadcasts waiting to be sent or relayed."},
	{field: "Broadcasts.Stale", name: "user_broadcasts_stale_total", help: "Keyed application broadcasts older than the value of their key already delivered: neither delivered nor passed on."},
	{field: "Broadcasts.Implausible", name: "user_broadcasts_implausible_total", help: "Application broadcasts at an epoch their origin cannot have sent (before its process started, an hour past this member's clock): dropped."},
	{field: "Trees.PushesSent", name: "tree_pushes_sent_total", help: "Application broadcasts pushed to a neighbor over an eager tree link."},
	{field: "Trees.PushesDropped", name: "tree_pushes_dropped_total", help: "Pushes dropped from a tree link's full queue (the newest of the link's noisiest origin)."},
	{field: "Trees.Redundant", name: "tree_redundant_total", help: "Application broadcasts received again over a tree link: the redundant receptions the trees prune away."},
	{field: "Trees.PrunesSent", name: "tree_prunes_sent_total", help: "Prunes sent: links taken out of a tree (an origin's or the shared one) because a copy came twice."},
	{field: "Trees.PrunesReceived", name: "tree_prunes_received_total", help: "Prunes received from neighbors."},
	{field: "Trees.AnnouncementsSent", name: "tree_announcements_sent_total", help: "Broadcast identifiers announced to lazy neighbors."},
	{field: "Trees.AnnouncementsReceived", name: "tree_announcements_received_total", help: "Broadcast identifiers announced by neighbors."},
	{field: "Trees.GraftsSent", name: "tree_grafts_sent_total", help: "Grafts sent: broadcasts announced and not received within Broadcasts.GraftTimeout, asked of an announcer."},
	{field: "Trees.GraftsReceived", name: "tree_grafts_received_total", help: "Broadcasts neighbors asked of this member in grafts (identifiers)."},
	{field: "Trees.JoinsSent", name: "tree_joins_sent_total", help: "Trees neighbors were asked to carry to this member because the neighbor that carried them was suspected (origins named in grafts)."},
	{field: "Trees.JoinsReceived", name: "tree_joins_received_total", help: "Trees neighbors asked this member to carry to them (origins named in grafts)."},
	{field: "Trees.SuspicionsTold", name: "tree_suspicions_told_total", help: "Suspicions this member raised sent at once to the suspect's tree neighbors (packets)."},
	{field: "Trees.GraftsUnknown", name: "tree_grafts_unknown_total", help: "Grafted identifiers this member does not retain: nothing sent."},
	{field: "Trees.GraftsAbandoned", name: "tree_grafts_abandoned_total", help: "Announced broadcasts never received after every graft tried."},
	{field: "Trees.Refused", name: "tree_refused_total", help: "Tree messages refused: from no live member on the trees, or over the bounds."},
	{field: "Trees.StateForgotten", name: "tree_state_forgotten_total", help: "Tree bookkeeping past its bound: a link's per-origin trees or the first-broadcast marks cleared, a key's newest value not remembered, a prune left for a later flush."},
	{field: "Trees.Peers", name: "tree_peers", help: "Neighbors on the broadcast trees."},
	{field: "Trees.LazyLinks", name: "tree_lazy_links", help: "(neighbor, tree) pairs whose link only announces that tree's broadcasts; a tree is the shared one or an origin's own."},
	{field: "Trees.QueueBytes", name: "tree_queue_bytes", help: "Bytes of the pushes queued on tree links."},
	{field: "Trees.RetainedBytes", name: "tree_retained_bytes", help: "Bytes of the broadcasts retained to answer grafts (Broadcasts.RetainBytes bounds it)."},
	{field: "Trees.Missing", name: "tree_missing", help: "Broadcasts announced by neighbors and not yet received."},
	{field: "StatesRefused", name: "user_states_refused_total", help: "Application states in peers' push-pulls over MaxStateSize, not handed to the application."},
	{field: "StatesTooLarge", name: "user_states_too_large_total", help: "This member's application states over MaxStateSize, not sent."},
	{field: "StateMergeErrors", name: "user_state_merge_errors_total", help: "Errors the application's MergeRemoteState returned."},
	{field: "AckPayloadsTooLarge", name: "ack_payloads_too_large_total", help: "Ack payloads of Config.Pings over MaxAckPayload, not sent."},

	// Admission.
	{field: "Admission.Refused", name: "admissions_refused_total", help: "New members Config.Admission.Admit refused."},
	{field: "Admission.JoinsRefused", name: "joins_refused_total", help: "Joins, this member's or a peer's, that Config.Admission.Join refused."},
	{field: "Lives.NameConflicts", name: "name_conflicts_total", help: "Second live processes found claiming this member's name."},
	{field: "Lives.NamesYielded", name: "names_yielded_total", help: "Name conflicts this member settled by giving its name up."},
	{field: "Lives.Restarts", name: "restarts_total", help: "New lives of members taken: restarts seen."},
	{field: "Lives.Checks", name: "life_checks_total", help: "Claims of a new life of a member checked at both lives' addresses."},
	{field: "Lives.Refused", name: "lives_refused_total", help: "Claims of a new life dropped: the held life answered, the new one did not, or it was refused lately."},
	{field: "Lives.ChecksDropped", name: "life_checks_dropped_total", help: "Claims of another life not checked because too many checks were in flight; the next copy is."},
	{field: "Lives.RestartNoticesSent", name: "restart_notices_sent_total", help: "This member's alive sent directly to each member at a restart."},

	// Signed claims.
	{field: "Claims.SignaturesMade", name: "signatures_made_total", help: "Claims this member signed: its own alives and leaves, its accusations."},
	{field: "Claims.SignaturesVerified", name: "signatures_verified_total", help: "Signatures and certificates verified, each claim once."},
	{field: "Claims.Unsigned", name: "claims_unsigned_total", help: "Claims about other members dropped for want of a signature."},
	{field: "Claims.Forged", name: "claims_forged_total", help: "Claims dropped whose signature is not their member's or their accuser's."},
	{field: "Claims.KeyConflicts", name: "key_conflicts_total", help: "Claims dropped that bring another key for a name bound to one, and joins refused for it."},
	{field: "Claims.FromStrangers", name: "claims_from_strangers_total", help: "Claims about a member held, from no live member and not its own word: dropped before any signature is verified."},
	{field: "Claims.OverBudget", name: "claims_over_budget_total", help: "Claims dropped unverified past their source's verification budget."},
	{field: "Claims.CertificatesRefused", name: "certificates_refused_total", help: "Claims dropped whose certificate is missing, expired or from no trusted root."},
	{field: "Claims.AccusationsLimited", name: "accusations_limited_total", help: "Accusations dropped past their accuser's bound."},

	// Streams and anti-entropy.
	{field: "PushPulls", name: "push_pulls_total", help: "Push-pulls (full state exchanges over TCP) this member started: joins, periodic anti-entropy, reconnects and asks for missed members."},
	{field: "PushPullsFailed", name: "push_pulls_failed_total", help: "Push-pulls this member started that failed."},
	{field: "StreamsExpired", name: "stream_requests_expired_total", help: "Stream exchanges whose outcome the driver never reported, failed after twice their timeout."},
	{field: "TCPPings", name: "tcp_pings_total", help: "Pings sent over TCP: fallbacks of failed probes, final checks, and checks of members a packet showed alive."},
	{field: "TCPPingsFailed", name: "tcp_pings_failed_total", help: "TCP pings that got no valid answer."},
	{field: "Reconnects", name: "reconnects_total", help: "Push-pulls started with a member declared dead, or with a seed while alone, to heal a partition."},
	{field: "HolePings", name: "hole_pings_total", help: "TCP pings of members held dead or forgotten that a packet showed alive."},
	{field: "HolePushPulls", name: "hole_push_pulls_total", help: "Push-pulls with a member that named a member never heard of, or whose view digest differed."},
	{field: "HoleAsksRefused", name: "hole_asks_refused_total", help: "Asks for missed members not made: over the rate, or no room to remember them."},
	{field: "HoleAsksDeferred", name: "hole_asks_deferred_total", help: "Asks for missed members put off during a join storm, until the news in flight had landed."},
	{field: "JoinNewsLazy", name: "join_news_lazy_total", help: "Alives of newcomers queued during a join storm, which ride on other packets instead of opening gossip rounds of their own."},
	{field: "JoinNewsDropped", name: "join_news_dropped_total", help: "Alives of newcomers dropped during a join storm, the most sent first, over the backlog a member keeps."},
	{field: "ViewDigestsSent", name: "view_digests_sent_total", help: "View digests sent beside Heartbeats, in the rounds after this member's view changed."},
	{field: "ViewDigestsDiffering", name: "view_digests_differing_total", help: "View digests received that differed from this member's view while both stood still."},

	// The driver.
	{field: "SeedLookupsFailed", name: "seed_lookups_failed_total", help: "Lookups of seed names that failed, in Join and in the retries while this member is alone."},
	{field: "EventsDropped", name: "events_dropped_total", help: "Membership events dropped because EventBuffer events were already waiting for the handler."},

	// Traffic refused before the protocol saw it, by reason.
	{field: "RefusedSource", name: "traffic_refused_total", reason: "source", help: "Packets and streams refused before the protocol saw them, by reason: source (outside Security.AllowedCIDRs), label (no label or another one), plaintext (while encryption is required), key (no installed key opens it), tls (the inbound TLS handshake failed)."},
	{field: "RefusedLabel", name: "traffic_refused_total", reason: "label"},
	{field: "RefusedPlaintext", name: "traffic_refused_total", reason: "plaintext"},
	{field: "RefusedKey", name: "traffic_refused_total", reason: "key"},
	{field: "RefusedTLS", name: "traffic_refused_total", reason: "tls"},

	// Streams refused or closed, by the limit that did it.
	{field: "StreamsRefused", name: "streams_refused_total", reason: "slots", help: "TCP streams refused or closed, by the limit that did it: slots (MaxConcurrentStreams in flight in that direction), per_source (inbound, the source held MaxStreamsPerSource, or gave up its slot to one under it), timed_out (inbound, the request did not arrive in time, or a stream without one gave its slot to a new one), too_large (a message announced over MaxStreamBytes), over_budget (inbound, the requests being read held 4 times MaxStreamBytes)."},
	{field: "StreamsRefusedPerSource", name: "streams_refused_total", reason: "per_source"},
	{field: "StreamsTimedOut", name: "streams_refused_total", reason: "timed_out"},
	{field: "StreamsTooLarge", name: "streams_refused_total", reason: "too_large"},
	{field: "StreamsOverBudget", name: "streams_refused_total", reason: "over_budget"},
}

// fieldByPath finds the field a dotted path names in t, through the
// groups of Stats ("Trees.PushesSent"), with the index of the whole path.
func fieldByPath(t reflect.Type, path string) (reflect.StructField, bool) {
	var index []int
	var f reflect.StructField
	for _, name := range strings.Split(path, ".") {
		if t.Kind() != reflect.Struct {
			return reflect.StructField{}, false
		}
		var ok bool
		if f, ok = t.FieldByName(name); !ok {
			return reflect.StructField{}, false
		}
		index = append(index, f.Index...)
		t = f.Type
	}
	f.Index = index
	return f, true
}

// statField is a statSpec resolved against the MemberlistStats type.
type statField struct {
	statSpec
	index   []int // reflect.Value.FieldByIndex
	counter bool  // uint64: a counter; int: a gauge
}

// statFields are the specs resolved, in the order of statSpecs.
var statFields = resolveStats()

// resolveStats finds each spec's field. The table and the type are in one
// module and TestEveryStat checks them, so a mismatch is a bug of this
// package, reported at once.
func resolveStats() []statField {
	t := reflect.TypeFor[swim.MemberlistStats]()
	out := make([]statField, 0, len(statSpecs))
	for _, s := range statSpecs {
		f, ok := fieldByPath(t, s.field)
		if !ok {
			panic(fmt.Sprintf("swimprom: MemberlistStats has no field %s", s.field))
		}
		var counter bool
		switch f.Type.Kind() {
		case reflect.Uint64:
			counter = true
		case reflect.Int:
		default:
			panic(fmt.Sprintf("swimprom: MemberlistStats.%s is a %s, neither a uint64 counter nor an int gauge", s.field, f.Type))
		}
		out = append(out, statField{statSpec: s, index: f.Index, counter: counter})
	}
	return out
}
