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
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Bounds of the waits on protocol behaviour over loopback with the local
// profile. Formation takes a few gossip rounds (100ms each); a failure takes
// a probe period, a suspicion (0.6s to 3.6s) and its gossip. The bounds are
// generous so that a loaded CI machine under -race does not flake; a healthy
// run takes a fraction of them.
const (
	formTimeout   = 10 * time.Second
	detectTimeout = 20 * time.Second
	pollEvery     = 20 * time.Millisecond
)

// eventLog records the events a member delivers.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) HandleEvent(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// about returns the events about the named member, in delivery order.
func (l *eventLog) about(name string) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.events {
		if e.Member.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// saw reports whether an event of kind about name, in state, was delivered.
func (l *eventLog) saw(kind EventKind, name string, state State) bool {
	for _, e := range l.about(name) {
		if e.Kind == kind && e.Member.State == state {
			return true
		}
	}
	return false
}

type testMember struct {
	*Memberlist
	log *eventLog
}

// testConfig is the configuration of the real-socket tests: the local
// profile on 127.0.0.1, a free port.
func testConfig(name string) *Config {
	c := DefaultLocalConfig()
	c.Name = name
	c.BindAddr = "127.0.0.1"
	c.BindPort = 0
	return c
}

// startMember starts a member that records its events and shuts down at
// the end of the test.
func startMember(t *testing.T, cfg *Config) *testMember {
	t.Helper()
	log := &eventLog{}
	if cfg.Events == nil {
		cfg.Events = log
	}
	ml, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ml.Shutdown()) })
	return &testMember{Memberlist: ml, log: log}
}

// startCluster starts n members, joins all to the first and waits until
// every one sees n live members.
func startCluster(t *testing.T, n int) []*testMember {
	t.Helper()
	members := make([]*testMember, n)
	for i := range members {
		members[i] = startMember(t, testConfig(fmt.Sprintf("node-%d", i)))
	}
	seed := members[0].LocalMember().Addr.String()
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	for _, m := range members[1:] {
		joined, err := m.Join(ctx, seed)
		require.NoError(t, err)
		require.Equal(t, 1, joined)
	}
	require.Eventually(t, func() bool {
		for _, m := range members {
			if m.NumMembers() != n {
				return false
			}
		}
		return true
	}, formTimeout, pollEvery, "cluster of %d did not form: %s", n, views(members))
	return members
}

// views describes what each member sees, for failure messages.
func views(members []*testMember) string {
	var b bytes.Buffer
	for _, m := range members {
		fmt.Fprintf(&b, "\n%s sees", m.LocalMember().Name)
		for _, mb := range m.Members() {
			fmt.Fprintf(&b, " %s(%s,%d)", mb.Name, mb.State, mb.Incarnation)
		}
		st := m.Stats()
		fmt.Fprintf(&b, " | pushpulls %d failed %d, suspicions %d deaths %d", st.PushPulls, st.PushPullsFailed, st.SuspicionsRaised, st.DeathsDeclared)
	}
	return b.String()
}

func TestClusterFormsThroughOneSeed(t *testing.T) {
	members := startCluster(t, 5)
	for _, m := range members {
		got := m.Members()
		require.Len(t, got, 5)
		for i, mb := range got {
			require.Equal(t, fmt.Sprintf("node-%d", i), mb.Name, "sorted by name")
			require.Equal(t, StateAlive, mb.State)
			require.True(t, mb.Addr.IsValid())
		}
		local := m.LocalMember()
		require.Equal(t, StateAlive, local.State)
		require.NotZero(t, local.Addr.Port(), "port 0 is replaced by the bound port")
	}
	// Every member reported the four others as joined.
	require.Eventually(t, func() bool {
		for i, m := range members {
			for j := range members {
				if i != j && !m.log.saw(EventJoin, fmt.Sprintf("node-%d", j), StateAlive) {
					return false
				}
			}
		}
		return true
	}, formTimeout, pollEvery)
}

