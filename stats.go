package swim

// Stats returns the counters.
func (m *Machine) Stats() Stats {
	s := m.stats
	s.DeltasDropped = m.bq.dropped
	s.DeltaQueueLen = m.bq.Len()
	s.Broadcasts.Dropped = m.uq.dropped
	s.Broadcasts.QueueLen = m.uq.Len()
	s.Broadcasts.QueueBytes = m.uq.bytes
	m.treeStats(&s)
	c := m.sigs.Stats()
	s.Claims.SignaturesMade, s.Claims.SignaturesVerified = c.SignaturesMade, c.SignaturesVerified
	s.Claims.Unsigned, s.Claims.Forged, s.Claims.KeyConflicts = c.ClaimsUnsigned, c.ClaimsForged, c.KeyConflicts
	s.Claims.CertificatesRefused, s.Claims.AccusationsLimited = c.CertificatesRefused, c.AccusationsLimited
	return s
}

// Stats are cumulative counters of one member.
type Stats struct {
	PacketsSent, PacketsReceived uint64
	BytesSent, BytesReceived     uint64
	PacketsDropped               uint64 // malformed or unknown
	UnknownMessages              uint64 // messages of a kind from a newer protocol, skipped
	UnknownFields                uint64 // messages carrying fields from a newer protocol, which were skipped
	EncodeErrors                 uint64 // own messages that did not encode (a bug; dropped, not sent)
	MembersRefused               uint64 // new members not added: the table held MaxMembers, or a shared Registry its most versions
	DeltasImplausible            uint64 // incarnations beyond MaxIncarnationJump of what is known, dropped
	VersionsRefused              uint64 // alives claiming other versions for a member's life, not its own word: the held versions kept
	AcksRefused                  uint64 // acks and nacks from an address that was not asked
	PushPullsRefused             uint64 // push-pulls over MaxMembers, or over the merges in progress
	DeltasStale                  uint64 // news of a forgotten member no newer than its tombstone (a replay), dropped
	TombstoneNudges              uint64 // forgotten members told of their death on stale news of them
	Probes, ProbesFailed         uint64
	HeartbeatsSent               uint64 // to partners of paired rounds (pairing.go)
	HeartbeatsReceived           uint64
	PairChecks                   uint64 // partners heard from in time: checked without a probe
	PairFallbacks                uint64 // partners not heard from in time, probed
	HeartbeatsWithheld           uint64 // not sent: no member heard from for two rounds (pairing.go)
	ProbesSavedByTraffic         uint64 // ack lost, but the target was heard from during the probe
	TCPProbesSaved               uint64 // UDP failed, the fallback TCP ping answered
	NacksSent, NacksReceived     uint64
	NacksMissing                 uint64 // expected from relays that stayed silent
	SuspicionsConfirmed          uint64 // independent accusations that shortened a suspicion
	SuspicionsWithheld           uint64 // failed probes whose relays all stayed silent: no accusation
	AccusationsWaited            uint64 // accusations dropped while their accuser waits after its last one of the member was refuted (repeats.go)
	SuspicionsSavedByTraffic     uint64 // suspect heard from since it was accused, not declared dead
	SuspectsTold                 uint64 // members this one accused, pinged at once with the suspicion so they refute (Detection.BuddyPing)
	PingReqsSent, PingReqsServed uint64
	PingReqsRefused              uint64 // from a stranger, for a target or address not known, or over the rate or the bound in flight
	SuspicionsRaised             uint64
	Refutations                  uint64
	Reasserts                    uint64 // stale accusations answered with our current alive
	StaleAccusationsAnswered     uint64 // accusations of others older than their alive we know, answered by gossiping that alive again
	DeathsDeclared               uint64
	FinalChecks                  uint64 // suspects pinged once more before being declared dead
	FinalChecksSaved             uint64 // ... that answered, and were not declared dead
	LeaveChecks                  uint64 // leaves reported by others, checked with the member before they count
	LeaveClaimsUnanswered        uint64 // ... that the member did not answer: suspected with the usual window, not left (members of protocol 5 tell each member of their own leave)
	LeaveNoticesUnanswered       uint64 // members this one, leaving, told of its leave leaveNoticeTries times with no ack (lifecycle.go)
	DeathChecks                  uint64 // deaths reported by others of members not held suspect through their window, checked with the member before they count
	DeathClaimsRefuted           uint64 // death checks the member answered: the report was wrong or forged
	DeathClaimsUnanswered        uint64 // death checks the member did not answer: suspected with the usual window, not dead at once
	ClaimChecksRefused           uint64 // deaths reported past the most death checks in flight, held as suspicions instead
	// Moves counts checked address changes.
	Moves               MoveStats
	FinalChecksExtended uint64 // final checks run again, not ended, because we expired them late (health.go)
	ProbesInconclusive  uint64 // failed probes ended late: no accusation (health.go)
	DeltasDropped       uint64 // queue over DeltaQueueLimit
	DeltaQueueLen       int    // deltas waiting now (a gauge, not a counter)
	// Messages counts the applications' direct messages.
	Messages MessageStats
	// Broadcasts counts the applications' broadcasts.
	Broadcasts BroadcastStats
	// Trees counts the epidemic broadcast trees (internal/plumtree).
	Trees         TreeStats
	StatesRefused uint64 // applications' states in push-pulls over MaxStateSize, not handed on
	// Admission counts who was let in, and who not.
	Admission AdmissionStats
	// Lives counts restarts and name conflicts (docs/lives.md).
	Lives LifeStats
	// Claims counts signed claims (docs/security.md).
	Claims                     ClaimStats
	AckPayloadsTooLarge        uint64 // Config.Pings payloads over MaxAckPayload, not sent
	PushPulls, PushPullsFailed uint64
	StreamsExpired             uint64 // stream requests whose outcome the driver never reported, failed after twice their Timeout
	TCPPings, TCPPingsFailed   uint64
	Reconnects                 uint64

	// Asks for members gossip missed (repair.go): TCP pings of members held
	// dead or forgotten that a packet showed alive, push-pulls with the
	// member that named one never heard of, and asks not made (over the
	// rate, or no room to remember them).
	HolePings, HolePushPulls uint64
	HoleAsksRefused          uint64
	// Join storms (joinstorm.go): alives of newcomers that opened no
	// gossip round of their own, and asks for missed members put off
	// until the news in flight had landed.
	JoinNewsLazy, HoleAsksDeferred uint64
	JoinNewsDropped                uint64 // join news of a storm dropped, sent most, over the backlog a member keeps (joinstorm.go)
	// View digests (repair.go): sent beside Heartbeats, and received
	// that differed from this member's view while both stood still.
	ViewDigestsSent, ViewDigestsDiffering uint64
}

