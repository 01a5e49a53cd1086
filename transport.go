package swim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swim-go/swim/internal/fifo"
	"github.com/swim-go/swim/internal/ratelog"
	"go.uber.org/zap"
)

// Transport carries swim's traffic: unreliable packets (UDP-like) for probes
// and gossip, and reliable streams (TCP-like) for state exchange. Memberlist
// uses a NetTransport unless Config.Transport supplies another.
type Transport interface {
	// LocalAddr is the address peers should use to reach this member.
	LocalAddr() netip.AddrPort
	// WriteTo sends one packet. It must not block for long; a packet that
	// cannot be sent is dropped (the protocol tolerates loss).
	WriteTo(b []byte, to netip.AddrPort) error
	// Packets delivers received packets. The channel is closed by Close.
	Packets() <-chan IncomingPacket
	// DialStream opens a stream to a peer.
	DialStream(ctx context.Context, to netip.AddrPort) (net.Conn, error)
	// Streams delivers accepted streams. The channel is closed by Close.
	Streams() <-chan net.Conn
	// Close stops the transport; it returns when its goroutines have ended.
	Close() error
}

// PacketHandlerTransport is a Transport that can deliver each received
// packet by calling a function on its own reader goroutine instead of
// sending it on Packets. Memberlist uses it when offered: the packet is
// handled and answered there, without waking a second goroutine, which for
// a member's few packets a second is much of its CPU cost.
type PacketHandlerTransport interface {
	Transport
	// HandlePackets makes the transport call h for each packet received
	// from then on, from one goroutine at a time, in order, instead of
	// sending it on Packets. p.Data is h's until h returns (the transport
	// may read the next packet into the same memory), and h does not
	// block for long. Memberlist calls it once, when it starts.
	HandlePackets(h func(p IncomingPacket))
}

// IncomingPacket is one received packet.
type IncomingPacket struct {
	From netip.AddrPort
	Data []byte
}

// NetTransportConfig configures a NetTransport. The zero value is usable: it
// listens on 0.0.0.0 on a free port.
type NetTransportConfig struct {
	// BindAddr is the IP address to listen on; "" means "0.0.0.0". The
	// sockets are of BindAddr's family only: "::" listens on IPv6 alone.
	BindAddr string
	// BindPort is the port to listen on; UDP and TCP share it. 0 picks a
	// port that is free for both.
	BindPort int
	// AdvertiseAddr is the IP address peers use to reach this member. ""
	// means BindAddr, or, when BindAddr is unspecified (0.0.0.0 or ::), the
	// first global unicast address of the same family on an up, non-loopback
	// interface, falling back to loopback.
	AdvertiseAddr string
	// AdvertisePort is the port peers use to reach this member; 0 means the
	// bound port.
	AdvertisePort int
	// PacketBuffer is the most received packets waiting for the consumer
	// on Packets. A packet that arrives while that many wait is dropped and
	// counted (PacketsDropped): the reader never waits for a slow consumer
	// (with a handler set, HandlePackets, the reader calls it instead and
	// this bound does not apply). The
	// first 64 wait in the Packets channel, the rest in a queue that grows
	// on demand and shrinks as it drains, so memory follows the backlog,
	// not this bound. Default 1024.
	PacketBuffer int
	// MaxPacketSize is the largest datagram expected; the UDP read buffer
	// is sized for it. A larger datagram is dropped and counted
	// (PacketsTooLarge), and the buffer grows to the UDP maximum, so after
	// that first loss none is dropped for its size. Memberlist passes
	// Config.PacketBudget, which is right when every member has the same.
	// 0 means 1400 (the default PacketBudget); at most 65535.
	MaxPacketSize int
	// MaxConcurrentStreams is the capacity of the Streams channel: the most
	// accepted streams waiting for the consumer. A stream accepted while it
	// is full is closed at once, counted (StreamsRefused) and logged as a
	// warning (one line per 10 s at most, with the count of the others).
	// The transport cannot see when the consumer is done with a stream, so
	// the consumer bounds how many it handles at once. Default 32.
	MaxConcurrentStreams int
	// Logger receives diagnostics. Nil means zap.NewNop().
	Logger *zap.Logger
}

