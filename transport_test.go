package swim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// transportTestWait bounds every wait on the transport in these tests; loopback
// traffic arrives in microseconds, so it is only hit when something is broken.
const transportTestWait = 2 * time.Second

// transportLoopbacks are the addresses the real-socket tests run on.
var transportLoopbacks = []struct {
	name string
	addr string
}{
	{"IPv4", "127.0.0.1"},
	{"IPv6", "::1"},
}

// skipWithoutIPv6 skips a test on hosts where ::1 cannot be bound (IPv6
// disabled in the kernel or the container).
func skipWithoutIPv6(t *testing.T, addr string) {
	t.Helper()
	ip := netip.MustParseAddr(addr)
	if !ip.Is6() {
		return
	}
	ln, err := net.ListenUDP("udp6", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.IPv6Loopback(), 0)))
	if err != nil {
		t.Skipf("IPv6 loopback ::1 cannot be bound on this host: %v", err)
	}
	_ = ln.Close()
}

// newTestTransport starts a NetTransport that the test closes at its end.
func newTestTransport(t *testing.T, cfg NetTransportConfig) *NetTransport {
	t.Helper()
	tr, err := NewNetTransport(&cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

// receiveTestPacket waits for one packet on tr.
func receiveTestPacket(t *testing.T, tr *NetTransport) IncomingPacket {
	t.Helper()
	select {
	case p, ok := <-tr.Packets():
		require.True(t, ok, "Packets closed")
		return p
	case <-time.After(transportTestWait):
		t.Fatal("no packet within", transportTestWait)
	}
	panic("unreachable")
}

// acceptTestStream waits for one stream on tr.
func acceptTestStream(t *testing.T, tr *NetTransport) net.Conn {
	t.Helper()
	select {
	case c, ok := <-tr.Streams():
		require.True(t, ok, "Streams closed")
		t.Cleanup(func() { _ = c.Close() })
		return c
	case <-time.After(transportTestWait):
		t.Fatal("no stream within", transportTestWait)
	}
	panic("unreachable")
}

func TestNetTransportPortZeroSharesOnePort(t *testing.T) {
	for _, lb := range transportLoopbacks {
		t.Run(lb.name, func(t *testing.T) {
			skipWithoutIPv6(t, lb.addr)
			tr := newTestTransport(t, NetTransportConfig{BindAddr: lb.addr})

			udpPort := tr.udp.LocalAddr().(*net.UDPAddr).Port
			tcpPort := tr.tcp.Addr().(*net.TCPAddr).Port
			require.NotZero(t, udpPort)
			require.Equal(t, udpPort, tcpPort, "UDP and TCP must share the port")
			require.Equal(t, netip.AddrPortFrom(netip.MustParseAddr(lb.addr), uint16(udpPort)), tr.LocalAddr())

			// The advertised address really reaches the TCP listener.
			conn, err := net.DialTimeout("tcp", tr.LocalAddr().String(), transportTestWait)
			require.NoError(t, err)
			require.NoError(t, conn.Close())
		})
	}
}

func TestNetTransportPacketRoundTrip(t *testing.T) {
	for _, lb := range transportLoopbacks {
		t.Run(lb.name, func(t *testing.T) {
			skipWithoutIPv6(t, lb.addr)
			a := newTestTransport(t, NetTransportConfig{BindAddr: lb.addr})
			b := newTestTransport(t, NetTransportConfig{BindAddr: lb.addr})

			require.NoError(t, a.WriteTo([]byte("ping"), b.LocalAddr()))
			first := receiveTestPacket(t, b)
			require.Equal(t, "ping", string(first.Data))
			require.Equal(t, a.LocalAddr(), first.From)

			// The reader reuses its buffer: a later, longer packet must not
			// show through the earlier packet's Data.
			require.NoError(t, a.WriteTo([]byte("a longer second packet"), b.LocalAddr()))
			second := receiveTestPacket(t, b)
			require.Equal(t, "a longer second packet", string(second.Data))
			require.Equal(t, "ping", string(first.Data))
			require.Len(t, first.Data, 4)

			// And back the other way.
			require.NoError(t, b.WriteTo([]byte("ack"), a.LocalAddr()))
			reply := receiveTestPacket(t, a)
			require.Equal(t, "ack", string(reply.Data))
			require.Equal(t, b.LocalAddr(), reply.From)

			require.Equal(t, uint64(2), a.Stats().PacketsSent)
			require.Equal(t, uint64(2), b.Stats().PacketsReceived)
			require.Zero(t, b.Stats().PacketsDropped)
		})
	}
}

func TestNetTransportStreamRoundTrip(t *testing.T) {
	for _, lb := range transportLoopbacks {
		t.Run(lb.name, func(t *testing.T) {
			skipWithoutIPv6(t, lb.addr)
			a := newTestTransport(t, NetTransportConfig{BindAddr: lb.addr})
			b := newTestTransport(t, NetTransportConfig{BindAddr: lb.addr})

			ctx, cancel := context.WithTimeout(context.Background(), transportTestWait)
			defer cancel()
			out, err := a.DialStream(ctx, b.LocalAddr())
			require.NoError(t, err)
			defer out.Close()
			require.NoError(t, out.SetDeadline(time.Now().Add(transportTestWait)))

			_, err = out.Write([]byte("push"))
			require.NoError(t, err)

			in := acceptTestStream(t, b)
			require.NoError(t, in.SetDeadline(time.Now().Add(transportTestWait)))
			buf := make([]byte, 4)
			_, err = io.ReadFull(in, buf)
			require.NoError(t, err)
			require.Equal(t, "push", string(buf))

			_, err = in.Write([]byte("pull"))
			require.NoError(t, err)
			_, err = io.ReadFull(out, buf)
			require.NoError(t, err)
			require.Equal(t, "pull", string(buf))

			// The acceptor counts a stream once it has handed it over, so
			// the count may trail the stream by a moment.
			require.Eventually(t, func() bool { return b.Stats().StreamsAccepted == 1 }, transportTestWait, time.Millisecond)
			require.Zero(t, b.Stats().StreamsRefused)
		})
	}
}

func TestNetTransportCloseStopsEverything(t *testing.T) {
	tr, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1"})
	require.NoError(t, err)
	addr := tr.LocalAddr()

	// Consumers blocked on both channels must be released by Close.
	var consumers sync.WaitGroup
	consumers.Add(2)
	go func() {
		defer consumers.Done()
		for range tr.Packets() {
		}
	}()
	go func() {
		defer consumers.Done()
		for c := range tr.Streams() {
			_ = c.Close()
		}
	}()

	// Several concurrent Closes, then one more: all succeed, none panics.
	const closers = 3
	closeErrs := make(chan error, closers)
	for range closers {
		go func() { closeErrs <- tr.Close() }()
	}
	for range closers {
		require.NoError(t, <-closeErrs)
	}
	require.NoError(t, tr.Close())

	released := make(chan struct{})
	go func() { consumers.Wait(); close(released) }()
	select {
	case <-released:
	case <-time.After(transportTestWait):
		t.Fatal("channel consumers still blocked after Close")
	}
	_, ok := <-tr.Packets()
	require.False(t, ok, "Packets must be closed")
	_, ok = <-tr.Streams()
	require.False(t, ok, "Streams must be closed")

	require.ErrorIs(t, tr.WriteTo([]byte("x"), addr), net.ErrClosed)
	_, err = tr.DialStream(context.Background(), addr)
	require.ErrorIs(t, err, net.ErrClosed)

	// The port is free again, for UDP and TCP.
	again, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1", BindPort: int(addr.Port())})
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

func TestNetTransportCloseClosesUnreceivedStreams(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	b, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1"})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), transportTestWait)
	defer cancel()
	conn, err := a.DialStream(ctx, b.LocalAddr())
	require.NoError(t, err)
	defer conn.Close()
	require.Eventually(t, func() bool { return b.Stats().StreamsAccepted == 1 }, transportTestWait, time.Millisecond)

	// Nobody receives from b.Streams(): Close must not leak the queued conn.
	require.NoError(t, b.Close())
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(transportTestWait)))
	_, err = conn.Read(make([]byte, 1))
	require.Error(t, err)
	var netErr net.Error
	require.False(t, errors.As(err, &netErr) && netErr.Timeout(), "peer still open: %v", err)
}

func TestNetTransportAdvertiseOverride(t *testing.T) {
	tests := []struct {
		name          string
		advertiseAddr string
		advertisePort int
		wantAddr      string // "" = the bind address
		wantPort      int    // 0 = the bound port
	}{
		{name: "address and port", advertiseAddr: "203.0.113.7", advertisePort: 7946, wantAddr: "203.0.113.7", wantPort: 7946},
		{name: "address only", advertiseAddr: "203.0.113.7", wantAddr: "203.0.113.7"},
		{name: "port only", advertisePort: 7946, wantPort: 7946},
		{name: "IPv6 address", advertiseAddr: "2001:db8::7", advertisePort: 1, wantAddr: "2001:db8::7", wantPort: 1},
		{name: "IPv4-mapped address is IPv4", advertiseAddr: "::ffff:203.0.113.7", wantAddr: "203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTestTransport(t, NetTransportConfig{
				BindAddr:      "127.0.0.1",
				AdvertiseAddr: tt.advertiseAddr,
				AdvertisePort: tt.advertisePort,
			})
			bound := tr.udp.LocalAddr().(*net.UDPAddr).AddrPort()
			want := netip.AddrPortFrom(bound.Addr().Unmap(), bound.Port())
			if tt.wantAddr != "" {
				want = netip.AddrPortFrom(netip.MustParseAddr(tt.wantAddr), want.Port())
			}
			if tt.wantPort != 0 {
				want = netip.AddrPortFrom(want.Addr(), uint16(tt.wantPort))
			}
			require.Equal(t, want, tr.LocalAddr())
		})
	}
}