// TreeStats counts the epidemic broadcast trees: pushes, announcements,
// grafts and prunes, and the links' gauges. Part of Stats.
type TreeStats struct {
	// Epidemic broadcast trees (tree.go).
	PushesSent            uint64 // broadcasts pushed over eager links
	PushesDropped         uint64 // pushes dropped from a link's full queue (its noisiest origin's newest)
	Redundant             uint64 // broadcasts that came again over a tree link (the redundant receptions)
	PrunesSent            uint64 // links taken out of a tree (an origin's or the shared one) by a redundant copy
	PrunesReceived        uint64
	AnnouncementsSent     uint64 // broadcast identifiers announced to lazy neighbors (in IHave)
	AnnouncementsReceived uint64
	GraftsSent            uint64 // broadcasts asked of an announcer, not received in time
	GraftsReceived        uint64 // broadcasts neighbors asked of this member (identifiers in Grafts)
	JoinsSent             uint64 // trees a neighbor was asked to carry to this member when the one that carried them was suspected (origins named in Grafts)
	JoinsReceived         uint64 // trees neighbors asked this member to carry to them (origins named in Grafts)
	SuspicionsTold        uint64 // suspicions this member raised sent at once to the suspect's tree neighbors
	GraftsUnknown         uint64 // asked for, not retained here: nothing sent
	GraftsAbandoned       uint64 // announced broadcasts never received after plumtree.GraftTries grafts
	Refused               uint64 // tree messages from no live member of the tree protocol, or announcements over the bound
	StateForgotten        uint64 // tree bookkeeping past its bound: a link's per-origin trees or the first-broadcast marks cleared, a key's newest value not remembered, a prune left for a later flush
	Peers                 int    // neighbors now (a gauge)
	LazyLinks             int    // (neighbor, tree) pairs pruned, a tree being the shared one or an origin's own: links that only announce that tree's broadcasts (a gauge)
	QueueBytes            int    // pushes queued on links (a gauge)
	RetainedBytes         int    // broadcasts retained for grafts (a gauge)
	Missing               int    // broadcasts announced, not received (a gauge)
}

