// Package wire defines swim's messages and their encoding on the network.
//
// A packet is one version byte, one type byte, then the message body encoded
// with msgpack. Bodies encode as msgpack arrays (not maps of field names):
// every byte saved in a membership delta lets more deltas ride in one UDP
// packet. A compound packet carries several messages: its body is a msgpack
// array of bin items, each item a type byte followed by a msgpack body (a
// "frame"). Streams (TCP) carry packets prefixed by a 4-byte big-endian length.
//
// On the network a packet, and each stream message inside its length
// prefix, may travel in a security envelope (envelope.go): an optional
// cluster label header (LabelMarker, a length byte, the label), then either
// the plain packet or a sealed one (a marker, a 12-byte random nonce, the
// AES-GCM ciphertext and tag), whose associated data is the label header
// and the marker. Packets and stream messages use different markers, so one
// cannot be replayed as the other, and no marker is Version, so a decoder
// that knows no envelope rejects one with ErrVersion.
package wire

// Version is the framing version written as the first byte of every packet:
// how the rest of the packet is laid out. It changes only if the framing
// itself must (a change every older member would misread), and then only
// toward peers that announced a protocol version that reads the new
// framing (Versions); a packet of any other version is rejected whole.
const Version byte = 1

// Protocol versions: what a member understands within the framing.
// Protocol 1 is the wire of members that announce no Versions: they reject
// a whole packet holding a message kind they do not know. From protocol 2
// on, a member announces its range in every Alive and push-pull entry, and
// skips (and counts) message kinds and trailing fields it does not know, so
// a new kind can travel to it in a compound with others. A feature that
// changes what goes on the wire is used toward a peer only once that peer
// has announced a protocol that includes it: announce first, use after.
const (
	// ProtocolMin is the oldest protocol this version speaks.
	ProtocolMin uint8 = 1
	// ProtocolMax is the newest protocol this version speaks.
	ProtocolMax uint8 = 8
	// ProtocolUser is the first protocol with application data: User
	// messages, Broadcasts and AckPayloads. None is sent to a peer that
	// announced less.
	ProtocolUser uint8 = 3
	// ProtocolPaired is the first protocol with paired probing:
	// Heartbeat messages, and the ViewDigest that may ride beside one. A
	// member pairs only while every live member it knows announced it.
	ProtocolPaired uint8 = 4
	// ProtocolLeaveNotice is the first protocol whose members, leaving,
	// tell each member they know of it directly and wait for its ack,
	// answering pings meanwhile: a leave reported of such a member whose
	// check goes unanswered was not its own, and counts as a death. No
	// message changes.
	ProtocolLeaveNotice uint8 = 5
	// ProtocolTree is the first protocol with epidemic broadcast trees:
	// the applications' broadcasts travel to such a member along a tree
	// (IHave, Graft and Prune; the Broadcast itself is unchanged) instead
	// of riding gossip. A member gossips them only to members that
	// announced less.
	ProtocolTree uint8 = 6
	// ProtocolLife is the first protocol whose members name their life
	// (one process's run under the name) in their own claims: Alive,
	// Suspect, Dead and push-pull entries carry a Life, and a Ping may
	// ask for one (TargetLife). Older members skip the trailing fields
	// and order claims by incarnation alone, as before.
	ProtocolLife uint8 = 7
	// ProtocolSigned is the first protocol with signed claims: an Alive
	// and an alive push-pull entry may carry their member's public key
	// and its signature (and a certificate for the name), a leave its
	// member's signature, and a Suspect, a Dead and an accusing
	// push-pull entry their accuser's, all as trailing fields that
	// older members skip.
	ProtocolSigned uint8 = 8
)

// Versions is the range of protocol versions a member speaks and the range
// of application versions its application announced (Config.AppVersionMin
// and AppVersionMax), for its own messages and metadata. The zero value is
// what a member that predates versioning announces: read it as protocol 1
// and no application range (see Effective).
type Versions struct {
	ProtocolMin, ProtocolMax uint8
	AppMin, AppMax           uint8
}