func TestNetTransportAdvertiseDerivedFromUnspecified(t *testing.T) {
	for _, tc := range []struct{ name, bind, loopback string }{
		{"IPv4", "0.0.0.0", "127.0.0.1"},
		{"IPv6", "::", "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skipWithoutIPv6(t, tc.loopback)
			tr := newTestTransport(t, NetTransportConfig{BindAddr: tc.bind})
			adv := tr.LocalAddr()
			require.False(t, adv.Addr().IsUnspecified(), "advertised %s", adv)
			require.Equal(t, netip.MustParseAddr(tc.bind).Is4(), adv.Addr().Is4(), "advertised %s", adv)
			require.Equal(t, uint16(tr.udp.LocalAddr().(*net.UDPAddr).Port), adv.Port())

			// Whatever was derived is one of this host's addresses, so a
			// peer on loopback reaches it.
			peer := newTestTransport(t, NetTransportConfig{BindAddr: tc.loopback})
			require.NoError(t, peer.WriteTo([]byte("hello"), adv))
			require.Equal(t, "hello", string(receiveTestPacket(t, tr).Data))
		})
	}
}

func TestNetTransportOccupiedPort(t *testing.T) {
	t.Run("TCP taken", func(t *testing.T) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port

		_, err = NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1", BindPort: port})
		require.ErrorContains(t, err, "bind TCP")

		// The UDP socket bound before TCP failed was released.
		udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		require.NoError(t, err)
		require.NoError(t, udp.Close())
	})
	t.Run("UDP taken", func(t *testing.T) {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		require.NoError(t, err)
		defer pc.Close()
		port := pc.LocalAddr().(*net.UDPAddr).Port

		_, err = NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1", BindPort: port})
		require.ErrorContains(t, err, "bind UDP")
	})
	t.Run("by another transport", func(t *testing.T) {
		first := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
		_, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1", BindPort: int(first.LocalAddr().Port())})
		require.Error(t, err)
	})
}

