package swim

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// mtMemberV is peer i announcing the protocol range 1..maxProto.
func mtMemberV(i int, maxProto uint8) wire.MemberState {
	ms := mtMember(i, StateAlive, 1)
	ms.Versions = wire.Versions{ProtocolMin: 1, ProtocolMax: maxProto}
	return ms
}

// newUserMT is a Machine that knows p001..p003, speaking protocol 3, and
// p004, a member of a release that reads no application data.
func newUserMT(t *testing.T) *mt {
	h := newMT(t, mtConfig())
	h.join(mtMemberV(1, 3), mtMemberV(2, 3), mtMemberV(3, 3), mtMemberV(4, 2))
	return h
}

func messagesOf(p mtPkt) (users []*wire.User, bcasts []*wire.Broadcast) {
	for _, msg := range p.Msgs {
		switch msg := msg.(type) {
		case *wire.User:
			users = append(users, msg)
		case *wire.Broadcast:
			bcasts = append(bcasts, msg)
		}
	}
	return users, bcasts
}

func TestSendBestEffort(t *testing.T) {
	h := newUserMT(t)
	require.NoError(t, h.m.SendBestEffort(h.now, mtPeer(1), []byte("hello")))
	out := h.ready()
	require.Len(t, out.Packets, 1)
	require.Equal(t, mtPeerAddr(1), out.Packets[0].To)
	users, _ := messagesOf(out.Packets[0])
	require.Equal(t, []*wire.User{{From: mtSelf, Payload: []byte("hello")}}, users)

	for _, tc := range []struct {
		to      string
		payload []byte
		want    error
	}{
		{mtPeer(4), []byte("x"), ErrPeerTooOld},
		{mtPeer(9), []byte("x"), ErrNoSuchMember},
		{mtSelf, []byte("x"), ErrNoSuchMember},
		{mtPeer(1), make([]byte, h.cfg.PacketBudget), ErrMessageTooLarge},
	} {
		require.ErrorIs(t, h.m.SendBestEffort(h.now, tc.to, tc.payload), tc.want, "to %s", tc.to)
	}
	require.Empty(t, h.ready().Packets, "a refused message sends nothing")

	// The largest payload that fits is sent, and the packet stays in budget.
	room := h.m.packetBudget() - wire.CompoundHeaderMax - wire.FrameOverheadMax - 6 - len(mtSelf)
	require.NoError(t, h.m.SendBestEffort(h.now, mtPeer(2), make([]byte, room)))
	out = h.ready()
	require.Len(t, out.Packets, 1)
	require.LessOrEqual(t, out.Packets[0].Len, h.cfg.PacketBudget)
	require.Equal(t, uint64(2), h.m.Stats().Messages.Sent)
}

// A direct message is delivered only when it comes from the member it
// names: not from a stranger, not in another member's name.
func TestUserMessageReceived(t *testing.T) {
	h := newUserMT(t)
	h.feed(mtPeerAddr(1), &wire.User{From: mtPeer(1), Payload: []byte("hi")})
	h.feed(mtStranger, &wire.User{From: mtPeer(1), Payload: []byte("forged")})
	h.feed(mtPeerAddr(2), &wire.User{From: mtPeer(1), Payload: []byte("forged")})
	r := h.m.Ready()
	require.Equal(t, []Message{{Kind: MessageBestEffort, From: mtPeer(1), Payload: []byte("hi")}}, r.Messages)
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.Messages.Received)
	require.Equal(t, uint64(2), st.Messages.Refused)
}

