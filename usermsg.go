package swim

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/plumtree"
	"github.com/swim-go/swim/internal/wire"
)

// Applications' data through the cluster: direct messages to one member
// (SendBestEffort over UDP, SendReliable over a stream) and broadcasts to
// every member, piggybacked and relayed like membership deltas. All of it
// is protocol 3 (wire.ProtocolUser): it is never sent to a member that
// announced less, which could not read it.

// Message is application data another member sent this one.
type Message struct {
	Kind MessageKind
	// From is the sender's name; for a broadcast, the member that
	// broadcast it, which is not always the one it came from.
	From string
	// Key is a broadcast's key, "" if it has none.
	Key     string
	Payload []byte
}

// MessageKind says how a Message travelled.
type MessageKind uint8

// The kinds of Message.
const (
	MessageBestEffort MessageKind = iota + 1 // SendBestEffort: one UDP packet
	MessageReliable                          // SendReliable: a stream, acknowledged
	MessageBroadcast                         // Broadcast: gossip, to every member
)

func (k MessageKind) String() string {
	switch k {
	case MessageBestEffort:
		return "best-effort"
	case MessageReliable:
		return "reliable"
	case MessageBroadcast:
		return "broadcast"
	}
	return fmt.Sprintf("MessageKind(%d)", uint8(k))
}

// MessageHandler receives application messages (Config.Messages).
type MessageHandler interface {
	HandleMessage(Message)
}

// MessageFunc adapts a function to MessageHandler.
type MessageFunc func(Message)

// HandleMessage calls f(msg).
func (f MessageFunc) HandleMessage(msg Message) { f(msg) }

// Outcome is what became of a SendReliable, a Broadcast or a Ping of the
// Machine (Ready.Outcomes), under the ID the call returned: Err nil when
// the message was acknowledged, the broadcast sent as often as any delta
// is, or the ping answered; otherwise why not.
type Outcome struct {
	ID  uint64
	Err error
	RTT time.Duration // a Ping's round trip
}

// Errors of the application messages.
var (
	// ErrNoSuchMember: no live member of that name (this one excluded).
	ErrNoSuchMember = errors.New("swim: no live member of that name")
	// ErrMessageTooLarge: the message does not fit where it must travel.
	ErrMessageTooLarge = errors.New("swim: message too large")
	// ErrPeerTooOld: the member runs a release that reads no application
	// messages (it announced a protocol below 3).
	ErrPeerTooOld = errors.New("swim: member's release reads no application messages")
	// ErrBroadcastReplaced: a newer broadcast with the same key took the
	// queued one's place before it was sent as often as it would be.
	ErrBroadcastReplaced = errors.New("swim: broadcast replaced by a newer one with the same key")
	// ErrBroadcastQueueFull: this member's broadcast links are backed
	// up; the broadcast was not sent. Try again, or wait for room
	// (Memberlist.BroadcastWait).
	ErrBroadcastQueueFull = errors.New("swim: broadcast queue full")
	// ErrBroadcastDropped: the broadcast queue was over its bounds
	// (Broadcasts.QueueLimit, Broadcasts.QueueBytes) and this one, among the
	// most sent, made room.
	ErrBroadcastDropped = errors.New("swim: broadcast dropped from the full queue")
	// ErrNotAcknowledged: the receiver answered a SendReliable with
	// something other than its acknowledgement.
	ErrNotAcknowledged = errors.New("swim: message not acknowledged")
)

// SendBestEffort sends payload to the named member in one UDP packet,
// with membership deltas in the room it leaves: no acknowledgement, no
// retry. The payload must fit the packet budget with its framing; a larger
// one returns an error matching ErrMessageTooLarge.
func (m *Machine) SendBestEffort(now time.Time, to string, payload []byte) error {
	s, err := m.messageTarget(to)
	if err != nil {
		return err
	}
	msg := &wire.User{From: m.selfName, Payload: payload}
	frame, err := wire.AppendFrame(m.frameBuf[:0], msg)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMessageTooLarge, err)
	}
	m.frameBuf = frame
	if room := m.packetBudget() - wire.CompoundHeaderMax - wire.FrameOverheadMax; len(frame) > room {
		return fmt.Errorf("%w: %d bytes framed, the packet budget leaves %d", ErrMessageTooLarge, len(frame), room)
	}
	m.stats.Messages.Sent++
	m.send(m.addrOf(s), msg)
	return nil
}

// SendReliable sends payload to the named member over a stream and returns
// the ID of the exchange: its Outcome (in Ready.Outcomes) says whether the
// member acknowledged it, which it does once the message is handed to its
// driver. timeout bounds the exchange. The payload may hold up to
// Config.MaxMessageSize bytes.
func (m *Machine) SendReliable(now time.Time, to string, payload []byte, timeout time.Duration) (uint64, error) {
	if limit := m.cfg.maxMessageSize(); len(payload) > limit {
		return 0, fmt.Errorf("%w: %d bytes, over MaxMessageSize %d", ErrMessageTooLarge, len(payload), limit)
	}
	s, err := m.messageTarget(to)
	if err != nil {
		return 0, err
	}
	data, err := wire.AppendPacket(nil, &wire.User{From: m.selfName, Payload: payload})
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrMessageTooLarge, err)
	}
	m.stats.Messages.Sent++
	return m.startStream(now, m.addrOf(s), streamUser, data, timeout), nil
}

