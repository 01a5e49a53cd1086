package swim

import (
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/swim-go/swim/internal/wire"
)

// Config configures a member. Start from DefaultLANConfig, DefaultWANConfig or
// DefaultLocalConfig and change what you need; New calls Validate.
//
// The fields come in two parts: first what the protocol reads, which a
// Machine uses whoever drives it; then, from BindAddr on, what only
// Memberlist reads (sockets, keys, buffers, callbacks, logging).
type Config struct {
	// Name identifies this member in the cluster; it must be unique, valid
	// UTF-8 and at most 255 bytes. Members announced under a name that is
	// not valid UTF-8 are not admitted (counted as PacketsDropped). Default:
	// the host name.
	Name string

	// Meta is this member's initial metadata, gossiped in alive messages;
	// change it later with Memberlist.UpdateMeta.
	Meta []byte
	// MaxMetaSize bounds metadata. Default 512 bytes: metadata rides in every
	// alive delta, so large values crowd out other deltas.
	MaxMetaSize int
	// AppVersionMin and AppVersionMax are the range of versions of the
	// application's own messages and metadata this process understands,
	// announced to every member with this member's alive (Member.Versions).
	// During a rolling upgrade, read the ranges of the members you talk to
	// before sending them something an older release cannot read. Both 0
	// (the default): no range announced.
	AppVersionMin, AppVersionMax uint8

	// ProbeInterval is the SWIM protocol period: one member is probed per
	// interval (SWIM §3.1). Shorter detects faster and costs more traffic.
	// Default 1s (LAN).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct ping waits for its ack before the
	// indirect probes start. It should exceed the network's RTT p99.
	// Default 500ms (LAN).
	ProbeTimeout time.Duration
	// IndirectChecks is k, the number of members asked to ping a silent
	// target (SWIM §3.1). More tolerates more loss on the path to the
	// target, at k·2 packets per failed probe. Default 3.
	IndirectChecks int
	// SuspicionMult sets K = SuspicionMult-2, the independent confirmations
	// that bring a suspicion's timeout down from Max to Min (Lifeguard
	// §IV-B). When PauseTolerance is zero it also scales Min:
	// SuspicionMult·max(1, log10 N)·ProbeInterval (SWIM §4.2). Default 4.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the suspicion timeout before
	// confirmations shorten it (Lifeguard §IV-B): Max = this·Min. Default 6.
	SuspicionMaxTimeoutMult int
	// RetransmitMult sets how many times each delta is piggybacked:
	// RetransmitMult·max(2, ceil(log10(N+1))) for N live members, so at
	// least 2·RetransmitMult times; the floor keeps rumors from dying out
	// in clusters of up to 9 members, where the log term is 1. Default 4:
	// 8 times up to 99 members, 12 up to 999.
	RetransmitMult int
	// GossipInterval is how often pending deltas are sent to GossipNodes
	// random members, besides riding on probes. 0 disables that gossip.
	// Default 200ms (LAN).
	GossipInterval time.Duration
	// GossipNodes is how many members each gossip round targets. Default 3.
	GossipNodes int
	// GossipToDeadTime is how long a member declared dead still receives
	// gossip, so it can learn it was declared dead and refute. Default 30s.
	GossipToDeadTime time.Duration
	// PushPullInterval is how often this member exchanges full state with a
	// random member (anti-entropy). It is scaled up for large clusters to
	// keep the cost per member bounded. 0 disables it. Default 30s.
	PushPullInterval time.Duration
	// ReconnectInterval is how often this member considers reaching one
	// member it declared dead (or the seeds, when it is alone) with a
	// push-pull, so that a healed partition merges again without operator
	// action. It tries with probability 8·dead/live (at most 1), so the
	// cluster makes about 8 attempts per dead member per interval however
	// large it is, and after a partition everyone tries every interval.
	// 0 disables it. Default 10s.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a dead member (and the seeds) are
	// retried before being forgotten. It is also how long a forgotten
	// member's last incarnation is remembered (a tombstone, at most
	// MaxMembers of them), so that older news about it, such as a replayed
	// packet, is recognised as old instead of bringing it back. Default 6h
	// (LAN).
	ReconnectTimeout time.Duration
	// StreamTimeout bounds one TCP exchange (join, push-pull). Default 10s.
	// An accepted stream must also deliver the first bytes of its request
	// (its length header) sooner, within 4·ProbeTimeout (at least 1s, at
	// most StreamTimeout), or it is closed and counted
	// (StreamsTimedOut): a connection that sends nothing holds a stream
	// slot that long, not StreamTimeout. The margin leaves room for a TLS
	// handshake (Security.StreamTLS), which comes before those bytes.
	StreamTimeout time.Duration
	// PacketBudget is the most bytes of one UDP packet, deltas included.
	// Default 1400, under a typical 1500-byte MTU.
	PacketBudget int
	// DeltaQueueLimit bounds the pending deltas; past it the deltas
	// sent most often are dropped (and counted). Default 4096.
	DeltaQueueLimit int
	// AlignedProbing numbers probe rounds from the clock and has every
	// member probe the member r places after it on a shared ring in round r,
	// so that (while views agree) every member is probed exactly once per
	// round and a crash is probed within one ProbeInterval. Off, targets
	// follow SWIM's randomized round-robin (§4.3). It needs clocks synced
	// to well within ProbeInterval (NTP); unsynced clocks degrade it to
	// random probing, never worse. Default true.
	AlignedProbing bool
	// PairedProbing, with AlignedProbing, pairs the members in each round
	// and has the two of a pair send each other one Heartbeat, at their
	// own phases, instead of a ping and an ack each: one packet per member
	// per round instead of two, every member still checked once a round at
	// the same phase (pairing.go). A partner not heard from by half a
	// ProbeTimeout after its phase is probed as usual, as if from that
	// phase. It counts any packet from the partner, so it needs
	// Detection.AnyTrafficHeartbeat: with that off, members probe as aligned
	// probing does. A member that has heard from no member for two rounds
	// sends no Heartbeats, so that one that cannot receive is probed, and
	// judged, as under probing.
	// A member pairs only while every live member it knows speaks protocol
	// 4 or later; during a rolling upgrade from an older release it
	// probes as aligned probing does. It needs the clocks AlignedProbing
	// needs, synced to well within ProbeTimeout/2: beyond that every check
	// falls back to a probe, costing what aligned probing costs. Default
	// true.
	PairedProbing bool
	// PauseTolerance is the longest a member may stop responding (a GC
	// pause, a VM migration, a saturated link) without being declared dead.
	// It sets the suspicion timeout: Min = PauseTolerance, measured from
	// the start of the probe that failed (plus the time a refutation needs
	// to spread when Detection.FinalCheck is off; docs/tuning.md has the formula),
	// so a real crash is known everywhere about PauseTolerance plus one
	// ProbeInterval after it happens. Zero falls back to
	// SuspicionMult·max(1, log10 N)·ProbeInterval. Default 5s (LAN), 15s
	// (WAN), 2s (Local).
	PauseTolerance time.Duration
	// AwarenessMaxMultiplier bounds the local health score (Lifeguard
	// §IV-A): probe interval and timeout scale by score+1, score at most
	// AwarenessMaxMultiplier-1. 1 disables it. Default 8.
	AwarenessMaxMultiplier int
	// Detection holds the refinements of SWIM's failure detector from
	// Lifeguard and Apache Geode, each on by default.
	Detection DetectionConfig

	// MaxMembers bounds the member table (live, suspect, and dead or left
	// members not yet forgotten, this one included). A member never heard
	// of before is refused once the table holds this many, and counted
	// (Stats.MembersRefused); members already known keep working. A
	// push-pull announcing more members than this is refused whole before
	// it is merged. Default 16,384, above the largest clusters measured
	// (10,000 members).
	MaxMembers int
	// MaxStreamBytes bounds one message on a stream (a push-pull, a TCP
	// ping), requests and replies alike, their envelope (label,
	// encryption) included; a peer announcing more is refused
	// before anything is read, and counted (StreamsTooLarge).
	// 0 derives it from MaxMembers, MaxMetaSize and MaxStateSize: room for
	// a push-pull of MaxMembers members, each with MaxMetaSize bytes of
	// metadata and a long name, and the application's state (about 14 MiB
	// at the LAN defaults), at most 32 MiB. The
	// inbound requests being read or handled at once may hold
	// 4·MaxStreamBytes together, and those of one source network (its /24,
	// or /64 for IPv6) half of that, counted as their bytes arrive, not as
	// their length headers announce them; a stream whose bytes would take
	// either over is refused (StreamsOverBudget).
	MaxStreamBytes int

	// Label names the cluster. It travels in every packet and stream, and
	// is bound into the AES-GCM associated data when encryption is on, so
	// members of two clusters that share a network (or a key) never merge:
	// traffic with another label, or none, is dropped and counted. At most
	// 255 bytes. Default "": no label (and no label accepted).
	Label string

	// Admission holds the application's say over who joins and who keeps
	// a name.
	Admission AdmissionConfig

	// Partition configures the partition alarm (EventPartitioned).
	Partition PartitionConfig
	// SelfEvents adds events about this member itself: EventSuspect when
	// another member suspected it, EventLeave (State StateDead) when one
	// declared it dead, each with the incarnation of the claim and
	// followed by the EventAlive of its refutation. An application can
	// tell from them that its peers saw it as failing (a pause, a slow
	// network). Default false.
	SelfEvents bool
	// MaxMessageSize bounds a SendReliable payload, sent and received:
	// a member refuses a larger one before reading it whole. 0 means 1
	// MiB, or MaxStreamBytes less 1 KiB if that is smaller; more than
	// that is refused by Validate.
	MaxMessageSize int
	// Broadcasts configures the applications' broadcasts (Broadcast):
	// their queue, and the epidemic broadcast trees they travel on.
	Broadcasts BroadcastConfig
	// Pings, if set, attaches the application's payload to this member's
	// acks and hands it the payloads peers attach to theirs, with each
	// round trip (memberlist's PingDelegate; network coordinates).
	Pings PingDelegate
	// Observer, if set, receives the protocol's measurements as they are
	// taken: round trips, and how long each suspicion of a peer lasted
	// and how it ended (package swimprom turns them into Prometheus
	// histograms). Its methods are called with the member's state
	// locked, and must be quick and never block (see Observer). Nil
	// means none, at no cost.
	Observer Observer
	// MaxStateSize bounds the application state of one push-pull, sent and
	// received: a LocalState over it is not sent, a peer's is not merged;
	// both are counted and logged. 0 means 1 MiB, or half of
	// MaxStreamBytes when that is set and smaller. A MaxStreamBytes of 0
	// makes room for it.
	MaxStateSize int

	// Claims configures signed claims (docs/security.md): this member's
	// identity, whether claims are signed, and the cluster's authorities.
	Claims ClaimsConfig
	// The fields above are what the protocol reads: a Machine driven by
	// any driver uses them (some the runtime reads too). The fields below
	// are the runtime's alone: Memberlist reads them, and a Machine
	// driven directly ignores them. TestConfigSeparatesCoreFromRuntime
	// keeps this line where the code puts it.

	// BindAddr is the IP address to listen on (UDP and TCP share one port).
	// Default "0.0.0.0".
	BindAddr string
	// BindPort is the port to listen on; 0 picks a free port, which
	// LocalMember then reports. Default 7946.
	BindPort int
	// AdvertiseAddr and AdvertisePort are the address peers use to reach
	// this member when it differs from the bind address (NAT, 0.0.0.0).
	// Empty and 0 mean: derive from the bound socket.
	AdvertiseAddr string
	AdvertisePort int

	// Transport carries packets and streams. Nil means a NetTransport on
	// BindAddr:BindPort.
	Transport Transport

	// MaxConcurrentStreams bounds inbound and outbound TCP exchanges in
	// flight; more are refused (and counted). Default 32.
	MaxConcurrentStreams int

	// EventBuffer bounds the events waiting for the Events handler; past it
	// events are dropped, counted and logged. Default 1024.
	EventBuffer int

	// MaxStreamsPerSource is the share of the MaxConcurrentStreams inbound
	// stream slots that each source is sure to get however many streams
	// other sources open (while no more than
	// MaxConcurrentStreams/MaxStreamsPerSource sources want slots at
	// once), so that no single host, nor one with many addresses of one
	// network, can take every slot and keep the others out. A source is a
	// network: the /24 of an IPv4 address (IPv4-mapped IPv6 ones taken as
	// IPv4), the /64 of an IPv6 one; ports do not matter. The rule:
	//
	//   - While a slot is free, any stream takes it, whatever its address:
	//     many members on one host (all one address, as in tests and
	//     demos on 127.0.0.1), or a join storm through one seed, are never
	//     refused for their address.
	//   - Once every slot is taken, a stream from an address holding fewer
	//     than MaxStreamsPerSource streams takes the slot of the oldest
	//     stream of the address holding the most, if that address holds
	//     more than MaxStreamsPerSource; that stream is closed.
	//   - Once every slot is taken, a stream from an address already
	//     holding MaxStreamsPerSource or more is refused.
	//
	// Refused and closed streams are counted (StreamsRefusedPerSource) and
	// logged. A stream refused because every address holds no more than
	// its share counts as StreamsRefused. Default 4.
	MaxStreamsPerSource int

	// Security configures encryption and who may connect: the keyring,
	// plaintext during a rollout, allowed networks and TLS for streams.
	Security SecurityConfig

	// Events receives membership events on a goroutine of its own, in order.
	// Nil discards them.
	Events EventHandler
	// Messages receives what other members send this one with
	// SendBestEffort, SendReliable and Broadcast, on the goroutine that
	// runs Events, in order with the events: a member's join is seen
	// before its first message. Nil drops them, counted
	// (MemberlistStats.MessagesUnhandled).
	Messages MessageHandler
	// MessageBuffer bounds the messages waiting for the Messages handler;
	// past it they are dropped, counted (MessagesDropped) and logged.
	// Default 1024.
	MessageBuffer int
	// MessageBufferBytes bounds the same messages by their payloads'
	// bytes, so that a handler that falls behind on large messages costs
	// at most this much memory. Past it a best-effort message or a
	// broadcast is dropped as past MessageBuffer, and a reliable one is
	// refused before it is acknowledged, so that its SendReliable fails
	// and the sender can try again. 0 means 32 MiB, or MaxMessageSize if
	// that is larger, so that one message of any allowed size fits.
	MessageBufferBytes int
	// State, if set, exchanges the application's state with peers: its
	// LocalState travels with every push-pull this member sends (joins,
	// the periodic anti-entropy exchange and its replies), and what peers
	// send is handed to its MergeRemoteState (memberlist's LocalState and
	// MergeRemoteState). Both are called outside every lock, on the
	// goroutine of the exchange. Releases that know no application state
	// skip it.
	State StateDelegate
	// Logger receives diagnostics. Nil means zap.NewNop().
	Logger *zap.Logger
}