func TestSendReliable(t *testing.T) {
	h := newUserMT(t)
	payload := bytes.Repeat([]byte{7}, 100_000) // more than a packet holds
	id, err := h.m.SendReliable(h.now, mtPeer(1), payload, time.Second)
	require.NoError(t, err)
	out := h.ready()
	require.Len(t, out.Streams, 1)
	req := out.Streams[0]
	require.Equal(t, id, req.ID)
	require.Equal(t, mtPeerAddr(1), req.To)
	msgs, err := wire.DecodeStreamPacket(req.Data)
	require.NoError(t, err)
	require.Equal(t, []wire.Message{&wire.User{From: mtSelf, Payload: payload}}, msgs)

	ack, err := wire.AppendPacket(nil, &wire.Ack{})
	require.NoError(t, err)
	require.NoError(t, h.m.HandleStreamResponse(h.now, id, ack, nil))
	require.Equal(t, []Outcome{{ID: id}}, h.m.Ready().Outcomes)

	// A failed exchange, a reply that is no acknowledgement, and an
	// exchange whose outcome never comes each end in an error outcome.
	failed, _ := h.m.SendReliable(h.now, mtPeer(2), []byte("a"), time.Second)
	wrong, _ := h.m.SendReliable(h.now, mtPeer(2), []byte("b"), time.Second)
	lost, _ := h.m.SendReliable(h.now, mtPeer(3), []byte("c"), time.Second)
	h.m.Ready()
	boom := errors.New("connection refused")
	require.ErrorIs(t, h.m.HandleStreamResponse(h.now, failed, nil, boom), boom)
	nack, _ := wire.AppendPacket(nil, &wire.Nack{})
	require.ErrorIs(t, h.m.HandleStreamResponse(h.now, wrong, nack, nil), ErrNotAcknowledged)
	h.tick(h.now.Add(streamExpiry(time.Second)))
	outcomes := map[uint64]error{}
	for _, o := range h.m.Ready().Outcomes {
		outcomes[o.ID] = o.Err
	}
	require.Len(t, outcomes, 3)
	require.ErrorIs(t, outcomes[failed], boom)
	require.ErrorIs(t, outcomes[wrong], ErrNotAcknowledged)
	require.Error(t, outcomes[lost])

	_, err = h.m.SendReliable(h.now, mtPeer(1), make([]byte, h.cfg.maxMessageSize()+1), time.Second)
	require.ErrorIs(t, err, ErrMessageTooLarge)
	_, err = h.m.SendReliable(h.now, mtPeer(4), []byte("x"), time.Second)
	require.ErrorIs(t, err, ErrPeerTooOld)
}

// A message on a stream comes from the dialler's port, not its member
// address: it is delivered when the member it names is on the same host,
// and answered with an acknowledgement.
func TestStreamUserMessageReceived(t *testing.T) {
	h := newUserMT(t)
	req, err := wire.AppendPacket(nil, &wire.User{From: mtPeer(1), Payload: []byte("big")})
	require.NoError(t, err)
	dialler := netip.AddrPortFrom(mtPeerAddr(1).Addr(), 51234)
	reply, err := h.m.HandleStream(h.now, dialler, req)
	require.NoError(t, err)
	require.NoError(t, userReply(reply, nil), "the reply is an acknowledgement")
	require.Equal(t, []Message{{Kind: MessageReliable, From: mtPeer(1), Payload: []byte("big")}}, h.m.Ready().Messages)

	// From another host in p001's name: refused, no reply.
	_, err = h.m.HandleStream(h.now, netip.AddrPortFrom(mtPeerAddr(2).Addr(), 51234), req)
	require.Error(t, err)
	require.Empty(t, h.m.Ready().Messages)

	// Over MaxMessageSize: refused before it is decoded.
	big, err := wire.AppendPacket(nil, &wire.User{From: mtPeer(1), Payload: make([]byte, h.cfg.maxMessageSize()+wire.MaxNameLen+16)})
	require.NoError(t, err)
	_, err = h.m.HandleStream(h.now, dialler, big)
	require.ErrorIs(t, err, ErrMessageTooLarge)
	require.Equal(t, uint64(2), h.m.Stats().Messages.Refused)
}

// gossipAll runs gossip rounds until the queues are empty, returning the
// packets sent and the outcomes reported.
func gossipAll(h *mt) ([]mtPkt, []Outcome) {
	var pkts []mtPkt
	var outcomes []Outcome
	for i := 0; i < 200 && h.m.bq.Len()+h.m.uq.Len() > 0; i++ {
		h.m.gossip(3)
		out := h.ready()
		pkts = append(pkts, out.Packets...)
		outcomes = append(outcomes, out.Outcomes...)
	}
	return pkts, outcomes
}

// An application's broadcast rides in gossip to the members that read it,
// never to those that do not, as often as a membership delta is sent, and
// its origin learns when that is done.
func TestBroadcastSentAndOutcome(t *testing.T) {
	h := newUserMT(t)
	at := h.now
	id, err := h.m.Broadcast(at, "", []byte("news"))
	require.NoError(t, err)
	sent := 0
	pkts, outcomes := gossipAll(h)
	for _, p := range pkts {
		_, bcasts := messagesOf(p)
		if len(bcasts) == 0 {
			continue
		}
		require.NotEqual(t, mtPeerAddr(4), p.To, "sent to a member that cannot read it")
		require.Equal(t, []*wire.Broadcast{{Origin: mtSelf, Epoch: epochOf(mtStart), Seq: 1, Payload: []byte("news"), Sent: uint64(at.UnixMilli())}}, bcasts, "sent with the time it was sent")
		sent++
	}
	require.Equal(t, h.m.retransmitLimit(), sent)
	require.Equal(t, []Outcome{{ID: id}}, outcomes)

	_, err = h.m.Broadcast(h.now, "", make([]byte, h.cfg.PacketBudget/2))
	require.ErrorIs(t, err, ErrMessageTooLarge)
	_, err = h.m.Broadcast(h.now, strings.Repeat("k", wire.MaxKeyLen+1), nil)
	require.ErrorIs(t, err, ErrMessageTooLarge)
}