func TestCrashedMemberIsReportedDead(t *testing.T) {
	members := startCluster(t, 5)
	victim := members[4]
	require.NoError(t, victim.Shutdown()) // no Leave: to the others it crashed
	require.Equal(t, StateDead, victim.LocalMember().State, "a member shut down does not claim to be alive")

	require.Eventually(t, func() bool {
		for _, m := range members[:4] {
			if !m.log.saw(EventLeave, "node-4", StateDead) || m.NumMembers() != 4 {
				return false
			}
		}
		return true
	}, detectTimeout, pollEvery, "survivors did not declare node-4 dead")
	for _, m := range members[:4] {
		require.False(t, m.log.saw(EventLeave, "node-4", StateLeft), "a crash is not a graceful leave")
	}
}

func TestGracefulLeaveIsReportedLeft(t *testing.T) {
	members := startCluster(t, 4)
	leaver := members[3]
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	require.NoError(t, leaver.Leave(ctx))
	require.NoError(t, leaver.Leave(ctx), "leaving twice is leaving")
	require.NoError(t, leaver.Shutdown())
	require.Equal(t, StateLeft, leaver.LocalMember().State, "it left before it stopped")

	require.Eventually(t, func() bool {
		for _, m := range members[:3] {
			if !m.log.saw(EventLeave, "node-3", StateLeft) || m.NumMembers() != 3 {
				return false
			}
		}
		return true
	}, detectTimeout, pollEvery, "the others did not report node-3 as left")
	for _, m := range members[:3] {
		require.False(t, m.log.saw(EventLeave, "node-3", StateDead), "a graceful leave is not a failure")
	}
}