// DetectionConfig holds the refinements of SWIM's failure detector from
// Lifeguard (Dadgar et al., 2018) and Apache Geode's health monitor. Each
// is on in every profile; turning one off is for comparisons and for
// networks that need it (Detection.TCPChecks where TCP is firewalled). Part of
// Config.
type DetectionConfig struct {
	// Nacks makes a ping-req relay answer with a nack when the target stays
	// silent, so the requester can tell "the target is gone" from "my
	// peers cannot hear me" (Lifeguard §IV-A). Default true.
	Nacks bool
	// AnyTrafficHeartbeat counts any packet from a member as a sign of life
	// (Apache Geode): a probe whose ack was lost succeeds if the target was
	// heard from meanwhile, and a suspicion is not turned into a death while
	// the suspect is still heard from. Default true.
	AnyTrafficHeartbeat bool
	// TCPCheckFilter, if set, says which members may be checked over TCP
	// (for example those known to firewall it); nil allows all.
	TCPCheckFilter func(name string) bool
	// BuddyPing makes a ping to a member held suspect carry the suspicion,
	// so the member refutes at once (Lifeguard §IV-C), and has a member
	// that accuses another send it one such ping as it does. Default true.
	BuddyPing bool
	// FinalCheck makes a member ping a suspect once more, carrying the
	// suspicion, before declaring it dead (Apache Geode's final check; the
	// ping is repeated halfway through if unanswered, so one lost packet
	// does not kill); an answer restarts the suspicion instead, and the
	// refutation the ping provokes normally ends it. It adds at most
	// ProbeTimeout to detection (scaled by local health, as a probe's
	// timeout is, so a member that has been failing to keep up waits
	// longer) and turns a refutation lost to packet loss into no false
	// death.
	// Default true.
	FinalCheck bool
	// TCPChecks adds TCP pings: in parallel with the indirect probes, and
	// in the final check. They help on networks that drop UDP, or when the
	// one packet that matters is lost; the reply carries the member's
	// current incarnation. Default true.
	TCPChecks bool
}

