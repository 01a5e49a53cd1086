package migrate

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim"
)

// Standby: a process that left migration mode keeps its memberlist port,
// so that a rollback stays safe after the cluster has left the mode. A
// process that runs memberlist alone and joins the cluster again (an old
// build redeployed on one machine) joins through memberlist seeds; their
// ports answer it, which wakes their memberlist side, and a woken process
// that sees a process running memberlist alone calls every process in
// standby back into migration mode over swim. Once no process has run
// memberlist alone for StandbyGrace, the woken processes leave the mode
// again by themselves.
//
// While asleep, the port costs nothing: packets that reach it are dropped
// (processes still bridged send memberlist's gossip to the recently left
// for a while), and only a stream, which memberlist opens to join or to
// exchange state, wakes it. The stream is handed to the woken memberlist
// side, so the joiner's first join succeeds. A process still bridged
// whose push-pull reaches a process that has just left wakes it too; such
// a wake finds no process running memberlist alone and ends after
// wakeCheck.

// rejoinPrefix starts the swim broadcast that calls processes in standby
// back into migration mode; the rest is the caller's name, a NUL, and its
// memberlist address. The Bridge keeps such messages from the application.
const rejoinPrefix = "\x00swim/migrate rejoin\x00"

// rejoinEvery paces a woken process's calls while it sees a process that
// runs memberlist alone: processes in standby that missed one call (or
// started in standby since) get the next.
const rejoinEvery = 10 * time.Second

// watchEvery is how often a woken process checks for processes running
// memberlist alone.
const watchEvery = time.Second

// wakeCheck is how long a woken process that has found no process
// running memberlist alone stays awake: the stream that woke it came from
// a process still bridged (a push-pull to a process that had just left,
// or a bridged process joining). A joiner running memberlist alone is
// known at once, its join being that stream, and found once the swim join
// of it fails (a refused connection, or swim's join timeout of 2 s).
const wakeCheck = 10 * time.Second

// Phase is where a Bridge stands in the migration.
type Phase int

const (
	// PhaseBridged: a member of both clusters.
	PhaseBridged Phase = iota
	// PhaseStandby: out of migration mode, its memberlist port kept; a
	// process running memberlist alone that joins through it brings the
	// cluster back into migration mode.
	PhaseStandby
	// PhaseWoken: back in migration mode from standby because a process
	// runs memberlist alone; it returns to standby StandbyGrace after the
	// last such process is gone.
	PhaseWoken
	// PhaseSwim: out of migration mode for good (Config.NoStandby, or the
	// port could not be kept).
	PhaseSwim
)

func (p Phase) String() string {
	switch p {
	case PhaseBridged:
		return "bridge"
	case PhaseStandby:
		return "standby"
	case PhaseWoken:
		return "woken"
	case PhaseSwim:
		return "swim"
	}
	return "unknown"
}

// Phase reports where the Bridge stands.
func (b *Bridge) Phase() Phase {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.ml != nil && b.sb != nil:
		return PhaseWoken
	case b.ml != nil:
		return PhaseBridged
	case b.sb != nil:
		return PhaseStandby
	}
	return PhaseSwim
}

// MemberlistAddr is the address this process's memberlist side
// advertises, or would advertise on waking; invalid once the port is
// given up (PhaseSwim).
func (b *Bridge) MemberlistAddr() netip.AddrPort {
	b.mu.Lock()
	ml, sb := b.ml, b.sb
	b.mu.Unlock()
	switch {
	case ml != nil:
		return mlAddr(ml.LocalNode())
	case sb != nil:
		return sb.adv
	}
	return netip.AddrPort{}
}

// standby holds a memberlist port for a process out of migration mode:
// its sockets outlive each memberlist side that runs on them.
type standby struct {
	udp   *net.UDPConn
	tcp   *net.TCPListener
	adv   netip.AddrPort // the address the process's memberlist side advertised
	wg    sync.WaitGroup
	mu    sync.Mutex
	awake *portTransport // the woken memberlist side's transport, nil while asleep
}

// openStandby binds the port, TCP first so that port 0 picks one for
// both, as memberlist does; an advertised port 0 is the bound one.
func openStandby(bind, adv netip.AddrPort) (*standby, error) {
	tcp, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(bind))
	if err != nil {
		return nil, err
	}
	port := uint16(tcp.Addr().(*net.TCPAddr).Port)
	udp, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(bind.Addr(), port)))
	if err != nil {
		_ = tcp.Close()
		return nil, err
	}
	if adv.Port() == 0 {
		adv = netip.AddrPortFrom(adv.Addr(), port)
	}
	return &standby{udp: udp, tcp: tcp, adv: adv}, nil
}