func TestLeaveAloneReturnsAtOnce(t *testing.T) {
	m := startMember(t, testConfig("alone"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	require.NoError(t, m.Leave(ctx), "nobody to tell")
	require.Zero(t, m.NumMembers(), "a member that left is not live")
	require.Equal(t, StateLeft, m.LocalMember().State)

	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	require.ErrorIs(t, m.UpdateMeta(done, []byte("x")), context.Canceled, "a ctx already done acts on nothing")
	require.Empty(t, m.LocalMember().Meta)
	require.NoError(t, m.Leave(ctx), "leaving twice is leaving")
}

// TestCallbackMayCallMethods checks principle 3: events are delivered
// outside every lock, so a handler may call the Memberlist back.
func TestCallbackMayCallMethods(t *testing.T) {
	var self atomic.Pointer[Memberlist]
	var calls atomic.Int64
	var mu sync.Mutex
	var seen []int
	cfg := testConfig("caller")
	cfg.Events = EventFunc(func(e Event) {
		ml := self.Load()
		members := ml.Members()
		n := ml.NumMembers()
		_ = ml.LocalMember()
		_ = ml.Stats() // goes through the loop: must not wait for the dispatcher
		mu.Lock()
		seen = append(seen, len(members), n)
		mu.Unlock()
		calls.Add(1)
	})
	caller := startMember(t, cfg)
	self.Store(caller.Memberlist)

	others := []*testMember{startMember(t, testConfig("a")), startMember(t, testConfig("b"))}
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	for _, o := range others {
		_, err := caller.Join(ctx, o.LocalMember().Addr.String())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return calls.Load() >= 2 && caller.NumMembers() == 3 },
		formTimeout, pollEvery)
	// UpdateMeta from another member makes the handler run again while
	// the cluster is busy.
	require.NoError(t, others[0].UpdateMeta(ctx, []byte("v2")))
	require.Eventually(t, func() bool {
		for _, mb := range caller.Members() {
			if mb.Name == "a" {
				return bytes.Equal(mb.Meta, []byte("v2"))
			}
		}
		return false
	}, formTimeout, pollEvery)
	require.Eventually(t, func() bool { return calls.Load() >= 3 }, formTimeout, pollEvery)
	mu.Lock()
	defer mu.Unlock()
	for _, n := range seen {
		require.True(t, n >= 1 && n <= 3, "a callback saw %d members", n)
	}
}

// TestShutdownFromCallback: Shutdown waits for every goroutine, but not for
// the callback that called it.
func TestShutdownFromCallback(t *testing.T) {
	var self atomic.Pointer[Memberlist]
	returned := make(chan error, 1)
	cfg := testConfig("quitter")
	var once sync.Once
	cfg.Events = EventFunc(func(e Event) {
		once.Do(func() { returned <- self.Load().Shutdown() })
	})
	quitter := startMember(t, cfg)
	self.Store(quitter.Memberlist)
	other := startMember(t, testConfig("other"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, _ = quitter.Join(ctx, other.LocalMember().Addr.String()) // may race with the Shutdown
	select {
	case err := <-returned:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Shutdown called from a callback did not return")
	}
	_, err := quitter.Join(ctx, other.LocalMember().Addr.String())
	require.ErrorIs(t, err, ErrShutdown)
}

func TestSlowHandlerDropsAndCountsEvents(t *testing.T) {
	release := make(chan struct{})
	cfg := testConfig("slow")
	cfg.EventBuffer = 1
	cfg.Events = EventFunc(func(Event) { <-release })
	slow := startMember(t, cfg)
	t.Cleanup(func() { close(release) }) // runs before the Shutdown registered above

	// Each join produces one event at slow: the first blocks the handler,
	// the second fills the buffer, the rest are dropped.
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	for i := range 4 {
		o := startMember(t, testConfig(fmt.Sprintf("peer-%d", i)))
		_, err := o.Join(ctx, slow.LocalMember().Addr.String())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return slow.NumMembers() == 5 }, formTimeout, pollEvery,
		"a blocked handler must not stall the protocol")
	require.Eventually(t, func() bool { return slow.Stats().EventsDropped >= 2 }, formTimeout, pollEvery)
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		field  string
	}{
		{"zero ProbeInterval", func(c *Config) { c.ProbeInterval = 0 }, "ProbeInterval"},
		{"negative IndirectChecks", func(c *Config) { c.IndirectChecks = -1 }, "IndirectChecks"},
		{"metadata over MaxMetaSize", func(c *Config) { c.Meta = make([]byte, c.MaxMetaSize+1) }, "Meta"},
		{"empty Name", func(c *Config) { c.Name = "" }, "Name"},
		{"zero EventBuffer", func(c *Config) { c.EventBuffer = 0 }, "EventBuffer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("bad")
			tt.change(cfg)
			ml, err := New(cfg)
			require.Nil(t, ml)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tt.field, ce.Field)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, tt.field)
		})
	}
	t.Run("nil config", func(t *testing.T) {
		_, err := New(nil)
		require.ErrorIs(t, err, ErrInvalidConfig)
	})
	t.Run("metadata error names MaxMetaSize", func(t *testing.T) {
		cfg := testConfig("bad")
		cfg.Meta = make([]byte, cfg.MaxMetaSize+1)
		_, err := New(cfg)
		require.ErrorContains(t, err, "MaxMetaSize")
	})
}

func TestUpdateMeta(t *testing.T) {
	members := startCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()

	err := members[0].UpdateMeta(ctx, make([]byte, members[0].cfg.MaxMetaSize+1))
	require.ErrorIs(t, err, ErrMetaTooLarge)
	require.ErrorContains(t, err, "MaxMetaSize")

	meta := []byte("zone=a")
	require.NoError(t, members[0].UpdateMeta(ctx, meta))
	meta[0] = 'X' // the caller's buffer is not retained
	require.Equal(t, []byte("zone=a"), members[0].LocalMember().Meta)
	require.Eventually(t, func() bool {
		for _, e := range members[1].log.about("node-0") {
			if e.Kind == EventUpdate && bytes.Equal(e.Member.Meta, []byte("zone=a")) {
				return true
			}
		}
		return false
	}, formTimeout, pollEvery)
	got := members[1].Members()
	got[0].Meta[0] = 'X' // a copy: the snapshot is untouched
	require.Equal(t, []byte("zone=a"), members[1].Members()[0].Meta)
}