// BroadcastConfig configures the applications' broadcasts: the queue
// of those waiting to be sent or relayed, and the epidemic broadcast
// trees (Plumtree) they travel on. Part of Config.
type BroadcastConfig struct {
	// Trees sends the applications' broadcasts along epidemic
	// broadcast trees (tree.go) to the members whose release has them
	// (wire.ProtocolTree), each broadcast received about once per member
	// instead of gossiped about RetransmitMult·log N times; members of
	// older releases still get them by gossip. False: gossip to every
	// member, and this member announces the protocol before trees, so
	// that its peers gossip to it too. Default true in every profile.
	Trees bool
	// FlushInterval is how long broadcasts wait on a tree link to be
	// sent together in one packet: each hop adds up to this much delay.
	// 0 means 5 ms.
	FlushInterval time.Duration
	// GraftTimeout is how long a member announced a broadcast waits
	// for it before asking (grafting) the announcer: longer than a
	// broadcast takes along the tree, or members graft for nothing. 0
	// means half of ProbeTimeout, at least 100 ms.
	GraftTimeout time.Duration
	// RetainBytes bounds the broadcasts a member keeps, for 30 s
	// at most, to answer grafts. 0 means 8 MiB.
	RetainBytes int
	// QueueLimit and QueueBytes bound the queue of
	// applications' broadcasts waiting to be sent or relayed, in count and
	// in bytes; past either, those sent most often are dropped, counted
	// (Dropped), and their origin's Broadcast learns it
	// (ErrBroadcastDropped). Defaults 1024 and 1 MiB.
	QueueLimit int
	QueueBytes int
}