// messageTarget is the live member named to, if it reads application
// messages.
func (m *Machine) messageTarget(to string) (*memberState, error) {
	if m.self.state() != StateAlive {
		return nil, ErrLeft
	}
	s := m.lookup(to)
	if s == nil || s == m.self || !s.live() {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchMember, to)
	}
	if v := m.versionsOf(s).Effective(); v.ProtocolMax < wire.ProtocolUser {
		return nil, fmt.Errorf("%w: %q speaks protocol %d at most", ErrPeerTooOld, to, v.ProtocolMax)
	}
	return s, nil
}

// Broadcast sends payload to every other member and returns the ID under
// which its Outcome is reported: once it is pushed along this member's
// tree links (tree.go), or, while some member reads only gossip (a
// release before wire.ProtocolTree, or Broadcasts.Trees off), once it has
// been gossiped as often as any delta is; or when it was replaced or
// dropped. A non-empty key makes it replace this member's pending
// broadcast with the same key, here and in every queue it reaches: only
// the newest value of a key keeps spreading, and no member delivers an
// older value of a key after a newer one. The framed broadcast must fit
// one packet on the trees (about 1,300 bytes at the default PacketBudget)
// and half of one while gossip carries it (the application's share of the
// fair budget that piggybacked packets keep); a larger one returns an error matching
// ErrMessageTooLarge. While this member's tree links are backed up it
// returns ErrBroadcastQueueFull at once: try again later.
func (m *Machine) Broadcast(now time.Time, key string, payload []byte) (uint64, error) {
	if m.self.state() != StateAlive {
		return 0, ErrLeft
	}
	if len(key) > wire.MaxKeyLen {
		return 0, fmt.Errorf("%w: key of %d bytes, limit %d", ErrMessageTooLarge, len(key), wire.MaxKeyLen)
	}
	if m.treeBackedUp() {
		return 0, ErrBroadcastQueueFull
	}
	if m.bcastSeq == ^uint32(0) {
		// Out of sequence numbers: a new epoch, later than the last.
		m.bcastEpoch, m.bcastSeq = max(m.bcastEpoch+1, epochOf(now)), 0
	}
	msg := &wire.Broadcast{
		Origin: m.selfName, Epoch: m.bcastEpoch, Seq: m.bcastSeq + 1, Key: key, Payload: payload,
		Sent: uint64(max(now.UnixMilli(), 0)),
	}
	frame, err := wire.AppendFrame(nil, msg)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrMessageTooLarge, err)
	}
	if room := m.maxOwnBroadcastFrame(); len(frame) > room {
		return 0, fmt.Errorf("%w: %d bytes framed, a broadcast may take %d", ErrMessageTooLarge, len(frame), room)
	}
	m.bcastSeq++
	m.streamID++ // the IDs of streams and broadcasts are drawn from one counter
	id := m.streamID
	m.stats.Broadcasts.Queued++
	gossip := m.gossipsBroadcasts()
	if m.treeOn() {
		notify := id // reported by the next flush
		if gossip {
			notify = 0 // reported by the gossip queue
		}
		m.treeOriginate(now, msg, frame, notify)
	}
	if gossip {
		m.uq.queueOrdered(&queued{
			key: plumtree.Key(msg), frame: frame, proto: wire.ProtocolUser,
			epoch: msg.Epoch, seq: msg.Seq, notify: id,
		})
		m.eagerNewsQueued() // not held back by a join storm's spacing
	}
	return id, nil
}

// gossipsBroadcasts reports whether broadcasts go by gossip too: without
// trees here, or while a live member reads only gossip.
func (m *Machine) gossipsBroadcasts() bool {
	return !m.treeOn() || len(m.treeOld) > 0
}

// maxOwnBroadcastFrame is the largest broadcast frame this member may
// send now: a packet's worth on the trees alone, maxBroadcastFrame while
// gossip carries it too.
func (m *Machine) maxOwnBroadcastFrame() int {
	if m.gossipsBroadcasts() {
		return m.maxBroadcastFrame()
	}
	return m.packetBudget() - wire.CompoundHeaderMax - wire.FrameOverheadMax
}

// maxBroadcastFrame is the largest broadcast frame: half of what a packet
// of deltas alone holds, less the framing, so that one always fits the
// share the fair budget keeps for applications.
func (m *Machine) maxBroadcastFrame() int {
	return (m.packetBudget()-wire.CompoundHeaderMax)/2 - wire.FrameOverheadMax
}

// epochOf is the broadcast epoch of a Machine started at now.
func epochOf(now time.Time) uint64 { return uint64(max(now.UnixMilli(), 1)) }