// NetTransportStats counts what a NetTransport did. Each field is read
// atomically, but the fields are not a consistent snapshot of one instant.
type NetTransportStats struct {
	// PacketsReceived counts packets read off the socket, dropped ones
	// included.
	PacketsReceived uint64
	// PacketsDropped counts received packets discarded because
	// PacketBuffer packets were already waiting for the consumer.
	PacketsDropped uint64
	// PacketsTooLarge counts received datagrams discarded because they
	// were larger than MaxPacketSize while the read buffer was still sized
	// for it (see MaxPacketSize).
	PacketsTooLarge uint64
	// PacketsSent counts packets WriteTo handed to the socket.
	PacketsSent uint64
	// SendErrors counts WriteTo calls that failed.
	SendErrors uint64
	// ReadErrors counts failed reads from the UDP socket, other than the
	// one that ends the reader at Close.
	ReadErrors uint64
	// StreamsAccepted counts accepted streams delivered on Streams.
	StreamsAccepted uint64
	// StreamsRefused counts accepted streams closed at once because Streams
	// was full.
	StreamsRefused uint64
	// AcceptErrors counts failed accepts, other than the one that ends the
	// acceptor at Close.
	AcceptErrors uint64
}

const (
	defaultPacketBuffer         = 1024
	defaultMaxConcurrentStreams = 32
	defaultMaxPacketSize        = 1400 // DefaultLANConfig's PacketBudget

	// packetChannelCap is the most packets waiting in the Packets channel
	// itself; a backlog beyond it waits in the transport's growable
	// overflow queue. A channel allocates its whole capacity up front (80
	// bytes a packet), so it is kept small, but no smaller than the loop's
	// batch (maxPacketBatch): when its deadline timer fires the loop takes
	// up to that many waiting packets at once without blocking, so that an
	// ack which arrived during a stall counts before the probe's deadline.
	packetChannelCap = 64
	// udpReadBufferSize holds the largest datagram UDP can carry: the read
	// buffer's size once a datagram over MaxPacketSize has been seen.
	udpReadBufferSize = 65535
	// socketReceiveBuffer is asked of the kernel so that bursts of gossip
	// survive a briefly descheduled reader; the kernel may grant less.
	socketReceiveBuffer = 2 << 20
	// packetWriteTimeout bounds how long WriteTo waits for room in the
	// socket's send buffer. Past it the packet is lost, which the protocol
	// tolerates better than a stalled caller.
	packetWriteTimeout = 50 * time.Millisecond
	// bindAttempts is how many random ports are tried when BindPort is 0,
	// since the port UDP got may be taken for TCP.
	bindAttempts = 10
	// Repeated read or accept errors (say, out of file descriptors) are
	// retried with a growing pause, so a persistent failure does not spin
	// a CPU or flood the log.
	minErrorPause = 5 * time.Millisecond
	maxErrorPause = time.Second
)

// NetTransport is the Transport over real sockets: UDP for packets and TCP
// for streams, on one port. It starts two goroutines, a UDP reader and a TCP
// acceptor, and a third while received packets back up beyond what the
// Packets channel holds; all of them end in Close.
type NetTransport struct {
	udp       *net.UDPConn
	tcp       *net.TCPListener
	advertise netip.AddrPort
	log       *zap.Logger
	refusals  *ratelog.Log // streams refused for want of room in Streams

	packets chan IncomingPacket
	streams chan net.Conn
	// handler, once set (HandlePackets), takes each packet in place of
	// the Packets channel; the reader waits for it, so a backlog stays in
	// the socket's receive buffer rather than in the overflow queue.
	handler atomic.Pointer[func(IncomingPacket)]

	// readSize is the UDP read buffer's initial size: MaxPacketSize plus one
	// byte, so that a read filling it reveals a larger datagram cut short.
	readSize int

	// The overflow queue: received packets that found the Packets channel
	// full, oldest first. While it is not empty the reader appends to it
	// instead of sending to the channel (order is kept), and a pump
	// goroutine, started for the backlog and ended when it is gone, moves
	// its packets into the channel as room appears.
	mu          sync.Mutex
	overflow    fifo.Queue[IncomingPacket] // guarded by mu
	overflowMax int                        // PacketBuffer less the channel's capacity
	pumping     bool                       // guarded by mu: a pump goroutine runs

	// lifetime is cancelled by Close: it tells the goroutines that a socket
	// error means shutdown, interrupts their error pauses and cancels dials
	// in flight. It belongs to the transport, not to any one request.
	lifetime context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	packetsReceived atomic.Uint64
	packetsDropped  atomic.Uint64
	packetsTooLarge atomic.Uint64
	packetsSent     atomic.Uint64
	sendErrors      atomic.Uint64
	readErrors      atomic.Uint64
	streamsAccepted atomic.Uint64
	streamsRefused  atomic.Uint64
	acceptErrors    atomic.Uint64
}