func TestNetTransportInvalidConfig(t *testing.T) {
	tests := []struct {
		name  string
		cfg   NetTransportConfig
		field string
	}{
		{"bind address not an IP", NetTransportConfig{BindAddr: "localhost"}, "BindAddr"},
		{"advertise address not an IP", NetTransportConfig{BindAddr: "127.0.0.1", AdvertiseAddr: "example.com"}, "AdvertiseAddr"},
		{"advertise address unspecified", NetTransportConfig{BindAddr: "127.0.0.1", AdvertiseAddr: "0.0.0.0"}, "AdvertiseAddr"},
		{"bind port too large", NetTransportConfig{BindAddr: "127.0.0.1", BindPort: 65536}, "BindPort"},
		{"advertise port negative", NetTransportConfig{BindAddr: "127.0.0.1", AdvertisePort: -1}, "AdvertisePort"},
		{"packet buffer negative", NetTransportConfig{BindAddr: "127.0.0.1", PacketBuffer: -1}, "PacketBuffer"},
		{"max packet size negative", NetTransportConfig{BindAddr: "127.0.0.1", MaxPacketSize: -1}, "MaxPacketSize"},
		{"max packet size over UDP's", NetTransportConfig{BindAddr: "127.0.0.1", MaxPacketSize: 65536}, "MaxPacketSize"},
		{"stream limit negative", NetTransportConfig{BindAddr: "127.0.0.1", MaxConcurrentStreams: -1}, "MaxConcurrentStreams"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewNetTransport(&tt.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "NetTransportConfig."+tt.field, ce.Field)
		})
	}
}

