package swim

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Ping sends a plain ping and reports the round trip when the member
// answers from its own address; an ack from elsewhere does not count, and
// no answer in time is ErrPingTimeout. Each answer is a sample of the
// smoothed round trip.
func TestPingMachine(t *testing.T) {
	h := newUserMT(t)
	id, err := h.m.Ping(h.now, mtPeer(1), time.Second)
	require.NoError(t, err)
	pings, _ := h.ready().pings()
	require.Len(t, pings, 1)
	require.Equal(t, mtPeer(1), pings[0].Target)
	seq := pings[0].Seq

	h.now = h.now.Add(3 * time.Millisecond)
	h.feed(mtPeerAddr(2), &wire.Ack{Seq: seq})
	require.Empty(t, h.ready().Outcomes, "an ack from another address")
	h.now = h.now.Add(1 * time.Millisecond)
	h.feed(mtPeerAddr(1), &wire.Ack{Seq: seq})
	require.Equal(t, []Outcome{{ID: id, RTT: 4 * time.Millisecond}}, h.ready().Outcomes)
	rtt, ok := h.m.RTT(mtPeer(1))
	require.True(t, ok)
	require.Equal(t, 4*time.Millisecond, rtt)

	// A second sample moves the smoothed value an eighth of the way.
	_, err = h.m.Ping(h.now, mtPeer(1), time.Second)
	require.NoError(t, err)
	pings, _ = h.ready().pings()
	h.now = h.now.Add(12 * time.Millisecond)
	h.feed(mtPeerAddr(1), &wire.Ack{Seq: pings[0].Seq})
	rtt, _ = h.m.RTT(mtPeer(1))
	require.Equal(t, 5*time.Millisecond, rtt)

	lost, err := h.m.Ping(h.now, mtPeer(2), time.Second)
	require.NoError(t, err)
	h.ready()
	h.tick(h.now.Add(time.Second))
	require.Equal(t, []Outcome{{ID: lost, Err: ErrPingTimeout}}, h.ready().Outcomes)
	_, ok = h.m.RTT(mtPeer(2))
	require.False(t, ok)

	_, err = h.m.Ping(h.now, "nobody", time.Second)
	require.ErrorIs(t, err, ErrNoSuchMember)
}

// A direct probe's ack is a round-trip sample too.
func TestProbeAckSamplesRTT(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(1, 1)
	ping, pkt, _ := h.firstProbe()
	h.now = pkt.At.Add(2 * time.Millisecond)
	h.feed(pkt.To, &wire.Ack{Seq: ping.Seq})
	rtt, ok := h.m.RTT(ping.Target)
	require.True(t, ok)
	require.Equal(t, 2*time.Millisecond, rtt)
}

func TestPingOverSockets(t *testing.T) {
	ms := startCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	rtt, err := ms[0].Ping(ctx, "node-1")
	require.NoError(t, err)
	require.Positive(t, rtt)
	got, ok := ms[0].RTT("node-1")
	require.True(t, ok)
	require.Positive(t, got)
	_, err = ms[0].Ping(ctx, "nobody")
	require.ErrorIs(t, err, ErrNoSuchMember)

	mb, ok := ms[0].Member("node-1")
	require.True(t, ok)
	require.Equal(t, StateAlive, mb.State)
	_, ok = ms[0].Member("nobody")
	require.False(t, ok)
}

// A suspect member that refutes from a new address (restarted on another
// port) is reported alive, and the address change as an update.
func TestRefutationFromNewAddressIsAnUpdate(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(2, 1)
	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	h.ready()
	moved := netip.AddrPortFrom(mtPeerAddr(1).Addr(), 9999)
	h.feed(moved, &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(moved), Incarnation: 2})
	// The move is checked (moves.go): the new address answers, the old
	// one (the process that was suspected) stays silent.
	out := h.run(h.now.Add(h.cfg.ProbeTimeout), map[netip.AddrPort]bool{mtPeerAddr(1): true})
	evs := out.eventsAbout(mtPeer(1))
	require.Len(t, evs, 2)
	require.Equal(t, EventAlive, evs[0].Kind)
	require.Equal(t, EventUpdate, evs[1].Kind)
	require.Equal(t, moved, evs[1].Member.Addr)
}

// coords is a PingDelegate that attaches its name and records the peers'.
type coords struct {
	mu   sync.Mutex
	mine []byte
	got  map[string][]byte
	rtts map[string]time.Duration
}

func (c *coords) AckPayload() []byte { return c.mine }

func (c *coords) NotifyPingComplete(from Member, rtt time.Duration, payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[from.Name] = payload
	c.rtts[from.Name] = rtt
}

// An ack to a member that reads payloads carries the application's; one
// to an older member does not; the prober's driver gets it with the round
// trip.
func TestAckPayloadMachine(t *testing.T) {
	cfg := mtConfig()
	cfg.Pings = &coords{mine: []byte("xyz")}
	h := newMT(t, cfg)
	h.join(mtMemberV(1, 3), mtMemberV(2, 2))
	h.feed(mtPeerAddr(1), &wire.Ping{Seq: 7, Target: mtSelf, From: mtPeer(1)})
	h.feed(mtPeerAddr(2), &wire.Ping{Seq: 8, Target: mtSelf, From: mtPeer(2)})
	out := h.ready()
	require.Len(t, out.Packets, 2)
	for _, p := range out.Packets {
		var payload *wire.AckPayload
		for _, msg := range p.Msgs {
			if ap, ok := msg.(*wire.AckPayload); ok {
				payload = ap
			}
		}
		if p.To == mtPeerAddr(1) {
			require.Equal(t, &wire.AckPayload{Seq: 7, Payload: []byte("xyz")}, payload)
		} else {
			require.Nil(t, payload, "to a member of protocol 2")
		}
	}

	// The prober's side: a direct probe answered with a payload.
	ping, pkt, _ := h.firstProbe()
	h.now = pkt.At.Add(3 * time.Millisecond)
	require.NoError(t, h.m.HandlePacket(h.now, pkt.To, mtPacket(t, &wire.Ack{Seq: ping.Seq}, &wire.AckPayload{Seq: ping.Seq, Payload: []byte("peer")})))
	acks := h.m.Ready().Acks
	require.Len(t, acks, 1)
	require.Equal(t, ping.Target, acks[0].From.Name)
	require.Equal(t, 3*time.Millisecond, acks[0].RTT)
	require.Equal(t, []byte("peer"), acks[0].Payload)
}

func TestAckPayloadOverSockets(t *testing.T) {
	cs := []*coords{}
	ms := startClusterWith(t, 2, func(i int, c *Config) {
		co := &coords{mine: []byte(fmt.Sprintf("coord-%d", i)), got: map[string][]byte{}, rtts: map[string]time.Duration{}}
		cs = append(cs, co)
		c.Pings = co
	})
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := ms[0].Ping(ctx, "node-1")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cs[0].mu.Lock()
		defer cs[0].mu.Unlock()
		return string(cs[0].got["node-1"]) == "coord-1" && cs[0].rtts["node-1"] > 0
	}, formTimeout, pollEvery)
}