var _ PacketHandlerTransport = (*NetTransport)(nil)

// NewNetTransport binds UDP and TCP on one port and starts reading. A nil cfg
// means the zero NetTransportConfig. Call Close to release the sockets.
func NewNetTransport(cfg *NetTransportConfig) (*NetTransport, error) {
	var c NetTransportConfig
	if cfg != nil {
		c = *cfg
	}
	bad := func(field, reason string) error {
		return &ConfigError{Field: "NetTransportConfig." + field, Reason: reason}
	}
	bindIP := netip.IPv4Unspecified()
	if c.BindAddr != "" {
		ip, err := netip.ParseAddr(c.BindAddr)
		if err != nil {
			return nil, bad("BindAddr", fmt.Sprintf("%q is not an IP address", c.BindAddr))
		}
		// An IPv4-mapped address is IPv4: bind the IPv4 socket it means.
		bindIP = ip.Unmap()
	}
	var advertiseIP netip.Addr
	if c.AdvertiseAddr != "" {
		ip, err := netip.ParseAddr(c.AdvertiseAddr)
		if err != nil {
			return nil, bad("AdvertiseAddr", fmt.Sprintf("%q is not an IP address", c.AdvertiseAddr))
		}
		if ip.IsUnspecified() {
			return nil, bad("AdvertiseAddr", fmt.Sprintf("%q cannot be reached by peers", c.AdvertiseAddr))
		}
		advertiseIP = ip.Unmap()
	}
	switch {
	case c.BindPort < 0 || c.BindPort > 65535:
		return nil, bad("BindPort", fmt.Sprintf("%d is not a port", c.BindPort))
	case c.AdvertisePort < 0 || c.AdvertisePort > 65535:
		return nil, bad("AdvertisePort", fmt.Sprintf("%d is not a port", c.AdvertisePort))
	case c.PacketBuffer < 0:
		return nil, bad("PacketBuffer", "must not be negative")
	case c.MaxPacketSize < 0 || c.MaxPacketSize > udpReadBufferSize:
		return nil, bad("MaxPacketSize", fmt.Sprintf("must be 0..%d, is %d", udpReadBufferSize, c.MaxPacketSize))
	case c.MaxConcurrentStreams < 0:
		return nil, bad("MaxConcurrentStreams", "must not be negative")
	}
	if c.PacketBuffer == 0 {
		c.PacketBuffer = defaultPacketBuffer
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = defaultMaxConcurrentStreams
	}
	if c.MaxPacketSize == 0 {
		c.MaxPacketSize = defaultMaxPacketSize
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}

	udp, tcp, err := bindBoth(bindIP, c.BindPort)
	if err != nil {
		return nil, err
	}
	port := uint16(udp.LocalAddr().(*net.UDPAddr).Port)
	setReceiveBuffer(udp)

	if !advertiseIP.IsValid() {
		advertiseIP = bindIP
		if bindIP.IsUnspecified() {
			advertiseIP = localAddrOfFamily(bindIP.Is4())
		}
	}
	advertisePort := port
	if c.AdvertisePort != 0 {
		advertisePort = uint16(c.AdvertisePort)
	}

	t := &NetTransport{
		udp:       udp,
		tcp:       tcp,
		advertise: netip.AddrPortFrom(advertiseIP, advertisePort),
		log:       c.Logger.Named("transport"),
		packets:   make(chan IncomingPacket, min(c.PacketBuffer, packetChannelCap)),
		streams:   make(chan net.Conn, c.MaxConcurrentStreams),
		readSize:  min(c.MaxPacketSize+1, udpReadBufferSize),
	}
	t.refusals = ratelog.New(t.log)
	t.overflowMax = c.PacketBuffer - cap(t.packets)
	t.lifetime, t.stop = context.WithCancel(context.Background())
	t.wg.Add(2)
	go t.readPackets()
	go t.acceptStreams()
	t.log.Debug("listening",
		zap.Stringer("bind", netip.AddrPortFrom(bindIP, port)),
		zap.Stringer("advertise", t.advertise))
	return t, nil
}