// Effective returns v with a missing protocol range read as protocol 1.
func (v Versions) Effective() Versions {
	if v.ProtocolMax == 0 {
		v.ProtocolMin, v.ProtocolMax = 1, 1
	}
	return v
}

// pack encodes v as one unsigned integer on the wire, the last field of an
// Alive and of a push-pull entry: the protocol range in the low byte, a
// nibble each (MaxProtocol bounds them), then the application's range, so
// that a member announcing no application range costs one byte.
func (v Versions) pack() uint64 {
	return uint64(v.ProtocolMin&0xf)<<4 | uint64(v.ProtocolMax&0xf) | uint64(v.AppMin)<<8 | uint64(v.AppMax)<<16
}

func unpackVersions(u uint64) Versions {
	return Versions{ProtocolMin: uint8(u>>4) & 0xf, ProtocolMax: uint8(u) & 0xf, AppMin: uint8(u >> 8), AppMax: uint8(u >> 16)}
}

// MaxProtocol bounds the protocol versions Versions can carry; past it, a
// new framing Version would be needed.
const MaxProtocol = 15

// Type identifies a message.
type Type uint8

// Message types. Values are part of the wire format: never renumber.
const (
	TypePing     Type = 1
	TypePingReq  Type = 2
	TypeAck      Type = 3
	TypeNack     Type = 4
	TypeAlive    Type = 5
	TypeSuspect  Type = 6
	TypeDead     Type = 7
	TypePushPull Type = 8
	TypeCompound Type = 9
	// From ProtocolUser on.
	TypeUser       Type = 10
	TypeBroadcast  Type = 11
	TypeAckPayload Type = 12
	// From ProtocolPaired on.
	TypeHeartbeat  Type = 13
	TypeViewDigest Type = 14
	// From ProtocolTree on.
	TypeIHave Type = 15
	TypeGraft Type = 16
	TypePrune Type = 17
	// From ProtocolSigned on.
	TypeRefusal Type = 18

	// typeLast is the highest type this version knows.
	typeLast = TypeRefusal
)

// Limits enforced by every decoder.
const (
	// MaxPacketSize bounds a UDP packet (the largest IPv4 UDP payload).
	MaxPacketSize = 65507
	// MaxStreamMessageSize bounds one message on a stream (a push-pull of
	// tens of thousands of members fits).
	MaxStreamMessageSize = 32 << 20
	// MaxCompoundParts bounds the messages in one compound packet.
	MaxCompoundParts = 255
	// MaxNameLen bounds a member name.
	MaxNameLen = 255
	// MaxMetaLen bounds member metadata on the wire (configs may set less).
	MaxMetaLen = 64 << 10
	// MaxPushPullMembers bounds the member states in one push-pull.
	MaxPushPullMembers = 1 << 20
	// MaxLabelLen bounds a cluster label.
	MaxLabelLen = 255
	// MaxKeyLen bounds a Broadcast's key.
	MaxKeyLen = 255
	// MaxTreeIDs bounds the broadcast identifiers in one IHave or Graft.
	MaxTreeIDs = 1024
	// MaxGraftOrigins bounds the origins named in one Graft.
	MaxGraftOrigins = 64
	// KeyLen and SigLen are the sizes of an Ed25519 public key and
	// signature; a Key or Sig field holds one or nothing.
	KeyLen = 32
	SigLen = 64
	// MaxCertLen bounds a member certificate.
	MaxCertLen = 512
)

// Message is implemented by every message type.
type Message interface {
	Type() Type
}

// Ping asks Target to answer with an Ack carrying Seq (SWIM §3.1).
type Ping struct {
	Seq    uint32
	Target string // name the sender expects to answer; a different member at that address stays silent
	From   string // name of the sender
	// TargetLife, when not 0, is the life of Target the sender expects
	// to answer: another life of that name stays silent. Written only
	// when not 0 (a probe takes any life), as a fourth field.
	TargetLife uint64
}