func (s *standby) attached() *portTransport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.awake
}

func (s *standby) close() {
	_ = s.udp.Close()
	_ = s.tcp.Close()
	s.wg.Wait()
}

// readFailed reports whether a socket's read or accept error ends its
// loop (the socket is closed); other errors (out of file descriptors,
// say) are waited out with a backoff, as memberlist's own transport
// does, rather than spun on.
func readFailed(err error, fails *int) bool {
	if errors.Is(err, net.ErrClosed) {
		return true
	}
	*fails++
	time.Sleep(min(5*time.Millisecond<<min(*fails, 8), time.Second))
	return false
}

// standbyPackets reads the port's packets: to the woken memberlist side,
// or dropped while asleep.
func (b *Bridge) standbyPackets(s *standby) {
	defer s.wg.Done()
	buf := make([]byte, 65536)
	fails := 0
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			if readFailed(err, &fails) {
				return
			}
			continue
		}
		fails = 0
		t := s.attached()
		if t == nil {
			b.mu.Lock()
			b.stats.StandbyPacketsDropped++
			b.mu.Unlock()
			continue
		}
		t.deliverPacket(&memberlist.Packet{Buf: bytes.Clone(buf[:n]), From: from, Timestamp: time.Now()})
	}
}

// standbyStreams accepts the port's streams: to the woken memberlist side,
// after waking it if asleep.
func (b *Bridge) standbyStreams(s *standby) {
	defer s.wg.Done()
	fails := 0
	for {
		conn, err := s.tcp.Accept()
		if err != nil {
			if readFailed(err, &fails) {
				return
			}
			continue
		}
		fails = 0
		t := s.attached()
		if t == nil {
			t = b.wake("")
		}
		if t == nil {
			_ = conn.Close()
			continue
		}
		t.deliverStream(conn)
	}
}

// wake starts a memberlist side on the standby port, unless one runs, and
// joins join through it if given; it returns the side's transport, nil
// when there is no standby or the Bridge is stopping.
func (b *Bridge) wake(join string) *portTransport {
	b.transit.Lock()
	defer b.transit.Unlock()
	b.mu.Lock()
	s, ml := b.sb, b.ml
	stopping := b.ctx.Err() != nil
	b.mu.Unlock()
	if s == nil || stopping {
		return nil
	}
	if ml != nil {
		if join != "" {
			b.joinMemberlist(ml, join)
		}
		return s.attached()
	}
	t := &portTransport{s: s, packets: make(chan *memberlist.Packet, 64), streams: make(chan net.Conn, 8), done: make(chan struct{})}
	mc := *b.mc // its Delegate and Events are the Bridge's already
	mc.Transport = t
	s.mu.Lock()
	s.awake = t
	s.mu.Unlock()
	ml, err := memberlist.Create(&mc)
	if err != nil {
		_ = t.Shutdown()
		b.mu.Lock()
		b.stats.WakeFailures++
		b.mu.Unlock()
		return nil
	}
	b.mu.Lock()
	b.ml = ml
	b.stats.Wakes++
	b.wg.Add(1)
	b.mu.Unlock()
	go b.watchWoken(ml)
	if join != "" {
		b.joinMemberlist(ml, join)
	}
	return t
}

// joinMemberlist joins the memberlist side through addr in the background.
func (b *Bridge) joinMemberlist(ml *memberlist.Memberlist, addr string) {
	b.spawn(func() { _, _ = ml.Join([]string{addr}) })
}

// spawn runs f on a goroutine Shutdown waits for, unless the Bridge is
// stopping.
func (b *Bridge) spawn(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// watchWoken runs while ml, a memberlist side woken from standby, runs:
// while a process runs memberlist alone, it calls the processes in
// standby back over swim; StandbyGrace after the last one is gone, or
// wakeCheck after the wake if it saw none, it returns to standby.
func (b *Bridge) watchWoken(ml *memberlist.Memberlist) {
	defer b.wg.Done()
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	seen := time.Now() // the wake itself counts: its grace starts now
	var called time.Time
	found := false // a process running memberlist alone was seen
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-tick.C:
		}
		if b.Memberlist() != ml {
			return // LeaveMemberlist took it
		}
		now := time.Now()
		if b.foundMemberlistOnly() {
			seen, found = now, true
			if now.Sub(called) >= rejoinEvery {
				called = now
				b.callRejoin(ml)
			}
			continue
		}
		stay := b.cfg.StandbyGrace
		if !found {
			stay = min(stay, wakeCheck)
		}
		if now.Sub(seen) >= stay {
			ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
			_ = b.leaveMemberlist(ctx, ml, true)
			cancel()
			return
		}
	}
}

