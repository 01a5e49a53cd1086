package swim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// recorder keeps a copy of every packet and stream message members send,
// as they went on the wire (in their envelopes), while it is on.
type recorder struct {
	mu      sync.Mutex
	on      bool
	packets []recordedPacket
	streams []recordedStream
}

type recordedPacket struct {
	from, to netip.AddrPort
	data     []byte
}

type recordedStream struct {
	from  netip.AddrPort // the member that wrote it
	reply bool           // written on an accepted stream: a reply
	data  []byte         // every byte written, length prefixes included
}

func (r *recorder) set(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = on
}

func (r *recorder) packet(from, to netip.AddrPort, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.packets = append(r.packets, recordedPacket{from: from, to: to, data: bytes.Clone(b)})
	}
}

func (r *recorder) stream(s recordedStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on && len(s.data) > 0 {
		r.streams = append(r.streams, s)
	}
}

func (r *recorder) snapshot() ([]recordedPacket, []recordedStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedPacket(nil), r.packets...), append([]recordedStream(nil), r.streams...)
}

// recordingTransport is a NetTransport that records what it sends. The
// embedded NetTransport provides HandlePackets, so packets are handled on
// its reader goroutine as without the wrapper; accepted streams pass
// through a relay goroutine that wraps them, which ends when the
// NetTransport closes its Streams channel.
type recordingTransport struct {
	*NetTransport
	rec     *recorder
	streams chan net.Conn
}

func newRecordingTransport(t *testing.T, rec *recorder) *recordingTransport {
	nt, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1"})
	require.NoError(t, err)
	rt := &recordingTransport{NetTransport: nt, rec: rec, streams: make(chan net.Conn, defaultMaxConcurrentStreams)}
	go func() {
		defer close(rt.streams)
		for conn := range nt.Streams() {
			rt.streams <- &recordingConn{Conn: conn, rec: rec, from: nt.LocalAddr(), reply: true}
		}
	}()
	return rt
}

func (t *recordingTransport) WriteTo(b []byte, to netip.AddrPort) error {
	t.rec.packet(t.LocalAddr(), to, b)
	return t.NetTransport.WriteTo(b, to)
}

func (t *recordingTransport) DialStream(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	conn, err := t.NetTransport.DialStream(ctx, to)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: conn, rec: t.rec, from: t.LocalAddr()}, nil
}

func (t *recordingTransport) Streams() <-chan net.Conn { return t.streams }