// PingReq asks the receiver to ping Target on the sender's behalf and relay
// the ack (SWIM §3.1 indirect probe).
type PingReq struct {
	Seq        uint32 // the requester's sequence number, echoed in the relayed Ack or Nack
	Target     string
	TargetAddr []byte // netip.AddrPort binary form, see EncodeAddr
	From       string
}

// Ack answers a Ping or relays an indirect probe's success.
type Ack struct {
	Seq uint32
}

// Nack tells a ping-req requester that the relay could not reach the target
// in time (Lifeguard §IV-A).
type Nack struct {
	Seq uint32
}

// Alive announces a member at an incarnation, with its address and metadata.
type Alive struct {
	Name        string
	Addr        []byte
	Incarnation uint64
	Meta        []byte
	// Versions is what the member speaks: zero from a member that
	// predates versioning, which neither sends nor reads the field.
	Versions Versions
	// Life identifies the member's process run under the name (0: not
	// said, from a member before ProtocolLife or relayed through one).
	Life uint64
	// Key is the member's Ed25519 public key and Sig its signature of
	// the claim (ProtocolSigned; empty when unsigned); Cert, when the
	// cluster has an authority, is the certificate binding the name to
	// Key. All three are written only when Key is set.
	Key, Sig, Cert []byte
}

// Suspect says From suspects Name at Incarnation (SWIM §4.2).
type Suspect struct {
	Name        string
	Incarnation uint64
	From        string
	// Silence is how long, in milliseconds, the suspect had been silent
	// when this was sent: the age of the suspicion's anchor (the start of
	// the probe that failed). Receivers anchor their own timers at the same
	// moment, so every member decides at about the same time. Zero means:
	// anchor on arrival (and is what a peer that predates the field sends,
	// by omitting it).
	Silence uint32
	// Life is the life of Name accused (0: not said).
	Life uint64
	// Sig is From's signature of the accusation (ProtocolSigned; written
	// only when set). Silence is not signed: every relay restates it.
	Sig []byte
}

// Dead says From declared Name dead at Incarnation; Left marks a graceful
// leave announced by the member itself.
type Dead struct {
	Name        string
	Incarnation uint64
	From        string
	Left        bool
	Life        uint64 // the life of Name that died or left (0: not said)
	// Sig is From's signature (ProtocolSigned; written only when set):
	// of its accusation, or, for a leave, of the member's own word.
	Sig []byte
}

// MemberState is one member's full state in a push-pull exchange.
type MemberState struct {
	Name        string
	Addr        []byte
	Incarnation uint64
	State       uint8 // 0 alive, 1 suspect, 2 dead, 3 left
	Meta        []byte
	Versions    Versions // zero when not known
	Life        uint64   // zero when not known
	// Key, Sig and Cert are as in Alive for an alive entry; a left
	// entry carries the member's signature of its leave, a suspect or
	// dead one the sender's signature of its accusation, and no Key
	// (ProtocolSigned; written only when Key or Sig is set).
	Key, Sig, Cert []byte
}

// PushPull carries the sender's whole membership view (anti-entropy and join).
type PushPull struct {
	From    string
	Join    bool
	Members []MemberState
}

// User carries an application's message to one member: alone or with
// deltas in a UDP packet, or alone on a stream (ProtocolUser).
type User struct {
	From    string // the sender's name, checked against where it came from
	Payload []byte
}

// Broadcast carries an application's message to every member, piggybacked
// and relayed like a membership delta (ProtocolUser). Origin, Epoch and
// Seq identify it, so that each member delivers it once however often it
// arrives: Epoch is when the origin's Machine started (milliseconds since
// the Unix epoch) and tells a restarted origin from its former self, Seq
// counts the origin's broadcasts within the epoch. A Key replaces, in
// every queue it reaches, the origin's older broadcast with the same key.
// Sent is when the origin sent it, on the origin's clock (milliseconds
// since the Unix epoch; 0 from a release that did not say), for the
// receivers' measure of the delivery delay. Older releases read the
// first five fields and skip it.
type Broadcast struct {
	Origin  string
	Epoch   uint64
	Seq     uint32
	Key     string
	Payload []byte
	Sent    uint64
}