// ClaimsConfig configures signed claims: each member signs what only it
// may say about itself, and its accusations (docs/security.md). Part of
// Config.
type ClaimsConfig struct {
	// Identity is this member's Ed25519 private key, with which it signs
	// its own claims (its alive, its leave, its refutations) and its
	// accusations, once Signatures is on (signatures.go). Memberlist
	// generates one per process when it is nil; the agent can load one
	// from a file (-identity), so that the name keeps its key across
	// restarts. A Machine with Claims.Signatures on needs one.
	Identity ed25519.PrivateKey
	// Signatures says whether claims are signed; see SignatureMode. The
	// zero value, SignaturesOff, signs and checks nothing.
	Signatures SignatureMode
	// Claims.TrustedRoots, if set, are the public keys of the cluster's
	// authorities: with Claims.Signatures on, a name is held only under a key a
	// certificate of one of them binds it to (certificate.New), and this
	// member needs one of its own (Certificate). Empty: a name is bound to
	// the first key it is seen with (trust on first use).
	TrustedRoots []ed25519.PublicKey
	// Certificate is this member's certificate from one of Claims.TrustedRoots,
	// for its Name and the public key of Identity; carried in its alive
	// claims. Required when Claims.TrustedRoots is set and Signatures is on; New
	// refuses one that has expired or that no trusted root signed.
	Certificate []byte
}

// AdmissionConfig holds the application's hooks into admission: which
// members enter the table, which joins are merged, which changes are
// taken, and which of two processes keeps a name. Part of Config.
type AdmissionConfig struct {
	// Admit, if set, is asked about each member never seen before, as it
	// announced itself (name, address, metadata, versions), before it
	// enters this member's table: an error refuses it, counted
	// (Stats.Admission.Refused), and news of it is refused again each
	// time it comes. Use it to keep out members of a wrong version or with
	// wrong metadata (memberlist's AliveDelegate). It runs inside the
	// protocol, with the member's state locked: it must be quick, must not
	// block and must not call Memberlist methods.
	Admit func(Member) error
	// Join, if set, is asked about the whole view a join brings
	// before it is merged: the seed's answer to this member's Join, and a
	// joiner's request to this member (memberlist's MergeDelegate). An
	// error refuses the join, counted (Stats.Admission.JoinsRefused): on the
	// joining side Join fails for that seed, on the seed's side the
	// joiner's does. The same rules as Admit apply.
	Join func(peers []Member) error
	// Updates has Admit also asked about news that changes a member
	// already in the table: a new address, metadata or versions, a new
	// life (a restart), and the return of a member a refusal took out. A
	// refusal takes the member out of this member's view as a refusal at
	// first sight keeps it out: EventLeave with StateDead, here only (it
	// is neither gossiped nor sent in push-pulls, so that one member's
	// policy never becomes another's suspicion), and its later news is
	// asked about again. Default false: Admit sees each member once.
	Updates bool
	// NameConflict, if set, decides which of two live processes under
	// this member's name keeps it: called in this process, with this
	// member and the other process (its address and life), when the other
	// answered a ping in the name. Return true to yield: this process
	// leaves, and a Join in progress returns ErrNameConflict. Both
	// processes must decide alike (the same function of the two Members,
	// for example a version in their metadata), or both keep the name
	// (each member then holds the one it had) or both leave. Default: the
	// later started process yields (docs/lives.md). The same rules as
	// Admit apply.
	NameConflict func(self, other Member) bool
}