func TestGarbagePacketIsDroppedAndCounted(t *testing.T) {
	m := startMember(t, testConfig("target"))
	before := m.Stats().PacketsDropped

	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(m.LocalMember().Addr))
	require.NoError(t, err)
	defer conn.Close()
	garbage := [][]byte{
		{0xff},
		[]byte("definitely not a swim packet"),
		{1, 9, 0xdc, 0xff, 0xff}, // version, compound, huge array header
		bytes.Repeat([]byte{1, 1}, 700),
	}
	for _, g := range garbage {
		_, err := conn.Write(g)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return m.Stats().PacketsDropped >= before+uint64(len(garbage))
	}, formTimeout, pollEvery)
	require.Equal(t, 1, m.NumMembers(), "still alive and alone")
}

func TestGarbageStreamIsRefused(t *testing.T) {
	m := startMember(t, testConfig("target"))
	conn, err := net.Dial("tcp", m.LocalMember().Addr.String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte{0, 0, 0, 5, 1, 2, 3, 4, 5})
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(formTimeout)))
	n, err := conn.Read(make([]byte, 16))
	require.Zero(t, n)
	require.Error(t, err, "the member closes the stream without a reply")
	require.Equal(t, 1, m.NumMembers())
}

func TestJoinUnreachableSeed(t *testing.T) {
	cfg := testConfig("lonely")
	// Exchanges that outlast every test: only the caller's context can end
	// a join with a seed that never answers.
	cfg.StreamTimeout = time.Hour
	m := startMember(t, cfg)

	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n, err := joinReturns(t, m, ctx, "192.0.2.1:7946") // TEST-NET-1: nothing answers
		require.Error(t, err)
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, n)
	})
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		n, err := joinReturns(t, m, ctx, silentSeed(t))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Zero(t, n)
	})
	t.Run("refused", func(t *testing.T) {
		// A port nobody listens on: the dial fails at once, and so does
		// Join, with the seed named.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
		defer cancel()
		n, err := m.Join(ctx, addr)
		require.Error(t, err)
		require.ErrorContains(t, err, addr)
		require.Zero(t, n)
	})
	t.Run("bad address", func(t *testing.T) {
		n, err := m.Join(context.Background(), "127.0.0.1:notaport")
		require.Error(t, err)
		require.Zero(t, n)
	})
	t.Run("no address", func(t *testing.T) {
		_, err := m.Join(context.Background())
		require.Error(t, err)
	})
}

// joinReturns calls m.Join and fails the test if it has not returned
// within formTimeout, far less than the member's StreamTimeout: a join
// that does not end with its context would otherwise hang the test.
func joinReturns(t *testing.T, m *testMember, ctx context.Context, seeds ...string) (int, error) {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := m.Join(ctx, seeds...)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-time.After(formTimeout):
		t.Fatalf("Join(%v) did not return when its context ended", seeds)
		return 0, nil
	}
}

// silentSeed returns the address of a TCP listener that never accepts: the
// kernel completes the handshake, so an exchange with it writes its request
// and waits for a reply that never comes.
func silentSeed(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

func TestJoinOneGoodSeedOfTwo(t *testing.T) {
	a := startMember(t, testConfig("a"))
	b := startMember(t, testConfig("b"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	n, err := b.Join(ctx, dead, a.LocalMember().Addr.String())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool { return a.NumMembers() == 2 && b.NumMembers() == 2 }, formTimeout, pollEvery)
}

func TestJoinByName(t *testing.T) {
	a := startMember(t, testConfig("a"))
	b := startMember(t, testConfig("b"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	// localhost may also resolve to ::1, where nobody listens: one answer
	// is enough.
	n, err := b.Join(ctx, fmt.Sprintf("localhost:%d", a.LocalMember().Addr.Port()))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool { return a.NumMembers() == 2 }, formTimeout, pollEvery)
}

func TestResolveSeed(t *testing.T) {
	tests := []struct {
		addr string
		want string
		err  bool
	}{
		{"127.0.0.1:80", "127.0.0.1:80", false},
		{"127.0.0.1", "127.0.0.1:7946", false},
		{"[::1]:80", "[::1]:80", false},
		{"[::1]", "[::1]:7946", false},
		{"::1", "[::1]:7946", false},
		{"[::ffff:10.0.0.1]:5", "10.0.0.1:5", false},
		{"127.0.0.1:99999", "", true},
		{"127.0.0.1:x", "", true},
		{":80", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, err := resolveSeed(context.Background(), tt.addr)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort(tt.want)}, got)
		})
	}
}