// BroadcastStats counts the applications' broadcasts (Broadcast) and
// their queue. Part of Stats.
type BroadcastStats struct {
	Queued      uint64 // Broadcast calls
	Delivered   uint64 // others' broadcasts received for the first time
	Duplicate   uint64 // ... received again (or too late to tell), not delivered
	Refused     uint64 // from one origin more than MaxMembers origins are tracked
	Stale       uint64 // keyed broadcasts older than the value of their key delivered here: neither delivered nor passed on
	Implausible uint64 // at an epoch their origin cannot have sent (before its process started, an hour past this member's clock): dropped
	Dropped     uint64 // queue over QueueLimit or QueueBytes
	QueueLen    int    // broadcasts waiting now (a gauge)
	QueueBytes  int    // their bytes (a gauge)
}

// MessageStats counts the applications' direct messages (SendBestEffort,
// SendReliable). Part of Stats.
type MessageStats struct {
	// Applications' data (usermsg.go).
	Sent     uint64 // SendBestEffort and SendReliable calls that sent
	Received uint64 // messages and broadcasts handed to the driver (Ready.Messages)
	Refused  uint64 // from an address that is no member, in another member's name, or over MaxMessageSize
}

// ClaimStats counts the signatures made and verified, and the claims
// dropped for want of a valid one. Part of Stats.
type ClaimStats struct {
	SignaturesMade      uint64 // claims this member signed: its own alives and leaves, its accusations (signatures.go)
	SignaturesVerified  uint64 // signatures and certificates verified (each claim once)
	Unsigned            uint64 // claims about other members dropped for want of a signature
	Forged              uint64 // claims dropped whose signature is not their member's (or accuser's)
	KeyConflicts        uint64 // claims dropped that bring another key for a name bound to one (trust on first use: whatever the life), and joins refused for it
	FromStrangers       uint64 // claims about a member held, passed on by no live member and not the member's own word: dropped before any signature is verified
	OverBudget          uint64 // claims dropped unverified past their source's verification budget (verifyBurst, verifyRate)
	CertificatesRefused uint64 // claims dropped whose certificate is missing, expired or from no trusted root
	AccusationsLimited  uint64 // accusations dropped past their accuser's bound
}

// LifeStats counts the lives of members' processes: restarts, checks of
// a claimed new life, and name conflicts. Part of Stats.
type LifeStats struct {
	Restarts           uint64 // new lives of members taken (EventRestart, or EventJoin for a member held dead)
	Checks             uint64 // claims of a new life of a member checked at both lives' addresses
	Refused            uint64 // claims of a new life dropped: the held life answered, the new one did not, or it was refused lately
	ChecksDropped      uint64 // claims of another life not checked: too many checks in flight (the next copy is)
	RestartNoticesSent uint64 // this member's alive sent to each member at a restart (lives.go)
	NameConflicts      uint64 // second live processes found claiming this member's name (EventConflict)
	NamesYielded       uint64 // conflicts this member settled by giving its name up (Config.Admission.NameConflict)
}

// AdmissionStats counts the admission of members: the application's
// refusals (Config.Admission) and the checks of members not known
// before. Part of Stats.
type AdmissionStats struct {
	Refused          uint64 // new members Config.Admission.Admit refused
	JoinsRefused     uint64 // joins (ours or a peer's) Config.Admission.Join refused
	NewcomersChecked uint64 // members not known that announced themselves (not through a member), pinged at their address before being admitted
	NewcomersRefused uint64 // news of members not known not believed: announced by a stranger for another, silent at their address (now or lately), over the checks in flight, another name at an address being checked, or a push-pull of a newcomer not held (one held already, or over maxHeldBytes)
}

// MoveStats counts members reported at a new address, checked at both
// before the move counts. Part of Stats.
type MoveStats struct {
	Checked uint64 // live members reported at a new address, checked at both before the move counts
	Refused uint64 // such moves not applied: the member answered at its old address, not at the new one, or too many were checked
}