// PartitionConfig configures the partition alarm: EventPartitioned when
// the live members fall fast below a share of the most seen (Apache
// Geode's quorum-loss check). Part of Config.
type PartitionConfig struct {
	// Share, if above 0, raises EventPartitioned when the live
	// members this one sees fall below this share of the most it saw
	// within Window, and EventPartitionHealed when they are back
	// to that share of the count before the fall (Apache Geode's
	// quorum-loss check). 0.5 suits a service that must stop serving on
	// the minority side of a partition. Graceful leaves do not count as
	// losses. Default 0: off.
	Share float64
	// Window is how quickly the fall must happen to raise the
	// alarm: a cluster shrinking more slowly raises nothing. Default 30 s,
	// a few suspicion timeouts.
	Window time.Duration
}

// SecurityConfig configures what Memberlist seals and whom it lets in:
// the keyring of AES-GCM keys, plaintext during a rollout, the networks
// allowed to connect, and TLS for streams. Part of Config.
type SecurityConfig struct {
	// Keys is the keyring: AES keys of 16, 24 or 32 bytes (AES-128, -192,
	// -256). With a key, every packet and stream is sealed with AES-GCM
	// under the first key (the primary), and anything that no installed key
	// opens, plaintext included, is dropped and counted. Later keys are
	// accepted, not used: install a new key everywhere, make it primary
	// everywhere, then remove the old one (Memberlist.InstallKey, UseKey,
	// RemoveKey), and no member ever sees a packet it cannot open. Empty:
	// no encryption.
	Keys [][]byte
	// Plaintext eases a running cluster into encryption one member at a
	// time; see PlaintextMode. The zero value, PlaintextRefuse, is the only
	// safe setting once every member holds the key: leave it there.
	Plaintext PlaintextMode
	// Security.AllowedCIDRs, if not empty, lists the networks packets and streams
	// may come from; traffic from any other source address is dropped and
	// counted before it is decoded. Empty allows every source.
	AllowedCIDRs []netip.Prefix
	// Security.StreamTLS, if set, runs every stream over TLS with this
	// configuration, as server (inbound) and client (outbound): set
	// Certificates (Validate refuses a configuration with no way to get a
	// certificate, since every member also serves), and RootCAs/ClientCAs
	// with ClientAuth for mutual authentication, as for any TLS service.
	// Dialled streams verify the peer's certificate against ServerName
	// when it is set, else against the peer's IP address. Packets are not
	// affected: use Keys for them.
	StreamTLS *tls.Config
}

// DefaultLANConfig returns settings for members on one local network
// (RTT well under 1ms, rare loss).
func DefaultLANConfig() *Config {
	host, _ := os.Hostname()
	return &Config{
		Name:                    host,
		BindAddr:                "0.0.0.0",
		BindPort:                7946,
		MaxMetaSize:             512,
		ProbeInterval:           time.Second,
		ProbeTimeout:            500 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 6,
		RetransmitMult:          4,
		GossipInterval:          200 * time.Millisecond,
		GossipNodes:             3,
		GossipToDeadTime:        30 * time.Second,
		PushPullInterval:        30 * time.Second,
		ReconnectInterval:       10 * time.Second,
		ReconnectTimeout:        6 * time.Hour,
		StreamTimeout:           10 * time.Second,
		PacketBudget:            1400,
		DeltaQueueLimit:         4096,
		MaxConcurrentStreams:    32,
		EventBuffer:             1024,
		MessageBuffer:           1024,
		Partition:               PartitionConfig{Window: 30 * time.Second},
		Broadcasts:              BroadcastConfig{QueueLimit: 1024, QueueBytes: 1 << 20, Trees: true},
		MaxMembers:              16384,
		MaxStreamsPerSource:     4,
		AlignedProbing:          true,
		PairedProbing:           true,
		PauseTolerance:          5 * time.Second,
		AwarenessMaxMultiplier:  8,
		Detection:               DetectionConfig{Nacks: true, AnyTrafficHeartbeat: true, BuddyPing: true, FinalCheck: true, TCPChecks: true},
	}
}

// DefaultConfig returns the defaults of a profile by name, "lan", "wan" or
// "local" (DefaultLANConfig, DefaultWANConfig, DefaultLocalConfig), for
// commands that take the profile as a flag; any other name is an error.
func DefaultConfig(profile string) (*Config, error) {
	switch profile {
	case "lan":
		return DefaultLANConfig(), nil
	case "wan":
		return DefaultWANConfig(), nil
	case "local":
		return DefaultLocalConfig(), nil
	}
	return nil, fmt.Errorf("%w: profile %q: want lan, wan or local", ErrInvalidConfig, profile)
}