func TestShutdownIsIdempotent(t *testing.T) {
	m := startMember(t, testConfig("once"))
	require.NoError(t, m.Shutdown())
	require.NoError(t, m.Shutdown())

	ctx := context.Background()
	_, err := m.Join(ctx, "127.0.0.1:7946")
	require.ErrorIs(t, err, ErrShutdown)
	require.ErrorIs(t, m.Leave(ctx), ErrShutdown)
	require.ErrorIs(t, m.UpdateMeta(ctx, nil), ErrShutdown)
	// The readers keep answering from the last view.
	require.Equal(t, 1, m.NumMembers())
	require.Equal(t, "once", m.LocalMember().Name)
	require.Len(t, m.Members(), 1)
	_ = m.Stats()

	// Concurrent calls all return once everything stopped.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { require.NoError(t, m.Shutdown()) })
	}
	wg.Wait()
}

func TestShutdownDuringJoin(t *testing.T) {
	m := startMember(t, testConfig("busy"))
	errc := make(chan error, 1)
	go func() {
		_, err := m.Join(context.Background(), silentSeed(t))
		errc <- err
	}()
	require.Eventually(t, func() bool { return m.Stats().PushPulls > 0 }, formTimeout, pollEvery)
	require.NoError(t, m.Shutdown())
	select {
	case err := <-errc:
		require.True(t, errors.Is(err, ErrShutdown), "got %v", err)
	case <-time.After(formTimeout):
		t.Fatal("Join did not return at Shutdown")
	}
}

