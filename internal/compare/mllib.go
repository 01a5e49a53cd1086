package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// mlLib runs hashicorp/memberlist members over a counting wrapper of
// memberlist's NetTransport.
type mlLib struct{}

func (mlLib) name() string { return "memberlist" }

// memberlistLANDefaults is memberlist.DefaultLANConfig: memberlist runs
// with it in both passes (the matched pass gives its values to swim).
func memberlistLANDefaults() *memberlist.Config { return memberlist.DefaultLANConfig() }

func (mlLib) start(i int, c *counters, rec *recorder, p plan) (member, error) {
	quiet := log.New(io.Discard, "", 0)
	var (
		nt  *memberlist.NetTransport
		err error
	)
	// Port 0 picks a free TCP port, and UDP then binds the same number,
	// which may be taken: retry as memberlist itself does.
	for range 10 {
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{"127.0.0.1"},
			BindPort:  0,
			Logger:    quiet,
		})
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	t := newMLTransport(nt, c)
	conf := memberlistLANDefaults()
	conf.Name = nodeName(i)
	conf.BindAddr = "127.0.0.1"
	conf.BindPort = 0
	conf.AdvertiseAddr = ""
	conf.Transport = t
	conf.LogOutput = io.Discard
	conf.Events = &mlEvents{rec: rec, self: i}
	if p.encrypted {
		conf.SecretKey = testKey
		conf.Label = testLabel
	}
	ml, err := memberlist.Create(conf)
	if err != nil {
		_ = t.Shutdown()
		return nil, err
	}
	return &mlMember{ml: ml, addr: fmt.Sprintf("127.0.0.1:%d", nt.GetAutoBindPort())}, nil
}

type mlMember struct {
	ml   *memberlist.Memberlist
	addr string
}

func (m *mlMember) address() string { return m.addr }
func (m *mlMember) numMembers() int { return m.ml.NumMembers() }
func (m *mlMember) shutdown() error { return m.ml.Shutdown() } // no Leave: a crash
func (m *mlMember) dropped() uint64 { return 0 }               // events are delivered synchronously
func (m *mlMember) liveNames() []string {
	ms := m.ml.Members()
	out := make([]string, len(ms))
	for i, mb := range ms {
		out[i] = mb.Name
	}
	return out
}
func (m *mlMember) join(_ context.Context, seed string) error {
	_, err := m.ml.Join([]string{seed})
	return err
}

// mlEvents reports memberlist's NotifyLeave (dead or left) to the recorder.
type mlEvents struct {
	rec  *recorder
	self int
}

func (e *mlEvents) NotifyJoin(*memberlist.Node)    {}
func (e *mlEvents) NotifyUpdate(*memberlist.Node)  {}
func (e *mlEvents) NotifyLeave(n *memberlist.Node) { e.rec.gone(e.self, n.Name) }

// mlTransport wraps memberlist's NetTransport, counting what is sent
// (packets in WriteTo and WriteToAddress, stream bytes on dialled and
// accepted streams) and dropping packets on demand. It is a
// NodeAwareTransport, like the NetTransport it wraps, so memberlist uses it
// the same way.
type mlTransport struct {
	inner     *memberlist.NetTransport
	c         *counters
	streams   chan net.Conn
	stop      chan struct{} // Shutdown began: stop handing streams on
	innerDone chan struct{} // the inner transport has shut down
	done      chan struct{}
	once      sync.Once
	err       error
}

var _ memberlist.NodeAwareTransport = (*mlTransport)(nil)

func newMLTransport(nt *memberlist.NetTransport, c *counters) *mlTransport {
	t := &mlTransport{
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
func (t *mlTransport) relay() {
	defer close(t.done)
	for {
		select {
		case conn := <-t.inner.StreamCh():
			select {
			case t.streams <- &countingConn{Conn: conn, c: t.c}:
			case <-t.stop:
				_ = conn.Close()
			}
		case <-t.innerDone:
			return
		}
	}
}

func (t *mlTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *mlTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.c.drop() {
		return time.Now(), nil
	}
	ts, err := t.inner.WriteTo(b, addr)
	if err == nil {
		t.c.sent(len(b))
	}
	return ts, err
}

func (t *mlTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.c.drop() {
		return time.Now(), nil
	}
	ts, err := t.inner.WriteToAddress(b, a)
	if err == nil {
		t.c.sent(len(b))
	}
	return ts, err
}

func (t *mlTransport) PacketCh() <-chan *memberlist.Packet { return t.inner.PacketCh() }

func (t *mlTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := t.inner.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	t.c.streams.Add(1)
	return &countingConn{Conn: conn, c: t.c}, nil
}

func (t *mlTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := t.inner.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	t.c.streams.Add(1)
	return &countingConn{Conn: conn, c: t.c}, nil
}

func (t *mlTransport) StreamCh() <-chan net.Conn { return t.streams }

func (t *mlTransport) Shutdown() error {
	t.once.Do(func() {
		close(t.stop)
		t.err = t.inner.Shutdown()
		close(t.innerDone)
		<-t.done
	})
	return t.err
}