// DefaultWANConfig returns settings for members spread across data centers
// (RTT up to a few hundred ms, more loss).
func DefaultWANConfig() *Config {
	c := DefaultLANConfig()
	c.ProbeInterval = 5 * time.Second
	c.ProbeTimeout = 3 * time.Second
	c.SuspicionMult = 6
	c.GossipInterval = 500 * time.Millisecond
	c.GossipNodes = 4
	c.GossipToDeadTime = 60 * time.Second
	c.PushPullInterval = 60 * time.Second
	c.ReconnectInterval = 30 * time.Second
	c.ReconnectTimeout = 24 * time.Hour
	c.StreamTimeout = 30 * time.Second
	c.PauseTolerance = 15 * time.Second
	return c
}

// DefaultLocalConfig returns settings for members on one host or a fast,
// reliable network: quicker detection, less tolerance.
func DefaultLocalConfig() *Config {
	c := DefaultLANConfig()
	c.BindAddr = "127.0.0.1"
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.SuspicionMult = 3
	c.GossipInterval = 100 * time.Millisecond
	c.GossipToDeadTime = 15 * time.Second
	c.PushPullInterval = 15 * time.Second
	c.ReconnectInterval = 2 * time.Second
	c.ReconnectTimeout = time.Hour
	c.StreamTimeout = 5 * time.Second
	c.PauseTolerance = 2 * time.Second
	return c
}

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("swim: invalid config: %s %s", e.Field, e.Reason)
}

// ErrInvalidConfig is matched (errors.Is) by every *ConfigError.
var ErrInvalidConfig = errors.New("swim: invalid config")