func TestNetTransportFullPacketChannelDrops(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	b := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1", PacketBuffer: 1})

	// Nobody reads b.Packets(): the first packet fills it, the rest must be
	// dropped and counted, and neither side may block.
	const sent = 5
	for i := range sent {
		require.NoError(t, a.WriteTo([]byte{byte(i)}, b.LocalAddr()))
	}
	require.Eventually(t, func() bool {
		s := b.Stats()
		return s.PacketsReceived == sent && s.PacketsDropped == sent-1
	}, transportTestWait, time.Millisecond, "stats: %+v", b.Stats())
	require.Len(t, b.Packets(), 1)
	require.Equal(t, []byte{0}, receiveTestPacket(t, b).Data, "the queued packet is the first one")
}

func TestNetTransportFullStreamChannelRefuses(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	b := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1", MaxConcurrentStreams: 1})

	ctx, cancel := context.WithTimeout(context.Background(), transportTestWait)
	defer cancel()
	first, err := a.DialStream(ctx, b.LocalAddr())
	require.NoError(t, err)
	defer first.Close()
	require.Eventually(t, func() bool { return b.Stats().StreamsAccepted == 1 }, transportTestWait, time.Millisecond)

	// Nobody receives from b.Streams(): the second stream is refused, which
	// its dialer sees as the connection closing.
	second, err := a.DialStream(ctx, b.LocalAddr())
	require.NoError(t, err)
	defer second.Close()
	require.Eventually(t, func() bool { return b.Stats().StreamsRefused == 1 }, transportTestWait, time.Millisecond)
	require.NoError(t, second.SetReadDeadline(time.Now().Add(transportTestWait)))
	_, err = second.Read(make([]byte, 1))
	require.Error(t, err)
	var netErr net.Error
	require.False(t, errors.As(err, &netErr) && netErr.Timeout(), "refused stream still open: %v", err)

	// The queued stream is still the first one, intact.
	in := acceptTestStream(t, b)
	require.Equal(t, first.LocalAddr().String(), in.RemoteAddr().String())
}