// TestShutdownFromCallbackAndOutside: a callback and another goroutine
// shutting down at once must both return.
func TestShutdownFromCallbackAndOutside(t *testing.T) {
	var self atomic.Pointer[Memberlist]
	entered := make(chan struct{})
	release := make(chan struct{})
	fromCallback := make(chan error, 1)
	var once sync.Once
	cfg := testConfig("both")
	cfg.Events = EventFunc(func(e Event) {
		once.Do(func() {
			close(entered)
			<-release
			fromCallback <- self.Load().Shutdown()
		})
	})
	m := startMember(t, cfg)
	self.Store(m.Memberlist)
	other := startMember(t, testConfig("other"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := m.Join(ctx, other.LocalMember().Addr.String())
	require.NoError(t, err)

	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("no event delivered")
	}
	fromOutside := make(chan error, 1)
	go func() { fromOutside <- m.Shutdown() }()
	close(release)
	for _, c := range []chan error{fromCallback, fromOutside} {
		select {
		case err := <-c:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("Shutdown deadlocked")
		}
	}
}

// channelTransport hides a transport's PacketHandlerTransport method, so
// that Memberlist takes its packets from the Packets channel.
type channelTransport struct{ Transport }

// BenchmarkPingRoundTrip sends a running member one ping at a time over
// loopback UDP and waits for its ack: the whole per-packet path of a
// member at the few packets a second a cluster sends each (socket,
// goroutine wake-ups, envelope, Machine, send). cpu-µs/op is the process's
// CPU time per round trip, the pinger's included; "reader" handles packets
// on the transport's reader goroutine, "channel" through the Packets
// channel.
func BenchmarkPingRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name    string
		wrapped bool
	}{{"reader", false}, {"channel", true}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := testConfig("bench")
			if tc.wrapped {
				nt, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1"})
				require.NoError(b, err)
				cfg.Transport = channelTransport{nt}
			}
			ml, err := New(cfg)
			require.NoError(b, err)
			defer ml.Shutdown()
			conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(ml.LocalMember().Addr))
			require.NoError(b, err)
			defer conn.Close()
			buf := make([]byte, 2048)
			roundTrip := func(seq uint32) {
				pkt, err := wire.AppendPacket(nil, &wire.Ping{Seq: seq, Target: "bench", From: "peer"})
				require.NoError(b, err)
				_, err = conn.Write(pkt)
				require.NoError(b, err)
				require.NoError(b, conn.SetReadDeadline(time.Now().Add(transportTestWait)))
				for {
					n, err := conn.Read(buf)
					require.NoError(b, err, "no ack")
					msgs, err := wire.DecodePacket(buf[:n])
					require.NoError(b, err)
					for _, msg := range msgs {
						if a, ok := msg.(*wire.Ack); ok && a.Seq == seq {
							return
						}
					}
				}
			}
			roundTrip(0) // warm up
			b.ReportAllocs()
			cpu := processCPU()
			seq := uint32(1)
			for b.Loop() {
				roundTrip(seq)
				seq++
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// streamsNeverClosed is a Transport whose Close leaves the Streams channel
// open, against the interface's contract, with one last accepted stream
// queued in it.
type streamsNeverClosed struct {
	Transport
	streams chan net.Conn
	late    net.Conn // queued by Close
}

func (t streamsNeverClosed) Streams() <-chan net.Conn { return t.streams }

func (t streamsNeverClosed) Close() error {
	err := t.Transport.Close()
	t.streams <- t.late
	return err
}

// TestShutdownWithTransportThatNeverClosesStreams: Shutdown returns even
// when a custom transport's Streams channel stays open after its Close, and
// closes the streams left waiting in it.
func TestShutdownWithTransportThatNeverClosesStreams(t *testing.T) {
	nt, err := NewNetTransport(&NetTransportConfig{BindAddr: "127.0.0.1"})
	require.NoError(t, err)
	late, peer := net.Pipe()
	defer peer.Close()
	cfg := testConfig("custom")
	cfg.Transport = streamsNeverClosed{Transport: nt, streams: make(chan net.Conn, 1), late: late}
	ml, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, peer.SetReadDeadline(time.Now().Add(formTimeout)))

	done := make(chan error, 1)
	go func() { done <- ml.Shutdown() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(formTimeout):
		t.Fatal("Shutdown hangs on a Streams channel that is never closed")
	}
	_, err = peer.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the stream left in the channel is closed")
}

// TestShutdownWaitsForRunningCallback: Shutdown called from outside while
// a callback runs returns only once the callback has, even though the
// dispatcher is inside the handler (the case a callback's own Shutdown
// must not wait for).
func TestShutdownWaitsForRunningCallback(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	var handlerReturned atomic.Bool
	cfg := testConfig("busy-handler")
	cfg.Events = EventFunc(func(Event) {
		once.Do(func() {
			close(entered)
			<-release
			handlerReturned.Store(true)
		})
	})
	m := startMember(t, cfg)
	other := startMember(t, testConfig("other"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := m.Join(ctx, other.LocalMember().Addr.String())
	require.NoError(t, err)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("no event delivered")
	}

	returned := make(chan error, 1)
	go func() { returned <- m.Shutdown() }()
	select {
	case <-returned:
		t.Fatal("Shutdown returned while a callback was running")
	case <-time.After(200 * time.Millisecond): // a bound on a return that must not come
	}
	close(release)
	select {
	case err := <-returned:
		require.NoError(t, err)
		require.True(t, handlerReturned.Load())
	case <-ctx.Done():
		t.Fatal("Shutdown did not return after the callback")
	}
}