// recordingConn records what is written to it, as one stream, when closed.
type recordingConn struct {
	net.Conn
	rec   *recorder
	from  netip.AddrPort
	reply bool

	mu      sync.Mutex
	written []byte
	closed  bool
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.written = append(c.written, b...)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *recordingConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.rec.stream(recordedStream{from: c.from, reply: c.reply, data: c.written})
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// fullView is everything m knows about every member, dead and left ones
// not yet forgotten included.
func fullView(t *testing.T, m *testMember) []Member {
	t.Helper()
	var out []Member
	require.NoError(t, m.input(func(time.Time) { out = m.machine.allMembers() }))
	return out
}

// replayAge is how old captured traffic is when it is replayed.
const replayAge = 60 * time.Second

// TestReplayedTrafficChangesNothing: everything the members of an encrypted,
// labelled cluster send while one member leaves, one crashes and is
// declared dead and one updates its metadata, is captured; a minute later
// every captured packet is sent again to every remaining member (from the
// departed members' own addresses where they are free) and every captured
// stream message is replayed on a new stream. The envelope accepts all of
// it (the key has not changed): incarnations, and the tombstones of the
// members forgotten meanwhile, must make it harmless, so no view (names,
// states, incarnations, metadata) may change and no event may fire.
func TestReplayedTrafficChangesNothing(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	rec.set(true)
	cfgs := namedConfigs(6, "rp", func(name string) *Config { return secureConfig(name, "replay", testKey1) })
	for _, c := range cfgs {
		c.Transport = newRecordingTransport(t, rec)
	}
	members := formCluster(t, cfgs...)
	remaining, leaver, victim, updater := members[:4], members[5], members[4], members[3]

	ctx, cancel := context.WithTimeout(context.Background(), detectTimeout)
	defer cancel()
	require.NoError(t, leaver.Leave(ctx))
	require.NoError(t, leaver.Shutdown())
	require.NoError(t, victim.Shutdown())
	require.NoError(t, updater.UpdateMeta(ctx, []byte("v2")))
	require.Eventually(t, func() bool {
		for _, m := range remaining {
			if !m.log.saw(EventLeave, leaver.cfg.Name, StateLeft) || !m.log.saw(EventLeave, victim.cfg.Name, StateDead) {
				return false
			}
			if !hasMeta(m.Members(), updater.cfg.Name, "v2") {
				return false
			}
		}
		return true
	}, detectTimeout, pollEvery, "the cluster did not settle: %s", views(remaining))
	rec.set(false)
	recordedAt := time.Now()
	packets, streams := rec.snapshot()
	t.Logf("captured %d packets and %d stream messages", len(packets), len(streams))
	require.NotEmpty(t, packets)
	require.NotEmpty(t, streams)

	// Wait out the minute, watching that the cluster stays healthy.
	suspected := countEvents(remaining, EventSuspect) // the victim's, when it crashed
	require.Never(t, func() bool { return countEvents(remaining, EventSuspect) > suspected },
		time.Until(recordedAt.Add(replayAge)), 500*time.Millisecond, "a suspicion before the replay: %s", views(remaining))

	refusals := func() uint64 {
		return sumStats(remaining, func(s MemberlistStats) uint64 {
			return s.RefusedSource + s.RefusedLabel + s.RefusedPlaintext + s.RefusedKey
		})
	}
	refusedBefore := refusals()
	before := make([][]Member, len(remaining))
	events := make([]int, len(remaining))
	for i, m := range remaining {
		before[i] = fullView(t, m)
		m.log.mu.Lock()
		events[i] = len(m.log.events)
		m.log.mu.Unlock()
	}

	// Packets: from the departed members' own ports when the capture came
	// from them, else from a socket of the test's.
	senders := map[netip.AddrPort]*net.UDPConn{}
	for _, gone := range []*testMember{leaver, victim} {
		addr := gone.transport.LocalAddr()
		conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		require.NoError(t, err, "rebind %s", addr)
		defer conn.Close()
		senders[addr] = conn
	}
	stranger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer stranger.Close()
	for _, m := range remaining {
		to := net.UDPAddrFromAddrPort(m.LocalMember().Addr)
		for i, p := range packets {
			conn := senders[p.from]
			if conn == nil {
				conn = stranger
			}
			_, err := conn.WriteToUDP(p.data, to)
			require.NoError(t, err)
			if i%64 == 63 {
				awaitPing(t, stranger, m) // keep the member's socket buffer from overflowing
			}
		}
		awaitPing(t, stranger, m)
	}

	// Stream messages, requests and replies alike, each on a new stream.
	for _, m := range remaining {
		for _, s := range streams {
			replayStream(t, m.LocalMember().Addr, s.data)
		}
	}
	// Whatever they provoked has had time to show: every member has
	// handled a replay barrier and probed a few more times.
	for _, m := range remaining {
		awaitPing(t, stranger, m)
		awaitTraffic(t, m, 10)
	}

	// The envelope let all of it through, as it must: it was sealed under
	// the cluster's key. What protects the views is the protocol.
	require.Equal(t, refusedBefore, refusals(), "the envelope refused captured traffic")

	for i, m := range remaining {
		require.Equal(t, describe(before[i]), describe(fullView(t, m)), "%s's view changed after the replay", m.cfg.Name)
		m.log.mu.Lock()
		fired := m.log.events[events[i]:]
		m.log.mu.Unlock()
		for _, e := range fired {
			t.Errorf("%s: %s %s (%s, incarnation %d) after the replay", m.cfg.Name, e.Kind, e.Member.Name, e.Member.State, e.Member.Incarnation)
		}
	}
}

// hasMeta reports whether view lists name with metadata meta.
func hasMeta(view []Member, name, meta string) bool {
	for _, mb := range view {
		if mb.Name == name {
			return string(mb.Meta) == meta
		}
	}
	return false
}

// describe is a view as text, for comparing and printing.
func describe(view []Member) string {
	var b bytes.Buffer
	for _, mb := range view {
		fmt.Fprintf(&b, "%s %s %s inc=%d meta=%q\n", mb.Name, mb.Addr, mb.State, mb.Incarnation, mb.Meta)
	}
	return b.String()
}

// awaitPing sends m a sealed ping from conn and waits for its ack: m has
// then handled every packet conn sent it before.
func awaitPing(t *testing.T, conn *net.UDPConn, m *testMember) {
	t.Helper()
	seq := uint32(time.Now().UnixNano())
	ping := sealed(t, wire.PacketEnvelope, m.cfg.Label, m.cfg.Security.Keys[0], &wire.Ping{Seq: seq, Target: m.cfg.Name, From: "replayer"})
	to := net.UDPAddrFromAddrPort(m.LocalMember().Addr)
	kr, err := newKeyring(m.cfg.Security.Keys, PlaintextRefuse)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(formTimeout)
	for time.Now().Before(deadline) {
		_, err := conn.WriteToUDP(ping, to)
		require.NoError(t, err)
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, _, err := conn.ReadFromUDP(buf)
			if err != nil {
				break // timed out: ping again
			}
			p, err := wire.OpenEnvelope(nil, buf[:n], wire.PacketEnvelope, m.cfg.Label, kr.aeads, false)
			if err != nil {
				continue
			}
			msgs, err := wire.DecodePacket(p)
			if err != nil {
				continue
			}
			for _, msg := range msgs {
				if ack, ok := msg.(*wire.Ack); ok && ack.Seq == seq {
					return
				}
			}
		}
	}
	t.Fatalf("%s never acked the replay barrier", m.cfg.Name)
}

// replayStream writes data on a new stream to addr and reads whatever comes
// back until the member closes it.
func replayStream(t *testing.T, addr netip.AddrPort, data []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr.String(), formTimeout)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(formTimeout))
	_, err = conn.Write(data)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the member kept a replayed stream open")
}