// foundMemberlistOnly reports whether a process runs memberlist alone for
// certain: it is live on memberlist, not on swim, and its swim join
// failed. A bridged process that has just joined memberlist is not on
// swim yet either, but its swim join succeeds; the check tries the swim
// join of each candidate (findSwim paces the tries).
func (b *Bridge) foundMemberlistOnly() bool {
	found := false
	for _, name := range b.MemberlistOnly() {
		b.mu.Lock()
		n, ok := b.mlNodes[name]
		certain := b.noSwim[name]
		b.mu.Unlock()
		if certain {
			found = true
		} else if ok {
			b.findSwim(&n)
		}
	}
	return found
}

// callRejoin broadcasts on swim the call back into migration mode, with
// this process's memberlist address to join through.
func (b *Bridge) callRejoin(ml *memberlist.Memberlist) {
	addr := mlAddr(ml.LocalNode())
	msg := []byte(rejoinPrefix + b.name + "\x00" + addr.String())
	if _, err := b.sw.Broadcast(msg, rejoinPrefix); err == nil {
		b.mu.Lock()
		b.stats.RejoinCalls++
		b.mu.Unlock()
	}
}

// swimMessage keeps the Bridge's own calls from the application. Every
// application message passes here: only a payload that starts with the
// call's prefix is copied into a string.
func (b *Bridge) swimMessage(m swim.Message) {
	if bytes.HasPrefix(m.Payload, []byte(rejoinPrefix)) {
		name, addr, ok := strings.Cut(string(m.Payload[len(rejoinPrefix):]), "\x00")
		if ok && name != b.name {
			if _, err := netip.ParseAddrPort(addr); err == nil {
				b.rejoinCalled(name, addr)
			}
		}
		return
	}
	if b.cfg.Messages != nil {
		b.cfg.Messages.HandleMessage(m)
	}
}

// rejoinCalled answers a call back into migration mode: a process in
// standby wakes and joins the caller; a woken one joins it if it does
// not know it (two processes woken apart would otherwise form two
// memberlist clusters); a process still bridged is in the caller's
// cluster already.
func (b *Bridge) rejoinCalled(name, addr string) {
	b.mu.Lock()
	sb, ml := b.sb, b.ml
	n, known := b.mlNodes[name]
	b.mu.Unlock()
	switch {
	case sb == nil: // still bridged, or out for good
	case ml == nil:
		// swim delivers messages on its own goroutine; a wake creates a
		// memberlist side, which must not hold it up.
		b.spawn(func() { b.wake(addr) })
	case !known || !mlLive(n.State): // woken
		b.joinMemberlist(ml, addr)
	}
}

// portTransport is a memberlist Transport on a standby port's sockets:
// memberlist's own transport would close them at its Shutdown, and a
// stream that woke the side must reach it.
type portTransport struct {
	s       *standby
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*portTransport)(nil)

func (t *portTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.IP(t.s.adv.Addr().AsSlice()), int(t.s.adv.Port()), nil
}

func (t *portTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.s.udp.WriteTo(b, ua)
	return time.Now(), err
}

func (t *portTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

func (t *portTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *portTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", addr)
}

func (t *portTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

func (t *portTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown detaches the transport from the port, which stays open.
func (t *portTransport) Shutdown() error {
	t.once.Do(func() {
		close(t.done)
		t.s.mu.Lock()
		if t.s.awake == t {
			t.s.awake = nil
		}
		t.s.mu.Unlock()
	})
	return nil
}

func (t *portTransport) deliverPacket(p *memberlist.Packet) {
	select {
	case t.packets <- p:
	case <-t.done:
	}
}

func (t *portTransport) deliverStream(c net.Conn) {
	select {
	case t.streams <- c:
	case <-t.done:
		_ = c.Close()
	}
}