// A keyed broadcast replaces the origin's older one with the same key in
// the queue, and an older one arriving late never replaces a newer one.
func TestBroadcastKeyReplaces(t *testing.T) {
	h := newUserMT(t)
	first, err := h.m.Broadcast(h.now, "k", []byte("v1"))
	require.NoError(t, err)
	second, err := h.m.Broadcast(h.now, "k", []byte("v2"))
	require.NoError(t, err)
	require.Equal(t, []Outcome{{ID: first, Err: ErrBroadcastReplaced}}, h.m.Ready().Outcomes)
	require.Equal(t, 1, h.m.uq.Len())

	// Relayed: p001's key k at seq 5, then its seq 4 arriving late. Only
	// seq 5 is delivered and passed on: a member never delivers an older
	// value of a key after a newer one.
	epoch := uint64(1_700_000_000_000)
	h.feed(mtPeerAddr(1), &wire.Broadcast{Origin: mtPeer(1), Epoch: epoch, Seq: 5, Key: "k", Payload: []byte("new")})
	h.feed(mtPeerAddr(2), &wire.Broadcast{Origin: mtPeer(1), Epoch: epoch, Seq: 4, Key: "k", Payload: []byte("old")})
	require.Equal(t, []Message{{Kind: MessageBroadcast, From: mtPeer(1), Key: "k", Payload: []byte("new")}}, h.m.Ready().Messages)
	require.Equal(t, uint64(1), h.m.Stats().Broadcasts.Stale)
	var relayed []string
	pkts, outcomes := gossipAll(h)
	for _, p := range pkts {
		_, bcasts := messagesOf(p)
		for _, b := range bcasts {
			relayed = append(relayed, fmt.Sprintf("%s/%d", b.Origin, b.Seq))
		}
	}
	require.NotContains(t, relayed, mtPeer(1)+"/4")
	require.Contains(t, relayed, mtPeer(1)+"/5")
	require.Contains(t, relayed, mtSelf+"/2")
	require.Contains(t, outcomes, Outcome{ID: second})
}

// Each broadcast is delivered once however often it arrives, only from
// members, and not back to its origin.
func TestBroadcastDeliveredOnce(t *testing.T) {
	h := newUserMT(t)
	b := &wire.Broadcast{Origin: mtPeer(1), Epoch: 10, Seq: 1, Payload: []byte("x")}
	h.feed(mtPeerAddr(1), b)
	h.feed(mtPeerAddr(2), b)
	h.feed(mtPeerAddr(3), b)
	h.feed(mtStranger, &wire.Broadcast{Origin: mtPeer(1), Epoch: 10, Seq: 2, Payload: []byte("from a stranger")})
	h.feed(mtPeerAddr(2), &wire.Broadcast{Origin: mtSelf, Epoch: epochOf(mtStart), Seq: 1})
	r := h.m.Ready()
	require.Equal(t, []Message{{Kind: MessageBroadcast, From: mtPeer(1), Payload: []byte("x")}}, r.Messages)
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.Broadcasts.Delivered)
	require.Equal(t, uint64(2), st.Broadcasts.Duplicate)
	require.Equal(t, uint64(1), st.Messages.Refused)
}

