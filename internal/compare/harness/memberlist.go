package harness

import (
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// MLTransport wraps memberlist's NetTransport, counting what is sent
// (packets in WriteTo and WriteToAddress, stream bytes on dialled and
// accepted streams) and dropping packets on demand. It is a
// NodeAwareTransport, like the NetTransport it wraps, so memberlist uses it
// the same way.
type MLTransport struct {
	inner     *memberlist.NetTransport
	c         *Counters
	streams   chan net.Conn
	stop      chan struct{} // Shutdown began: stop handing streams on
	innerDone chan struct{} // the inner transport has shut down
	done      chan struct{}
	once      sync.Once
	err       error
}

var _ memberlist.NodeAwareTransport = (*MLTransport)(nil)

// OpenMLTransport opens a memberlist NetTransport on 127.0.0.1 at a free
// port and wraps it, counting in c.
func OpenMLTransport(c *Counters) (*MLTransport, error) {
	quiet := log.New(io.Discard, "", 0)
	var (
		nt  *memberlist.NetTransport
		err error
	)
	// Port 0 picks a free TCP port, and UDP then binds the same number,
	// which may be taken: retry, as memberlist itself does.
	for range 10 {
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{"127.0.0.1"},
			Logger:    quiet,
		})
		if err == nil {
			return NewMLTransport(nt, c), nil
		}
	}
	return nil, err
}

// NewMLTransport wraps nt, counting in c. Its relay goroutine ends with
// Shutdown.
func NewMLTransport(nt *memberlist.NetTransport, c *Counters) *MLTransport {
	t := &MLTransport{
		inner:     nt,
		c:         c,
		streams:   make(chan net.Conn),
		stop:      make(chan struct{}),
		innerDone: make(chan struct{}),
		done:      make(chan struct{}),
	}
	go t.relay()
	return t
}

// relay hands accepted streams on, wrapped. memberlist's NetTransport never
// closes its stream channel and blocks its acceptor on it, so the relay
// keeps taking (and, after Shutdown began, closing) streams until the inner
// transport is down.
func (t *MLTransport) relay() {
	defer close(t.done)
	for {
		select {
		case conn := <-t.inner.StreamCh():
			select {
			case t.streams <- t.c.wrap(conn):
			case <-t.stop:
				_ = conn.Close()
			}
		case <-t.innerDone:
			return
		}
	}
}

func (t *MLTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *MLTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.c.drop() {
		return time.Now(), nil
	}
	ts, err := t.inner.WriteTo(b, addr)
	if err == nil {
		t.c.sent(len(b))
	}
	return ts, err
}

func (t *MLTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.c.drop() {
		return time.Now(), nil
	}
	ts, err := t.inner.WriteToAddress(b, a)
	if err == nil {
		t.c.sent(len(b))
	}
	return ts, err
}

func (t *MLTransport) PacketCh() <-chan *memberlist.Packet { return t.inner.PacketCh() }

func (t *MLTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := t.inner.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return t.c.dialled(conn), nil
}

func (t *MLTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := t.inner.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return t.c.dialled(conn), nil
}

func (t *MLTransport) StreamCh() <-chan net.Conn { return t.streams }

func (t *MLTransport) Shutdown() error {
	t.once.Do(func() {
		close(t.stop)
		t.err = t.inner.Shutdown()
		close(t.innerDone)
		<-t.done
	})
	return t.err
}

// Address is the address the wrapped transport listens on.
func (t *MLTransport) Address() string {
	return fmt.Sprintf("127.0.0.1:%d", t.inner.GetAutoBindPort())
}