// Is makes errors.Is(err, ErrInvalidConfig) hold for every ConfigError.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Validate reports the first field that makes no sense, naming it.
func (c *Config) Validate() error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case c.Name == "":
		return bad("Name", "is empty")
	case len(c.Name) > wire.MaxNameLen:
		return bad("Name", fmt.Sprintf("is %d bytes, over %d", len(c.Name), wire.MaxNameLen))
	case !utf8.ValidString(c.Name):
		return bad("Name", "is not valid UTF-8")
	case c.BindPort < 0 || c.BindPort > 65535:
		return bad("BindPort", fmt.Sprintf("%d is not a port", c.BindPort))
	case c.AdvertisePort < 0 || c.AdvertisePort > 65535:
		return bad("AdvertisePort", fmt.Sprintf("%d is not a port", c.AdvertisePort))
	case c.MaxMetaSize < 0 || c.MaxMetaSize > wire.MaxMetaLen:
		return bad("MaxMetaSize", fmt.Sprintf("must be 0..%d, is %d", wire.MaxMetaLen, c.MaxMetaSize))
	case len(c.Meta) > c.MaxMetaSize:
		return bad("Meta", fmt.Sprintf("is %d bytes, over MaxMetaSize %d", len(c.Meta), c.MaxMetaSize))
	case c.AppVersionMin > c.AppVersionMax:
		return bad("AppVersionMin", fmt.Sprintf("is %d, over AppVersionMax %d", c.AppVersionMin, c.AppVersionMax))
	case c.ProbeInterval <= 0:
		return bad("ProbeInterval", "must be positive")
	case c.ProbeTimeout <= 0:
		return bad("ProbeTimeout", "must be positive")
	case c.ProbeTimeout >= c.ProbeInterval:
		return bad("ProbeTimeout", fmt.Sprintf("(%v) must be shorter than ProbeInterval (%v)", c.ProbeTimeout, c.ProbeInterval))
	case c.IndirectChecks < 0:
		return bad("IndirectChecks", "must not be negative")
	case c.SuspicionMult < 1:
		return bad("SuspicionMult", "must be at least 1")
	case c.SuspicionMaxTimeoutMult < 1:
		return bad("SuspicionMaxTimeoutMult", "must be at least 1")
	case c.PauseTolerance < 0:
		return bad("PauseTolerance", "must not be negative")
	case c.PauseTolerance > 0 && c.PauseTolerance < c.ProbeInterval:
		return bad("PauseTolerance", fmt.Sprintf("(%v) must be at least ProbeInterval (%v)", c.PauseTolerance, c.ProbeInterval))
	case c.AwarenessMaxMultiplier < 1:
		return bad("AwarenessMaxMultiplier", "must be at least 1")
	case c.RetransmitMult < 1:
		return bad("RetransmitMult", "must be at least 1")
	case c.GossipInterval < 0:
		return bad("GossipInterval", "must not be negative")
	case c.GossipNodes < 0:
		return bad("GossipNodes", "must not be negative")
	case c.GossipInterval > 0 && c.GossipNodes == 0:
		return bad("GossipNodes", "must be positive when GossipInterval is set")
	case c.GossipToDeadTime < 0:
		return bad("GossipToDeadTime", "must not be negative")
	case c.PushPullInterval < 0:
		return bad("PushPullInterval", "must not be negative")
	case c.ReconnectInterval < 0:
		return bad("ReconnectInterval", "must not be negative")
	case c.ReconnectTimeout < 0:
		return bad("ReconnectTimeout", "must not be negative")
	case c.StreamTimeout <= 0:
		return bad("StreamTimeout", "must be positive")
	case c.PacketBudget < 512 || c.PacketBudget > wire.MaxPacketSize:
		return bad("PacketBudget", fmt.Sprintf("must be 512..%d, is %d", wire.MaxPacketSize, c.PacketBudget))
	case c.DeltaQueueLimit < 1:
		return bad("DeltaQueueLimit", "must be at least 1")
	case c.MaxConcurrentStreams < 1:
		return bad("MaxConcurrentStreams", "must be at least 1")
	case c.EventBuffer < 1:
		return bad("EventBuffer", "must be at least 1")
	case c.MessageBuffer < 1:
		return bad("MessageBuffer", "must be at least 1")
	case c.MessageBufferBytes < 0:
		return bad("MessageBufferBytes", "must not be negative")
	case c.MessageBufferBytes > 0 && c.MessageBufferBytes < c.maxMessageSize():
		return bad("MessageBufferBytes", fmt.Sprintf("is %d, under MaxMessageSize %d: a message of the allowed size would never fit",
			c.MessageBufferBytes, c.maxMessageSize()))
	case !(c.Partition.Share >= 0 && c.Partition.Share < 1):
		return bad("Partition.Share", "must be in [0, 1)")
	case c.Partition.Share > 0 && c.Partition.Window <= 0:
		return bad("Partition.Window", "must be positive when Partition.Share is set")
	case c.Broadcasts.QueueLimit < 1:
		return bad("Broadcasts.QueueLimit", "must be at least 1")
	case c.Broadcasts.QueueBytes < c.PacketBudget:
		return bad("Broadcasts.QueueBytes", fmt.Sprintf("must hold at least one packet (PacketBudget %d)", c.PacketBudget))
	case c.MaxMessageSize < 0:
		return bad("MaxMessageSize", "must not be negative")
	case c.MaxStateSize < 0:
		return bad("MaxStateSize", "must not be negative")
	case c.MaxStateSize > c.maxStreamBytes():
		return bad("MaxStateSize", fmt.Sprintf("must fit MaxStreamBytes (%d)", c.maxStreamBytes()))
	case c.MaxMessageSize > c.maxStreamBytes()-1<<10:
		return bad("MaxMessageSize", fmt.Sprintf("must leave 1 KiB of MaxStreamBytes (%d) for framing", c.maxStreamBytes()))
	case c.MaxMembers < 2:
		return bad("MaxMembers", "must be at least 2")
	case c.MaxMembers >= wire.MaxPushPullMembers:
		// A push-pull carries the table and one tombstone.
		return bad("MaxMembers", fmt.Sprintf("must be below %d, is %d", wire.MaxPushPullMembers, c.MaxMembers))
	case c.MaxStreamBytes < 0 || c.MaxStreamBytes > wire.MaxStreamMessageSize:
		return bad("MaxStreamBytes", fmt.Sprintf("must be 0..%d, is %d", wire.MaxStreamMessageSize, c.MaxStreamBytes))
	case c.MaxStreamsPerSource < 1:
		return bad("MaxStreamsPerSource", "must be at least 1")
	case len(c.Label) > wire.MaxLabelLen:
		return bad("Label", fmt.Sprintf("is %d bytes, over %d", len(c.Label), wire.MaxLabelLen))
	case c.Security.Plaintext > PlaintextSend:
		return bad("Security.Plaintext", fmt.Sprintf("%d is not a PlaintextMode", c.Security.Plaintext))
	case c.Security.Plaintext != PlaintextRefuse && len(c.Security.Keys) == 0:
		return bad("Security.Plaintext", fmt.Sprintf("is %s without Security.Keys: there is nothing to migrate to", c.Security.Plaintext))
	}
	if err := c.validateSignatures(); err != nil {
		return err
	}
	for i, k := range c.Security.Keys {
		if err := checkKey(k); err != nil {
			return bad(fmt.Sprintf("Security.Keys[%d]", i), err.Error())
		}
	}
	for i, p := range c.Security.AllowedCIDRs {
		if !p.IsValid() {
			return bad(fmt.Sprintf("Security.AllowedCIDRs[%d]", i), "is not a valid prefix")
		}
	}
	if t := c.Security.StreamTLS; t != nil && len(t.Certificates) == 0 && t.GetCertificate == nil && t.GetConfigForClient == nil {
		// Every member answers streams as well as dialling them.
		return bad("Security.StreamTLS", "has no certificate to serve streams with (Certificates, GetCertificate or GetConfigForClient)")
	}
	if c.BindAddr != "" {
		if _, err := netip.ParseAddr(c.BindAddr); err != nil {
			return bad("BindAddr", fmt.Sprintf("%q is not an IP address", c.BindAddr))
		}
	}
	if c.AdvertiseAddr != "" {
		if _, err := netip.ParseAddr(c.AdvertiseAddr); err != nil {
			return bad("AdvertiseAddr", fmt.Sprintf("%q is not an IP address", c.AdvertiseAddr))
		}
	}
	return nil
}

// PlaintextMode says what a member that holds keys does about plaintext:
// the steps of moving a running cluster from plaintext to encryption one
// member at a time, with no member ever receiving a packet it drops.
//
//  1. On every member, one at a time: install the key with PlaintextSend
//     (it accepts both, still sends plaintext).
//  2. On every member: PlaintextAccept (it sends encrypted, which every
//     member can now open, and still accepts plaintext from those not yet
//     at this step).
//  3. On every member: PlaintextRefuse (encrypted only).
//
// Each step is a restart with the new Config, or, on a running member,
// Memberlist.SetPlaintext and InstallKey. Turning encryption off runs the
// same steps backwards.
type PlaintextMode uint8