// sendCounted sends each payload from a to b, waiting after each until b has
// read it off its socket, so that the kernel's socket buffer never fills
// and every loss the test sees is the transport's.
func sendCounted(t *testing.T, a, b *NetTransport, payloads ...[]byte) {
	t.Helper()
	for _, p := range payloads {
		want := b.Stats().PacketsReceived + 1
		require.NoError(t, a.WriteTo(p, b.LocalAddr()))
		require.Eventually(t, func() bool { return b.Stats().PacketsReceived == want },
			transportTestWait, 100*time.Microsecond, "packet %x not read", p)
	}
}

// numbered returns n two-byte payloads, 0 to n-1.
func numbered(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte{byte(i >> 8), byte(i)}
	}
	return out
}

func TestNetTransportBacklogBeyondChannelKeepsOrder(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	b := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	require.Equal(t, packetChannelCap, cap(b.Packets()), "the channel is small; the backlog grows on demand")

	// Nobody reads while five channels' worth arrive: none may be dropped,
	// and they must come out in the order they arrived.
	const sent = 5 * packetChannelCap
	sendCounted(t, a, b, numbered(sent)...)
	for i, want := range numbered(sent) {
		require.Equal(t, want, receiveTestPacket(t, b).Data, "packet %d", i)
	}
	require.Zero(t, b.Stats().PacketsDropped)

	// With the backlog gone the pump ends, and packets go straight to the
	// channel again.
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.pumping && b.overflow.Len() == 0
	}, transportTestWait, time.Millisecond, "the pump did not end with the backlog")
	sendCounted(t, a, b, []byte("after"))
	require.Equal(t, "after", string(receiveTestPacket(t, b).Data))
}

func TestNetTransportBacklogBoundedByPacketBuffer(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	const buffer = packetChannelCap + 6
	b := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1", PacketBuffer: buffer})

	const sent = buffer + 10
	sendCounted(t, a, b, numbered(sent)...)
	require.Equal(t, uint64(sent-buffer), b.Stats().PacketsDropped)
	// The first PacketBuffer packets wait, in order; the latecomers were
	// the ones dropped.
	for i, want := range numbered(buffer) {
		require.Equal(t, want, receiveTestPacket(t, b).Data, "packet %d", i)
	}
	select {
	case p := <-b.Packets():
		t.Fatalf("packet %x beyond PacketBuffer was kept", p.Data)
	default:
	}
}

func TestNetTransportGrowsReadBufferForLargeDatagrams(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	const maxSize = 600
	b := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1", MaxPacketSize: maxSize})
	payload := func(n int, fill byte) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = fill + byte(i)
		}
		return p
	}

	// Up to MaxPacketSize fits the buffer.
	fits := payload(maxSize, 1)
	sendCounted(t, a, b, fits)
	require.Equal(t, fits, receiveTestPacket(t, b).Data)

	// One byte more would arrive truncated: it is dropped, not delivered
	// cut short, and counted.
	sendCounted(t, a, b, payload(maxSize+1, 2))
	require.Equal(t, uint64(1), b.Stats().PacketsTooLarge)
	select {
	case p := <-b.Packets():
		t.Fatalf("an oversized datagram was delivered (%d bytes)", len(p.Data))
	default:
	}

	// The buffer has grown: large datagrams now arrive whole.
	for _, p := range [][]byte{payload(maxSize+1, 3), payload(60000, 4)} {
		sendCounted(t, a, b, p)
		require.Equal(t, p, receiveTestPacket(t, b).Data)
	}
	require.Equal(t, uint64(1), b.Stats().PacketsTooLarge)
	require.Zero(t, b.Stats().PacketsDropped)
}

