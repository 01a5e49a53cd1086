package main

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"sync"

	"github.com/swim-go/swim"
)

// swimLib runs swim members at swim.DefaultLANConfig (so with
// BroadcastTree on), each over a counting wrapper of swim's NetTransport.
type swimLib struct{}

func (swimLib) name() string { return "swim" }

func (swimLib) start(i int, env *cluster) (member, error) {
	cfg := swim.DefaultLANConfig()
	t, err := newSwimCounted(env.bytes, cfg.MaxConcurrentStreams)
	if err != nil {
		return nil, err
	}
	cfg.Name = memberName(i)
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Transport = t
	tr := env.track
	// The handler runs on the member's event goroutine: it only records,
	// so that it never makes swim's message buffer overflow.
	cfg.Messages = swim.MessageFunc(func(msg swim.Message) {
		if msg.Kind == swim.MessageBroadcast {
			tr.receive(i, msg.Payload, false)
		}
	})
	ml, err := swim.New(cfg)
	if err != nil {
		_ = t.Close()
		return nil, err
	}
	return &swimMember{ml: ml, addr: t.LocalAddr().String()}, nil
}

type swimMember struct {
	ml   *swim.Memberlist
	addr string
}

func (m *swimMember) address() string { return m.addr }
func (m *swimMember) numMembers() int { return m.ml.NumMembers() }
func (m *swimMember) shutdown() error { return m.ml.Shutdown() }
func (m *swimMember) join(ctx context.Context, seed string) error {
	_, err := m.ml.Join(ctx, seed)
	return err
}

func (m *swimMember) broadcast(payload []byte) (<-chan error, error) {
	return m.ml.Broadcast(payload, "") // no key: every broadcast is its own
}

// queueFull reports whether err is swim's refusal for backed-up tree links.
func (swimLib) queueFull(err error) bool { return errors.Is(err, swim.ErrBroadcastQueueFull) }

// counters returns the member's swim counters by name (the uint64 fields of
// MemberlistStats): BroadcastsDelivered + BroadcastsDuplicate are the
// copies of broadcasts it received, TreeRedundant those that came again
// over a tree link.
func (m *swimMember) counters() map[string]uint64 {
	sum := map[string]uint64{}
	sumUintFields(sum, reflect.ValueOf(m.ml.Stats()))
	return sum
}

// outcomeKind names what swim reported through the channel Broadcast
// returned, for the notes.
func outcomeKind(err error) string {
	switch {
	case err == nil:
		return "sent"
	case errors.Is(err, swim.ErrBroadcastDropped):
		return "dropped"
	case errors.Is(err, swim.ErrBroadcastReplaced):
		return "replaced"
	}
	return "other"
}

// swimCounted wraps swim's NetTransport and counts what is sent: packets in
// WriteTo, stream bytes on dialled and accepted streams.
type swimCounted struct {
	inner   *swim.NetTransport
	bytes   *sentBytes
	streams chan net.Conn
	stop    chan struct{}
	relayed chan struct{}
	once    sync.Once
	err     error
}

// A PacketHandlerTransport like the NetTransport it wraps, so that swim
// handles packets on the reader goroutine as it does by default.
var _ swim.PacketHandlerTransport = (*swimCounted)(nil)

func newSwimCounted(bytes *sentBytes, maxStreams int) (*swimCounted, error) {
	nt, err := swim.NewNetTransport(&swim.NetTransportConfig{
		BindAddr:             "127.0.0.1",
		MaxConcurrentStreams: maxStreams,
	})
	if err != nil {
		return nil, err
	}
	t := &swimCounted{
		inner:   nt,
		bytes:   bytes,
		streams: make(chan net.Conn),
		stop:    make(chan struct{}),
		relayed: make(chan struct{}),
	}
	go t.relay()
	return t, nil
}

// relay passes accepted streams on, wrapped, until the inner transport
// closes its channel.
func (t *swimCounted) relay() {
	defer close(t.relayed)
	defer close(t.streams)
	for conn := range t.inner.Streams() {
		select {
		case t.streams <- &countedConn{Conn: conn, s: t.bytes}:
		case <-t.stop:
			_ = conn.Close()
		}
	}
}

func (t *swimCounted) LocalAddr() netip.AddrPort                 { return t.inner.LocalAddr() }
func (t *swimCounted) Packets() <-chan swim.IncomingPacket       { return t.inner.Packets() }
func (t *swimCounted) HandlePackets(h func(swim.IncomingPacket)) { t.inner.HandlePackets(h) }
func (t *swimCounted) Streams() <-chan net.Conn                  { return t.streams }

func (t *swimCounted) WriteTo(b []byte, to netip.AddrPort) error {
	err := t.inner.WriteTo(b, to)
	if err == nil {
		t.bytes.packet(len(b))
	}
	return err
}

func (t *swimCounted) DialStream(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	conn, err := t.inner.DialStream(ctx, to)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: conn, s: t.bytes}, nil
}

func (t *swimCounted) Close() error {
	t.once.Do(func() {
		// stop first: a stream accepted while swim shuts down is closed
		// rather than waited on, so the inner Close never waits for the
		// relay.
		close(t.stop)
		t.err = t.inner.Close()
		<-t.relayed
	})
	return t.err
}