const (
	// PlaintextRefuse: with a key, plaintext is dropped and counted and
	// everything is sent encrypted. The default, and the only setting that
	// keeps strangers out.
	PlaintextRefuse PlaintextMode = iota
	// PlaintextAccept: sends encrypted under the primary key, accepts
	// encrypted and plaintext traffic. Temporary: step 2 of the migration.
	PlaintextAccept
	// PlaintextSend: sends plaintext, accepts encrypted and plaintext
	// traffic. Temporary: step 1 of the migration, while some members have
	// no key yet.
	PlaintextSend
)

func (p PlaintextMode) String() string {
	switch p {
	case PlaintextRefuse:
		return "refuse"
	case PlaintextAccept:
		return "accept"
	case PlaintextSend:
		return "send"
	}
	return fmt.Sprintf("PlaintextMode(%d)", uint8(p))
}

// ParsePlaintextMode parses "refuse", "accept" or "send", as String prints
// them (for flags).
func ParsePlaintextMode(s string) (PlaintextMode, error) {
	for _, p := range []PlaintextMode{PlaintextRefuse, PlaintextAccept, PlaintextSend} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: plaintext mode %q: want refuse, accept or send", ErrInvalidConfig, s)
}

// checkKey reports why k cannot be an AES key, nil if it can.
func checkKey(k []byte) error {
	switch len(k) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("is %d bytes: an AES key is 16, 24 or 32", len(k))
}

// maxStreamBytes is MaxStreamBytes, or the size derived from MaxMembers
// and MaxMetaSize when it is 0: per member the largest name, address,
// incarnation and metadata with their headers.
func (c *Config) maxStreamBytes() int {
	if c.MaxStreamBytes > 0 {
		return c.MaxStreamBytes
	}
	perMember := c.MaxMetaSize + wire.MaxNameLen + wire.MaxAddrLen + 24
	return min(c.MaxMembers*perMember+64<<10+c.maxStateSize(), wire.MaxStreamMessageSize)
}

// maxStateSize is MaxStateSize with 0 resolved (see there).
func (c *Config) maxStateSize() int {
	switch {
	case c.MaxStateSize > 0:
		return c.MaxStateSize
	case c.MaxStreamBytes > 0:
		return min(1<<20, c.MaxStreamBytes/2)
	}
	return 1 << 20
}

// messageBufferBytes is MessageBufferBytes with 0 resolved (see there).
func (c *Config) messageBufferBytes() int {
	if c.MessageBufferBytes > 0 {
		return c.MessageBufferBytes
	}
	return max(32<<20, c.maxMessageSize())
}

// maxMessageSize is MaxMessageSize with 0 resolved (see there).
func (c *Config) maxMessageSize() int {
	if c.MaxMessageSize > 0 {
		return c.MaxMessageSize
	}
	return min(1<<20, c.maxStreamBytes()-1<<10)
}

// versions is what this member announces: the protocol range of this
// release and the application's range.
func (c *Config) versions() wire.Versions {
	v := wire.Versions{
		ProtocolMin: wire.ProtocolMin, ProtocolMax: wire.ProtocolMax,
		AppMin: c.AppVersionMin, AppMax: c.AppVersionMax,
	}
	if !c.Broadcasts.Trees {
		// Announce first, use after: without trees, peers must gossip
		// broadcasts to this member.
		v.ProtocolMax = wire.ProtocolTree - 1
	}
	return v
}

func (c *Config) treeFlushInterval() time.Duration {
	if c.Broadcasts.FlushInterval > 0 {
		return c.Broadcasts.FlushInterval
	}
	return 5 * time.Millisecond
}

func (c *Config) treeGraftTimeout() time.Duration {
	if c.Broadcasts.GraftTimeout > 0 {
		return c.Broadcasts.GraftTimeout
	}
	return max(c.ProbeTimeout/2, 100*time.Millisecond)
}

func (c *Config) broadcastRetainBytes() int {
	if c.Broadcasts.RetainBytes > 0 {
		return c.Broadcasts.RetainBytes
	}
	return 8 << 20
}

// validateSignatures checks the signature settings (Validate).
func (c *Config) validateSignatures() error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case c.Claims.Signatures > SignaturesRequired:
		return bad("Claims.Signatures", fmt.Sprintf("%d is not a SignatureMode", c.Claims.Signatures))
	case len(c.Claims.Identity) != 0 && len(c.Claims.Identity) != ed25519.PrivateKeySize:
		return bad("Claims.Identity", fmt.Sprintf("is %d bytes, want an Ed25519 private key (%d)", len(c.Claims.Identity), ed25519.PrivateKeySize))
	case len(c.Claims.Certificate) > wire.MaxCertLen:
		return bad("Claims.Certificate", fmt.Sprintf("is %d bytes, over %d", len(c.Claims.Certificate), wire.MaxCertLen))
	}
	for i, r := range c.Claims.TrustedRoots {
		if len(r) != ed25519.PublicKeySize {
			return bad(fmt.Sprintf("Claims.TrustedRoots[%d]", i), fmt.Sprintf("is %d bytes, want an Ed25519 public key (%d)", len(r), ed25519.PublicKeySize))
		}
	}
	if len(c.Claims.Certificate) > 0 && len(c.Claims.TrustedRoots) == 0 {
		return bad("Claims.Certificate", "is set without Claims.TrustedRoots to check it against")
	}
	return nil
}