// TestNetTransportSmallAtRest guards what an idle transport holds, which
// every member pays. Its Packets channel, allocated whole when it is made
// (80 bytes a packet), holds packetChannelCap packets rather than the whole
// PacketBuffer: the rest of a backlog waits in the overflow queue, which
// holds nothing until a backlog comes. Its read buffer is sized for the
// packets the cluster sends rather than for the largest datagram, and is
// made with a size known only at run time, so it lives on the heap and not
// in the reader's stack (a 64 KiB array there cost 128 KiB of stack).
// These are facts of this one transport, which no other goroutine can
// disturb; BenchmarkNetTransportAtRest measures its heap.
func TestNetTransportSmallAtRest(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	b := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	require.Equal(t, packetChannelCap, cap(b.packets), "the channel holds a few packets")
	require.Less(t, cap(b.packets), defaultPacketBuffer, "the channel is not the whole buffer")
	require.Equal(t, defaultPacketBuffer-packetChannelCap, b.overflowMax, "the overflow queue takes the rest of the buffer")
	require.Equal(t, defaultMaxPacketSize+1, b.readSize, "the read buffer fits the packets the cluster sends")
	require.Less(t, b.readSize, udpReadBufferSize)

	// After a packet, the overflow queue still holds nothing: a packet
	// that finds room in the channel never touches it.
	sendCounted(t, a, b, []byte("ping"))
	require.Equal(t, "ping", string(receiveTestPacket(t, b).Data))
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Zero(t, b.overflow.Len())
	require.Zero(t, b.overflow.Cap(), "the overflow queue allocated a ring for nothing")
}

// BenchmarkNetTransportAtRest measures the heap an idle transport allocates
// from bind to its first packet received, per transport (B/transport; B/op
// and allocs/op count a batch of 16). It is read from the process's memory
// statistics, which every goroutine moves, so it is a benchmark's figure and
// not a test's assertion.
//
//	go test -run '^$' -bench NetTransportAtRest -benchmem .
func BenchmarkNetTransportAtRest(b *testing.B) {
	const batch = 16 // transports open at once, two sockets each
	sender, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1"})
	require.NoError(b, err)
	defer func() { require.NoError(b, sender.Close()) }()
	var heap, transports uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		open := make([]*NetTransport, 0, batch)
		for range batch {
			tr, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1"})
			require.NoError(b, err)
			open = append(open, tr)
			require.NoError(b, sender.WriteTo([]byte("ping"), tr.LocalAddr()))
			select {
			case <-tr.Packets():
			case <-time.After(transportTestWait):
				b.Fatal("no packet")
			}
		}
		runtime.ReadMemStats(&after)
		heap += after.TotalAlloc - before.TotalAlloc
		transports += batch
		for _, tr := range open {
			require.NoError(b, tr.Close())
		}
	}
	b.ReportMetric(float64(heap)/float64(transports), "B/transport")
}

func TestMemberlistSizesReadBufferForPacketBudget(t *testing.T) {
	cfg := testConfig("jumbo")
	cfg.PacketBudget = 9000
	m := startMember(t, cfg)
	nt, ok := m.transport.(*NetTransport)
	require.True(t, ok)
	require.Equal(t, cfg.PacketBudget+1, nt.readSize, "the read buffer fits the largest packet the config sends, and one byte to tell a larger one")
}

// TestNetTransportHandlePackets: once a handler is set, every packet goes to
// it, in order, and none to Packets. The data is the handler's until it
// returns, so it keeps a copy.
func TestNetTransportHandlePackets(t *testing.T) {
	a := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	b := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1"})
	var mu sync.Mutex
	var got []IncomingPacket
	b.HandlePackets(func(p IncomingPacket) {
		mu.Lock()
		defer mu.Unlock()
		p.Data = bytes.Clone(p.Data)
		got = append(got, p)
	})
	payloads := append(numbered(100), []byte("a longer packet than the others"))
	sendCounted(t, a, b, payloads...)
	// The reader counts a packet before it calls the handler with it.
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == len(payloads) },
		transportTestWait, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, len(payloads))
	for i, want := range payloads {
		require.Equal(t, want, got[i].Data, "packet %d", i)
		require.Equal(t, a.LocalAddr(), got[i].From)
	}
	require.Empty(t, b.Packets(), "nothing queued for the channel")
	require.Zero(t, b.Stats().PacketsDropped)
}