// bindBoth listens on UDP and TCP on the same port of ip. Port 0 lets the
// kernel pick the UDP port and then claims it for TCP, retrying with a new
// port when TCP already has it.
func bindBoth(ip netip.Addr, port int) (*net.UDPConn, *net.TCPListener, error) {
	udpNet, tcpNet := "udp4", "tcp4"
	if ip.Is6() {
		udpNet, tcpNet = "udp6", "tcp6"
	}
	attempts := 1
	if port == 0 {
		attempts = bindAttempts
	}
	var lastErr error
	for range attempts {
		addr := netip.AddrPortFrom(ip, uint16(port))
		udp, err := net.ListenUDP(udpNet, net.UDPAddrFromAddrPort(addr))
		if err != nil {
			// The kernel chose nothing yet, so another attempt would meet
			// the same failure (bad address, no permission, port taken).
			return nil, nil, fmt.Errorf("swim: bind UDP %s: %w", addr, err)
		}
		addr = netip.AddrPortFrom(ip, uint16(udp.LocalAddr().(*net.UDPAddr).Port))
		tcp, err := net.ListenTCP(tcpNet, net.TCPAddrFromAddrPort(addr))
		if err == nil {
			return udp, tcp, nil
		}
		_ = udp.Close()
		lastErr = fmt.Errorf("swim: bind TCP %s (UDP and TCP must share the port): %w", addr, err)
	}
	if attempts > 1 {
		return nil, nil, fmt.Errorf("%w (after %d ports)", lastErr, attempts)
	}
	return nil, nil, lastErr
}

// setReceiveBuffer asks for a large socket receive buffer, halving the
// request until the system accepts one. Failure only costs burst tolerance,
// so it is not reported.
func setReceiveBuffer(udp *net.UDPConn) {
	for size := socketReceiveBuffer; size >= 64<<10; size /= 2 {
		if udp.SetReadBuffer(size) == nil {
			return
		}
	}
}

// localAddrOfFamily picks an address peers can likely reach when the
// transport listens on every interface: the first global unicast address of
// the family on an up, non-loopback interface, else loopback. Link-local
// addresses are skipped because an IPv6 one is useless to peers without a
// zone, and an IPv4 one means the interface has no real address.
func localAddrOfFamily(v4 bool) netip.Addr {
	loopback := netip.IPv6Loopback()
	if v4 {
		loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return loopback
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipNet, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipNet.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() == v4 && ip.IsGlobalUnicast() {
				return ip
			}
		}
	}
	return loopback
}

// readPackets copies each datagram off the UDP socket and hands it to the
// consumer until Close.
func (t *NetTransport) readPackets() {
	defer t.wg.Done()
	// Sized for the packets this cluster sends (1.4 KiB by default) rather
	// than for the largest datagram UDP allows: a 64 KiB array here would
	// cost every member 128 KiB of goroutine stack.
	buf := make([]byte, t.readSize)
	pause := minErrorPause
	for {
		n, from, err := t.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if t.lifetime.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.readErrors.Add(1)
			t.log.Warn("read UDP packet", zap.Error(err), zap.Duration("retry_in", pause))
			if !t.pauseAfterError(&pause) {
				return
			}
			continue
		}
		pause = minErrorPause
		t.packetsReceived.Add(1)
		if n == len(buf) && len(buf) < udpReadBufferSize {
			// The datagram filled the buffer, which is one byte larger
			// than MaxPacketSize: it was larger still and the kernel cut
			// it. A truncated packet is garbage; drop it, and make room
			// for the next, since this peer evidently sends such packets.
			t.packetsTooLarge.Add(1)
			t.log.Info("datagram over MaxPacketSize dropped; read buffer grown to the UDP maximum",
				zap.Stringer("from", unmapAddrPort(from)), zap.Int("max_packet_size", len(buf)-1))
			buf = make([]byte, udpReadBufferSize)
			continue
		}
		if h := t.handler.Load(); h != nil {
			// The handler is done with the packet when it returns: the
			// next read may use the same buffer, and a packet costs no
			// allocation.
			(*h)(IncomingPacket{From: unmapAddrPort(from), Data: buf[:n]})
			continue
		}
		// buf is reused for the next read: the channel's consumer gets its
		// own copy.
		data := make([]byte, n)
		copy(data, buf[:n])
		t.deliver(IncomingPacket{From: unmapAddrPort(from), Data: data})
	}
}