// The fair budget: with both queues full, a packet carries membership
// deltas and broadcasts, each in at least about half of the room.
func TestFairBudget(t *testing.T) {
	h := newUserMT(t)
	for i := range 300 {
		h.m.queueNews(fmt.Sprintf("x%03d", i), &wire.Alive{Name: fmt.Sprintf("x%03d", i), Addr: wire.EncodeAddr(mtPeerAddr(100 + i)), Incarnation: 1})
	}
	for i := range 300 {
		_, err := h.m.Broadcast(h.now, "", bytes.Repeat([]byte{byte(i)}, 60))
		require.NoError(t, err)
	}
	budget := h.m.packetBudget() - wire.CompoundHeaderMax
	frames := h.m.piggyback(nil, budget, mtPeerAddr(1))
	var member, user int
	for _, f := range frames {
		if wire.Type(f[0]) == wire.TypeBroadcast {
			user += len(f) + wire.FrameOverheadMax
		} else {
			member += len(f) + wire.FrameOverheadMax
		}
	}
	t.Logf("membership %d bytes, broadcasts %d bytes of %d", member, user, budget)
	require.LessOrEqual(t, member+user, budget)
	require.GreaterOrEqual(t, member, budget/2-100)
	require.GreaterOrEqual(t, user, budget/2-100)

	// Toward a member that reads no broadcasts, membership takes it all.
	frames = h.m.piggyback(nil, budget, mtPeerAddr(4))
	member = 0
	for _, f := range frames {
		require.NotEqual(t, wire.TypeBroadcast, wire.Type(f[0]))
		member += len(f) + wire.FrameOverheadMax
	}
	require.GreaterOrEqual(t, member, budget-100)
}

// The queue of broadcasts is bounded in count and in bytes; what it drops
// is counted and its origin told.
func TestUserBroadcastQueueBounds(t *testing.T) {
	cfg := mtConfig()
	cfg.Broadcasts.QueueLimit = 5
	cfg.Broadcasts.QueueBytes = 2000
	h := newMT(t, cfg)
	h.join(mtMemberV(1, 3))
	var ids []uint64
	for i := range 8 {
		id, err := h.m.Broadcast(h.now, "", bytes.Repeat([]byte{byte(i)}, 10))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.Equal(t, 5, h.m.uq.Len())
	dropped := h.m.Ready().Outcomes
	require.Len(t, dropped, 3)
	for _, o := range dropped {
		require.ErrorIs(t, o.Err, ErrBroadcastDropped)
	}
	for range 10 {
		_, err := h.m.Broadcast(h.now, "", bytes.Repeat([]byte{1}, 500))
		require.NoError(t, err)
	}
	st := h.m.Stats()
	require.LessOrEqual(t, st.Broadcasts.QueueBytes, 2000)
	require.Equal(t, uint64(8+10-st.Broadcasts.QueueLen), st.Broadcasts.Dropped)
}

// The windows of delivered broadcasts are bounded by MaxMembers origins;
// once full, one of an origin that is no member makes room, and only
// when every origin is a member is a new one refused.
func TestSeenWindowsBounded(t *testing.T) {
	cfg := mtConfig()
	cfg.MaxMembers = 8
	h := newMT(t, cfg)
	h.join(mtMemberV(1, 3), mtMemberV(2, 3))
	for i := range 20 {
		h.feed(mtPeerAddr(1), &wire.Broadcast{Origin: fmt.Sprintf("ghost-%d", i), Epoch: 1, Seq: 1})
	}
	require.LessOrEqual(t, h.m.tree.Stats().Origins, cfg.MaxMembers)
	require.Zero(t, h.m.Stats().Broadcasts.Refused, "invented origins make room for each other")
	h.feed(mtPeerAddr(1), &wire.Broadcast{Origin: mtPeer(2), Epoch: 1, Seq: 1, Payload: []byte("real")})
	require.Contains(t, h.m.Ready().Messages, Message{Kind: MessageBroadcast, From: mtPeer(2), Payload: []byte("real")})
}

// Broadcasts keep the gossip rounds on their fixed beat; membership news
// arriving between two rounds still goes out at once, as it would without
// them, so a suspicion spreads as fast with application traffic as without.
func TestMembershipNewsNotHeldBackByBroadcastBeat(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipInterval = 200 * time.Millisecond
	h := newMT(t, cfg)
	h.join(mtMemberV(1, 3), mtMemberV(2, 3), mtMemberV(3, 3))
	_, err := h.m.Broadcast(h.now, "", []byte("x"))
	require.NoError(t, err)
	h.tick(h.now) // a round of broadcasts alone
	h.ready()
	h.now = h.now.Add(50 * time.Millisecond)
	require.True(t, h.m.NextDeadline().After(h.now), "the next round is on the beat")
	h.feed(mtPeerAddr(3), &wire.Suspect{Name: mtPeer(2), Incarnation: 1, From: mtPeer(3)})
	require.False(t, h.m.NextDeadline().After(h.now), "membership news is gossiped at once")
	h.tick(h.now)
	var carried bool
	for _, p := range h.ready().Packets {
		for _, msg := range p.Msgs {
			if sp, ok := msg.(*wire.Suspect); ok && sp.Name == mtPeer(2) {
				carried = true
			}
		}
	}
	require.True(t, carried, "the round carried the suspicion")
}