// AckPayload rides with the Ack of the same Seq, in one packet: what the
// acking member's application attaches to its acks (ProtocolUser), such
// as network coordinates.
type AckPayload struct {
	Seq     uint32
	Payload []byte
}

// Heartbeat is the one packet a member sends its partner of a paired round
// instead of a ping: it asks for no answer, because the partner's own
// Heartbeat of the round answers it. Any packet is a sign of life (Apache
// Geode), so one packet each way checks both members.
type Heartbeat struct {
	From string // name of the sender
}

// ViewDigest summarises the sender's view of the live members (alive or
// suspect, itself included), so that two partners can tell in one packet
// whether their views differ: the number of them, and the XOR over them of
// a hash of each name (the low 32 bits of its FNV-1a). Views that differ
// always differ in Live or, but for a hash collision, in Digest.
type ViewDigest struct {
	Live   uint32
	Digest uint32
}

// IHave announces broadcasts the sender holds, by identifier, to a member
// it does not push them to (a lazy link of the broadcast tree, Plumtree
// §3.1): a member that does not receive one of them soon after grafts the
// sender. An identifier is a 64-bit digest of the broadcast's origin,
// epoch and sequence number (swim's TreeID).
type IHave struct {
	IDs []uint64
}

// Graft asks the receiver to push broadcasts to the sender from now on
// (its link becomes eager) and to send the broadcasts of IDs it holds
// (Plumtree §3.2). Origins names trees the link joins without a broadcast
// to fetch: a member whose neighbor on those trees is suspected asks its
// other neighbors to carry them ("" is the tree shared by origins without
// one of their own). Written as msgpack nil when empty; a Graft of an
// earlier form has no second field.
type Graft struct {
	IDs     []uint64
	Origins []string
}

// Refusal answers a join on its stream, in place of the push-pull, when
// the seed refuses it, saying why (a certificate expired, an application's
// Admission.Join), so that the joiner's Join fails with the reason rather than
// a closed stream (ProtocolSigned; sent on streams only).
type Refusal struct {
	Reason string
}

// MaxRefusalLen bounds a Refusal's reason.
const MaxRefusalLen = 255

// Prune tells the receiver that the sender got a broadcast of Origin from
// it that it already had: the link leaves the tree the broadcast travelled
// along and carries that tree's announcements only (Plumtree §3.1). The
// tree is Origin's own, or, when Origin is empty, the tree shared by the
// origins without one of their own on the link.
type Prune struct {
	Origin string
}

// Unknown stands for a message of a kind this version does not know, sent
// by a newer peer: DecodePacket returns it in the message's place instead of
// rejecting the packet, and the receiver skips it (and counts it).
type Unknown struct {
	Kind Type
}

// Compound carries several frames (type byte + msgpack body) in one packet.
type Compound struct {
	Frames [][]byte
}

func (*Ping) Type() Type       { return TypePing }
func (*PingReq) Type() Type    { return TypePingReq }
func (*Ack) Type() Type        { return TypeAck }
func (*Nack) Type() Type       { return TypeNack }
func (*Alive) Type() Type      { return TypeAlive }
func (*Suspect) Type() Type    { return TypeSuspect }
func (*Dead) Type() Type       { return TypeDead }
func (*PushPull) Type() Type   { return TypePushPull }
func (*Compound) Type() Type   { return TypeCompound }
func (*User) Type() Type       { return TypeUser }
func (*Broadcast) Type() Type  { return TypeBroadcast }
func (*AckPayload) Type() Type { return TypeAckPayload }
func (*Heartbeat) Type() Type  { return TypeHeartbeat }
func (*ViewDigest) Type() Type { return TypeViewDigest }
func (*IHave) Type() Type      { return TypeIHave }
func (*Graft) Type() Type      { return TypeGraft }
func (*Prune) Type() Type      { return TypePrune }
func (*Refusal) Type() Type    { return TypeRefusal }
func (u *Unknown) Type() Type  { return u.Kind }