// HandlePackets implements PacketHandlerTransport: from now on the reader
// goroutine calls h for each packet instead of sending it on Packets
// (packets already queued there stay to be read).
func (t *NetTransport) HandlePackets(h func(p IncomingPacket)) {
	t.handler.Store(&h)
}

// deliver hands p to the consumer without waiting: into the Packets
// channel, or when that is full (or a backlog is already queued, which p
// must not overtake) into the overflow queue, or when PacketBuffer packets
// already wait, nowhere (dropped and counted).
func (t *NetTransport) deliver(p IncomingPacket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.overflow.Len() == 0 {
		select {
		case t.packets <- p:
			return
		default:
		}
	}
	if t.overflow.Len() >= t.overflowMax {
		t.packetsDropped.Add(1)
		return
	}
	t.overflow.Push(p)
	if !t.pumping {
		t.pumping = true
		// The reader is itself counted in wg, so this Add cannot race
		// with Close's Wait reaching zero.
		t.wg.Add(1)
		go t.pump()
	}
}

// pump moves the overflow queue into the Packets channel, oldest first,
// waiting for room, and ends once the queue is empty (the reader then sends
// to the channel directly again) or at Close. It runs only while there is a
// backlog, so an idle transport has no goroutine for it.
func (t *NetTransport) pump() {
	defer t.wg.Done()
	for {
		t.mu.Lock()
		p, ok := t.overflow.Peek()
		if !ok {
			t.pumping = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		// p stays at the head while it is being sent, so packets the
		// reader receives meanwhile queue behind it, not into the channel
		// ahead of it. Only the pump removes from the queue.
		select {
		case t.packets <- p:
		case <-t.lifetime.Done():
			return
		}
		t.mu.Lock()
		t.overflow.Pop()
		t.mu.Unlock()
	}
}

// acceptStreams hands each accepted TCP connection to the Streams channel
// until Close, refusing those that find it full.
func (t *NetTransport) acceptStreams() {
	defer t.wg.Done()
	pause := minErrorPause
	for {
		conn, err := t.tcp.Accept()
		if err != nil {
			if t.lifetime.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.acceptErrors.Add(1)
			t.log.Warn("accept TCP stream", zap.Error(err), zap.Duration("retry_in", pause))
			if !t.pauseAfterError(&pause) {
				return
			}
			continue
		}
		pause = minErrorPause
		select {
		case t.streams <- conn:
			t.streamsAccepted.Add(1)
		default:
			// Refusing at once tells the peer to retry elsewhere or later;
			// queueing without bound would let a flood exhaust descriptors.
			t.streamsRefused.Add(1)
			t.refusals.Warn(refusalTransportQueue, zap.Stringer("from", conn.RemoteAddr()), zap.Int("max", cap(t.streams)))
			_ = conn.Close()
		}
	}
}

// pauseAfterError waits *pause, doubles it up to maxErrorPause, and reports
// false if Close interrupted the wait.
func (t *NetTransport) pauseAfterError(pause *time.Duration) bool {
	timer := time.NewTimer(*pause)
	defer timer.Stop()
	*pause = min(2**pause, maxErrorPause)
	select {
	case <-timer.C:
		return true
	case <-t.lifetime.Done():
		return false
	}
}

// unmapAddrPort turns an IPv4-mapped IPv6 address into plain IPv4, so one
// peer always has one address.
func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// LocalAddr returns the advertised address: what peers should send to.
func (t *NetTransport) LocalAddr() netip.AddrPort { return t.advertise }

// WriteTo sends b as one UDP datagram to to. It waits at most a short
// while for room in the socket's send buffer; the error, if any, is returned
// and counted, not logged. After Close it returns an error matching
// net.ErrClosed.
func (t *NetTransport) WriteTo(b []byte, to netip.AddrPort) error {
	if !to.IsValid() {
		t.sendErrors.Add(1)
		return fmt.Errorf("swim: send packet: invalid address %s", to)
	}
	// Deadlines are per socket, so concurrent writers each push it
	// forward; a write still waits no longer than the timeout after the
	// latest WriteTo began, which keeps the bound meaningful.
	if err := t.udp.SetWriteDeadline(time.Now().Add(packetWriteTimeout)); err != nil {
		t.sendErrors.Add(1)
		return fmt.Errorf("swim: send packet to %s: %w", to, err)
	}
	if _, err := t.udp.WriteToUDPAddrPort(b, unmapAddrPort(to)); err != nil {
		t.sendErrors.Add(1)
		return fmt.Errorf("swim: send packet to %s: %w", to, err)
	}
	t.packetsSent.Add(1)
	return nil
}

// Packets returns the channel of received packets. Each packet's Data is the
// receiver's to keep. The channel is closed by Close.
func (t *NetTransport) Packets() <-chan IncomingPacket { return t.packets }

// DialStream opens a TCP stream to to. It returns when ctx is done, when the
// transport is closed, or when the connection is established.
func (t *NetTransport) DialStream(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	if t.lifetime.Err() != nil {
		return nil, fmt.Errorf("swim: dial stream to %s: %w", to, net.ErrClosed)
	}
	// Close must not wait out the dials of others, so it cancels them.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopCancelOnClose := context.AfterFunc(t.lifetime, cancel)
	defer stopCancelOnClose()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", unmapAddrPort(to).String())
	if err != nil {
		if t.lifetime.Err() != nil {
			// The dial error is only the cancellation; say why.
			return nil, fmt.Errorf("swim: dial stream to %s: transport closed: %w", to, net.ErrClosed)
		}
		return nil, fmt.Errorf("swim: dial stream to %s: %w", to, err)
	}
	return conn, nil
}

// Streams returns the channel of accepted streams. The receiver owns each
// stream and must close it. The channel is closed by Close; streams still
// queued then are closed by Close.
func (t *NetTransport) Streams() <-chan net.Conn { return t.streams }

// Close stops the transport: it closes the sockets, waits for its
// goroutines, closes the Packets and Streams channels and closes the streams
// nobody received. Streams already received stay open; their owner closes
// them. Close may be called more than once and from several goroutines;
// every call returns when the transport has stopped, with the first call's
// result.
func (t *NetTransport) Close() error {
	t.closeOnce.Do(func() {
		t.stop()
		t.closeErr = errors.Join(t.udp.Close(), t.tcp.Close())
		t.wg.Wait()
		// Only now has every sender returned, so closing cannot panic a send.
		close(t.packets)
		close(t.streams)
		for conn := range t.streams {
			_ = conn.Close()
		}
	})
	return t.closeErr
}

// Stats returns the transport's counters.
func (t *NetTransport) Stats() NetTransportStats {
	return NetTransportStats{
		PacketsReceived: t.packetsReceived.Load(),
		PacketsDropped:  t.packetsDropped.Load(),
		PacketsTooLarge: t.packetsTooLarge.Load(),
		PacketsSent:     t.packetsSent.Load(),
		SendErrors:      t.sendErrors.Load(),
		ReadErrors:      t.readErrors.Load(),
		StreamsAccepted: t.streamsAccepted.Load(),
		StreamsRefused:  t.streamsRefused.Load(),
		AcceptErrors:    t.acceptErrors.Load(),
	}
}

// sourceNetwork is the network a source address is counted in for the
// limits per source (inbound streams, newcomer checks): its /24 for IPv4,
// its /64 for IPv6. A host usually holds one address, but one attacker can
// hold many, and the addresses of one network are cheap to it where those
// of many are not.
func sourceNetwork(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{} // the zero address of a custom transport: one source
	}
	return p
}
