package harness

import (
	"context"
	"net"
	"net/netip"
	"sync"

	"github.com/swim-go/swim"
)

// SwimTransport wraps swim's NetTransport on 127.0.0.1, counting what is
// sent (packets in WriteTo, stream bytes on dialled and accepted streams)
// and dropping packets on demand. It is a PacketHandlerTransport like the
// NetTransport it wraps, so that swim handles packets on the reader
// goroutine as it does by default.
type SwimTransport struct {
	inner   *swim.NetTransport
	c       *Counters
	streams chan net.Conn
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	err     error
}

var _ swim.PacketHandlerTransport = (*SwimTransport)(nil)

// NewSwimTransport opens a NetTransport on 127.0.0.1 with maxStreams
// concurrent streams, counting in c. Its relay goroutine ends with Close.
func NewSwimTransport(c *Counters, maxStreams int) (*SwimTransport, error) {
	nt, err := swim.NewNetTransport(&swim.NetTransportConfig{
		BindAddr:             "127.0.0.1",
		MaxConcurrentStreams: maxStreams,
	})
	if err != nil {
		return nil, err
	}
	t := &SwimTransport{
		inner:   nt,
		c:       c,
		streams: make(chan net.Conn),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go t.relay()
	return t, nil
}

// relay hands accepted streams on, wrapped, until the inner transport
// closes its channel.
func (t *SwimTransport) relay() {
	defer close(t.done)
	defer close(t.streams)
	for conn := range t.inner.Streams() {
		select {
		case t.streams <- t.c.wrap(conn):
		case <-t.stop:
			_ = conn.Close()
		}
	}
}

func (t *SwimTransport) LocalAddr() netip.AddrPort { return t.inner.LocalAddr() }

func (t *SwimTransport) WriteTo(b []byte, to netip.AddrPort) error {
	if t.c.drop() {
		return nil
	}
	err := t.inner.WriteTo(b, to)
	if err == nil {
		t.c.sent(len(b))
	}
	return err
}

func (t *SwimTransport) Packets() <-chan swim.IncomingPacket { return t.inner.Packets() }

func (t *SwimTransport) HandlePackets(h func(swim.IncomingPacket)) { t.inner.HandlePackets(h) }

func (t *SwimTransport) DialStream(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	conn, err := t.inner.DialStream(ctx, to)
	if err != nil {
		return nil, err
	}
	return t.c.dialled(conn), nil
}

func (t *SwimTransport) Streams() <-chan net.Conn { return t.streams }

func (t *SwimTransport) Close() error {
	t.once.Do(func() {
		// stop first: a stream accepted while swim shuts down is closed
		// rather than waited on, so the inner Close never waits for the
		// relay.
		close(t.stop)
		t.err = t.inner.Close()
		<-t.done
	})
	return t.err
}