// handleUser delivers a direct message that came in a packet, if its
// sender is the member it names.
func (m *Machine) handleUser(from netip.AddrPort, sender *memberState, msg *wire.User) {
	if sender == nil || m.nameOf(sender) != msg.From {
		m.stats.Messages.Refused++
		return
	}
	m.deliver(Message{Kind: MessageBestEffort, From: msg.From, Payload: msg.Payload})
}

// handleStreamUser delivers a direct message that came on a stream and
// returns the acknowledgement. The stream's source port is the dialler's,
// not its member address, so the sender is the member it names if that
// member's address is on the same host.
func (m *Machine) handleStreamUser(from netip.AddrPort, req []byte) ([]byte, error) {
	if limit := m.cfg.maxMessageSize() + wire.MaxNameLen + 16; len(req) > limit {
		m.stats.Messages.Refused++
		return nil, fmt.Errorf("%w: a message of %d bytes, over MaxMessageSize %d", ErrMessageTooLarge, len(req), m.cfg.maxMessageSize())
	}
	msgs, err := wire.DecodeStreamPacket(req)
	if err != nil {
		return nil, err
	}
	msg, ok := msgs[0].(*wire.User)
	if !ok || len(msgs) != 1 {
		return nil, fmt.Errorf("swim: a stream of application data holding %T", msgs[0])
	}
	s := m.lookup(msg.From)
	if s == nil || s == m.self || !s.live() || m.addrOf(s).Addr().Unmap() != from.Addr().Unmap() {
		m.stats.Messages.Refused++
		return nil, fmt.Errorf("swim: a message from %s in the name of %q, not a live member there", from, msg.From)
	}
	m.deliver(Message{Kind: MessageReliable, From: msg.From, Payload: msg.Payload})
	return wire.AppendPacket(nil, &wire.Ack{})
}

// userReply is the outcome of a SendReliable exchange: nil when the reply
// is the receiver's acknowledgement.
func userReply(resp []byte, err error) error {
	if err != nil {
		return err
	}
	if len(resp) > 16 {
		return fmt.Errorf("%w: a reply of %d bytes", ErrNotAcknowledged, len(resp))
	}
	msgs, err := wire.DecodePacket(resp)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotAcknowledged, err)
	}
	if _, ok := msgs[0].(*wire.Ack); !ok || len(msgs) != 1 {
		return fmt.Errorf("%w: the reply holds %T", ErrNotAcknowledged, msgs[0])
	}
	return nil
}

// handleBroadcast delivers a broadcast seen for the first time and passes
// it on: along the trees (tree.go) and, to members that read only gossip,
// as a membership delta is (SWIM §4.1). Only members relay: a broadcast
// from an address not in the table is refused. The receive rule (which
// copies are new, which keyed values stale) is the trees' (plumtree's
// Receive), kept with or without them.
func (m *Machine) handleBroadcast(now time.Time, sender *memberState, msg *wire.Broadcast) {
	if sender == nil {
		m.stats.Messages.Refused++
		return
	}
	from := m.treeFrom(sender)
	verdict := m.tree.Receive(now, from, msg)
	m.treeOutput()
	switch verdict {
	case plumtree.Refused:
		m.stats.Broadcasts.Refused++
		return
	case plumtree.Duplicate:
		m.stats.Broadcasts.Duplicate++
		return
	case plumtree.Stale:
		m.stats.Broadcasts.Stale++
		return
	case plumtree.Implausible:
		m.stats.Broadcasts.Implausible++
		return
	case plumtree.Own:
		return
	}
	m.stats.Broadcasts.Delivered++
	m.deliver(Message{Kind: MessageBroadcast, From: msg.Origin, Key: msg.Key, Payload: msg.Payload})
	m.observeBroadcastDelay(now, msg.Sent)
	frame, err := wire.AppendFrame(nil, msg)
	if err != nil {
		m.stats.EncodeErrors++
		return
	}
	m.tree.Forward(now, from, msg, frame)
	m.treeOutput()
	if m.gossipsBroadcasts() && m.uq.queueOrdered(&queued{key: plumtree.Key(msg), frame: frame, proto: wire.ProtocolUser, epoch: msg.Epoch, seq: msg.Seq}) {
		m.eagerNewsQueued()
	}
}

// deliver hands a message to the driver (Ready.Messages).
func (m *Machine) deliver(msg Message) {
	m.stats.Messages.Received++
	m.out.Messages = append(m.out.Messages, msg)
}

// StateDelegate exchanges an application's state with peers on every
// push-pull (Config.State). Memberlist calls it outside every lock, on the
// goroutine of each exchange, so possibly on several at once: it must be
// safe for concurrent use.
type StateDelegate interface {
	// LocalState returns this member's state to send; join says whether
	// the exchange is a join (this member's or the peer's).
	LocalState(join bool) []byte
	// MergeRemoteState merges a peer's state. An error is counted
	// (MemberlistStats.StateMergeErrors) and logged.
	MergeRemoteState(state []byte, join bool) error
}
