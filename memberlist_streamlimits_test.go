package swim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/swim-go/swim/internal/wire"
)

// dialFrom opens a TCP connection to addr from the local IP address from.
func dialFrom(ctx context.Context, from, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return d.DialContext(ctx, "tcp", addr)
}

// mustDialFrom is dialFrom for the test goroutine.
func mustDialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	conn, err := dialFrom(ctx, from, addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// startIdleDialer keeps n idle TCP connections from one address open to a
// member until the test ends, sending nothing on them and dialling again
// whenever the member closes one: the attacker of attack 6.
func startIdleDialer(t *testing.T, from, addr string, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1)
			for ctx.Err() == nil {
				if conn, err := dialFrom(ctx, from, addr); err == nil {
					stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
					_, _ = conn.Read(buf) // until the member closes it
					stop()
					_ = conn.Close()
				}
				// Refused connections come back at once: a short pause
				// keeps the attack from taking the test's CPU, and it
				// still re-dials each 200 times a second.
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
	// Registered after the member's own clean-up, so it runs first.
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// joinThroughFilledSlots starts a member that joins through victim, whose
// slots idle streams fill, and requires the join to succeed and both to
// see each other.
func joinThroughFilledSlots(t *testing.T, victim *testMember, why string) {
	t.Helper()
	joiner := startMember(t, testConfig("joiner"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	n, err := joiner.Join(ctx, victim.LocalMember().Addr.String())
	require.NoError(t, err, why)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool { return victim.NumMembers() == 2 && joiner.NumMembers() == 2 }, formTimeout, pollEvery)
}

// inboundInUse is how many inbound stream slots ml has taken.
func inboundInUse(ml *Memberlist) int { return ml.inStreams.inUse() }

// TestIdleStreamsDoNotKeepEverySlot: 32 idle connections from one address
// (as many as MaxConcurrentStreams), re-dialled as soon as they are
// closed, no longer keep a new member from joining through their victim,
// and the victim closes them once their first bytes are overdue.
func TestIdleStreamsDoNotKeepEverySlot(t *testing.T) {
	t.Parallel()
	victim := startMember(t, testConfig("victim"))
	addr := victim.LocalMember().Addr.String()
	slots := victim.cfg.MaxConcurrentStreams
	startIdleDialer(t, "127.0.1.2", addr, slots) // a network other than the members' 127.0.0.0/24
	require.Eventually(t, func() bool { return inboundInUse(victim.Memberlist) == slots },
		formTimeout, pollEvery, "the attacker holds every slot")

	joinThroughFilledSlots(t, victim, "join through a member whose slots an idle attacker fills")

	require.Eventually(t, func() bool {
		st := victim.Stats()
		return st.StreamsTimedOut >= uint64(slots) && st.StreamsRefusedPerSource > 0
	}, formTimeout, pollEvery, "idle streams closed and counted: %+v", victim.Stats())
}

// TestIdleStreamsFromManyNetworks: idle connections from 8 addresses in
// separate /24 networks, 4 each (MaxStreamsPerSource), re-dialled as soon
// as they are closed, took every one of the 32 slots with no source over
// its share, so a latecomer's join was refused while they stayed. A
// stream that has not authenticated its request gives its slot to a new
// one when every slot is taken; one that has keeps it.
func TestIdleStreamsFromManyNetworks(t *testing.T) {
	t.Parallel()
	victim := startMember(t, testConfig("victim"))
	addr := victim.LocalMember().Addr.String()
	slots, share := victim.cfg.MaxConcurrentStreams, victim.cfg.MaxStreamsPerSource
	for i := range slots / share {
		startIdleDialer(t, fmt.Sprintf("127.0.%d.2", 10+i), addr, share)
	}
	require.Eventually(t, func() bool { return inboundInUse(victim.Memberlist) == slots },
		formTimeout, pollEvery, "the attacker holds every slot")

	joinThroughFilledSlots(t, victim, "join through a member whose slots idle streams from many networks fill")
	require.Positive(t, victim.Stats().StreamsTimedOut, "the idle streams evicted are counted")
}

// totalAlloc is the bytes this process has allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// streamAllocBound is the most a refused stream message may cost its
// reader, far below the sizes the tests announce (13 to 32 MiB): the
// member's own background work while the test runs fits in it too.
const streamAllocBound = 2 << 20

// lengthPrefixed returns a stream message announcing n bytes, followed by
// n zero bytes.
func lengthPrefixed(n int) []byte {
	b := make([]byte, 4+n)
	binary.BigEndian.PutUint32(b, uint32(n))
	return b
}

// TestStreamAnnouncingTooMuchIsRefusedUnread: a stream whose first message
// announces more than MaxStreamBytes (32 MiB, or MaxStreamBytes+1) is
// refused after its length header, without the reader allocating the
// announced size, however much of it the peer sends; it is counted. Not
// parallel: it measures the process's allocation.
func TestStreamAnnouncingTooMuchIsRefusedUnread(t *testing.T) {
	m := startMember(t, testConfig("target"))
	limit := m.cfg.maxStreamBytes()
	require.Less(t, limit, 32<<20, "the default is below the wire's limit")
	for _, tc := range []struct {
		name      string
		announced int
	}{
		{"32 MiB", 32 << 20},
		{"MaxStreamBytes+1", limit + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := lengthPrefixed(tc.announced)
			before := m.Stats().StreamsTooLarge
			conn := mustDialFrom(t, "127.0.0.1", m.LocalMember().Addr.String())
			require.NoError(t, conn.SetDeadline(time.Now().Add(formTimeout)))

			runtime.GC()
			alloc := totalAlloc()
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				_, _ = conn.Write(msg) // fails once the member has closed
			}()
			_, err := io.Copy(io.Discard, conn)
			require.False(t, isTimeout(err), "the member answers by closing: %v", err)
			<-wrote
			used := totalAlloc() - alloc
			t.Logf("announced %d bytes: %d bytes allocated meanwhile", tc.announced, used)

			require.Less(t, used, uint64(streamAllocBound), "allocated %d bytes for a message of %d refused", used, tc.announced)
			require.Eventually(t, func() bool { return m.Stats().StreamsTooLarge == before+1 }, formTimeout, pollEvery)
		})
	}
}

// TestStreamReplyAnnouncingTooMuchIsRefusedUnread: the limit holds for
// replies too: a seed answering a join with a message over MaxStreamBytes
// fails the join without the joiner allocating it. Not parallel: it
// measures the process's allocation.
func TestStreamReplyAnnouncingTooMuchIsRefusedUnread(t *testing.T) {
	m := startMember(t, testConfig("joiner"))
	reply := lengthPrefixed(m.cfg.maxStreamBytes() + 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(formTimeout))
		if _, err := wire.ReadStreamMessage(conn, 0); err == nil {
			_, _ = conn.Write(reply)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-served })

	runtime.GC()
	alloc := totalAlloc()
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err = m.Join(ctx, ln.Addr().String())
	used := totalAlloc() - alloc
	t.Logf("reply announcing %d bytes: %d bytes allocated meanwhile (%v)", len(reply)-4, used, err)
	require.Less(t, used, uint64(streamAllocBound), "allocated %d bytes for a reply of %d refused", used, len(reply)-4)
	require.ErrorIs(t, err, wire.ErrTooLarge)
	require.Equal(t, uint64(1), m.Stats().StreamsTooLarge)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// compoundOfPushPulls builds a stream message of about size bytes: a
// compound of wire.MaxCompoundParts push-pull frames, each of as many
// members as fit, each member as short as the wire allows (a one-byte name,
// no address, no metadata: 9 bytes), which decoded take a dozen times the
// message's size.
func compoundOfPushPulls(t testing.TB, size int) []byte {
	t.Helper()
	const perMember = 9 // fixarray, name "a", nil addr, 0, state, nil meta, versions 0, life 0
	count := (size/wire.MaxCompoundParts - 16) / perMember
	w := wire.NewPushPullWriter(nil, "attacker", false, count)
	for range count {
		w.Add("a", netip.AddrPort{}, 0, uint8(StateAlive), nil, wire.Versions{})
	}
	pkt, err := w.Bytes()
	require.NoError(t, err)
	frames := make([][]byte, wire.MaxCompoundParts)
	for i := range frames {
		frames[i] = pkt[1:] // a frame is a packet without its version byte
	}
	return wire.AppendCompound(nil, frames)
}

// TestStreamCompoundOfPushPullsRejectedBeforeDecoding: a compound of
// push-pull frames, as a stream request or as the reply to a push-pull or
// a TCP ping, is rejected without being decoded, for far less allocation
// than its size: by its size at 30 MiB (decoding it took 12 times that),
// by its frames' types at 60 KiB. Not parallel: it measures the process's
// allocation.
func TestStreamCompoundOfPushPullsRejectedBeforeDecoding(t *testing.T) {
	for _, size := range []int{30 << 20, 60 << 10} {
		msg := compoundOfPushPulls(t, size)
		require.Greater(t, len(msg), size*9/10)
		require.LessOrEqual(t, len(msg), wire.MaxStreamMessageSize)
		want := wire.ErrTooLarge
		if len(msg) <= wire.MaxSmallStreamSize {
			want = wire.ErrMalformed
		}
		measure := func(t *testing.T, f func() error) {
			t.Helper()
			runtime.GC()
			alloc := totalAlloc()
			err := f()
			used := totalAlloc() - alloc
			t.Logf("%d-byte compound of push-pulls: %d bytes allocated: %v", len(msg), used, err)
			require.ErrorIs(t, err, want)
			require.Less(t, used, uint64(min(1<<20, len(msg)/8)), "allocated %d bytes for a message of %d", used, len(msg))
		}
		t.Run(fmt.Sprintf("%d bytes", len(msg)), func(t *testing.T) {
			t.Run("request", func(t *testing.T) {
				h := newMT(t, mtConfig())
				measure(t, func() error {
					_, err := h.m.HandleStream(h.now, mtPeerAddr(1), msg)
					return err
				})
				require.Equal(t, 1, h.m.NumMembers())
			})
			t.Run("push-pull reply", func(t *testing.T) {
				h := newMT(t, mtConfig())
				ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
				measure(t, func() error { return h.m.HandleStreamResponse(h.now, ids[0], msg, nil) })
				require.Equal(t, uint64(1), h.m.Stats().PushPullsFailed)
				require.Equal(t, 1, h.m.NumMembers())
			})
			t.Run("TCP ping reply", func(t *testing.T) {
				h := newMT(t, mtConfig())
				h.joinPeers(1, 1)
				target := h.m.lookup(mtPeer(1))
				id := h.m.startStreamPing(h.now, target, &wire.Ping{Seq: 7, Target: mtPeer(1), From: mtSelf}, time.Second)
				h.m.Ready()
				measure(t, func() error { return h.m.HandleStreamResponse(h.now, id, msg, nil) })
				require.Equal(t, uint64(1), h.m.Stats().TCPPingsFailed)
				require.Equal(t, 2, h.m.NumMembers())
			})
		})
	}
}

// TestStreamFirstBytesDeadline: an accepted stream that sends nothing is
// closed after the first-bytes deadline (1 s here), long before
// StreamTimeout, and counted; one that sends its request at once is
// answered. (One that sends its header and then trickles its body is
// TestStreamRequestStalledOrLate's.)
func TestStreamFirstBytesDeadline(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	cfg := testConfig("target")
	cfg.StreamTimeout = 30 * time.Second
	cfg.Logger = zap.New(core)
	require.Equal(t, time.Second, cfg.firstBytesTimeout())
	m := startMember(t, cfg)
	addr := m.LocalMember().Addr.String()

	idle := mustDialFrom(t, "127.0.0.1", addr)
	// formTimeout is a third of StreamTimeout: only the first-bytes
	// deadline can close idle in time.
	require.True(t, closedByPeer(idle), "idle stream closed before StreamTimeout")
	require.Equal(t, uint64(1), m.Stats().StreamsTimedOut)
	require.True(t, warnedOnce(logs, refusalFirstBytes))

	f, err := wire.AppendFrame(nil, &wire.Ping{Seq: 1, Target: "target", From: "prober"})
	require.NoError(t, err)
	var ping bytes.Buffer
	require.NoError(t, wire.WriteStreamMessage(&ping, append([]byte{wire.Version}, f...)))
	prompt := mustDialFrom(t, "127.0.0.1", addr)
	_, err = prompt.Write(ping.Bytes())
	require.NoError(t, err)
	require.NoError(t, prompt.SetReadDeadline(time.Now().Add(formTimeout)))
	reply, err := wire.ReadStreamMessage(prompt, 0)
	require.NoError(t, err)
	msgs, err := wire.DecodeStreamPacket(reply)
	require.NoError(t, err)
	require.IsType(t, &wire.Ack{}, msgs[0])
	require.Equal(t, uint64(1), m.Stats().StreamsTimedOut)
}

// TestStreamRequestStalledOrLate: a request whose length header came in
// time but whose body stops coming is closed once no byte arrived for the
// first-bytes timeout (a minimum data rate), and one whose body trickles
// in slower than StreamTimeout allows is closed at StreamTimeout; both are
// counted and logged, each as what it is.
func TestStreamRequestStalledOrLate(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	cfg := testConfig("target")
	cfg.StreamTimeout = 2500 * time.Millisecond // over the first-bytes timeout, 1 s here
	cfg.Logger = zap.New(core)
	m := startMember(t, cfg)
	addr := m.LocalMember().Addr.String()

	stalled := mustDialFrom(t, "127.0.0.1", addr)
	_, err := stalled.Write(binary.BigEndian.AppendUint32(nil, 100))
	require.NoError(t, err)
	require.True(t, closedByPeer(stalled))
	require.Equal(t, uint64(1), m.Stats().StreamsTimedOut)
	require.True(t, warnedOnce(logs, refusalRequestStalled))

	// A byte every 300 ms: never stalled, but 100 bytes take 30 s.
	late := mustDialFrom(t, "127.0.0.1", addr)
	_, err = late.Write(binary.BigEndian.AppendUint32(nil, 100))
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			if _, err := late.Write([]byte{0}); err != nil {
				return
			}
			time.Sleep(300 * time.Millisecond) // the peer's pace, not a wait for the member
		}
	}()
	require.True(t, closedByPeer(late))
	<-done
	require.Equal(t, uint64(2), m.Stats().StreamsTimedOut)
	require.True(t, warnedOnce(logs, refusalRequestLate))
	require.Zero(t, logs.FilterMessage("refused: "+refusalFirstBytes).Len())
}

func TestFirstBytesTimeoutOfTheProfiles(t *testing.T) {
	require.Equal(t, time.Second, DefaultLocalConfig().firstBytesTimeout())
	require.Equal(t, 2*time.Second, DefaultLANConfig().firstBytesTimeout())
	require.Equal(t, 12*time.Second, DefaultWANConfig().firstBytesTimeout())
	c := DefaultLANConfig()
	c.StreamTimeout = 500 * time.Millisecond
	require.Equal(t, c.StreamTimeout, c.firstBytesTimeout(), "never past StreamTimeout")
}

// closedByPeer reports whether the peer closed conn (rather than it
// staying open until the read deadline).
func closedByPeer(conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(formTimeout))
	_, err := conn.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

// BenchmarkHandleStreamCompoundOfPushPulls: the cost of refusing a 30 MiB
// compound of push-pull frames as a stream request (B/op is the figure:
// 366 MB before the check, ~1 KB with it).
func BenchmarkHandleStreamCompoundOfPushPulls(b *testing.B) {
	msg := compoundOfPushPulls(b, 30<<20)
	m, err := NewMachine(mtConfig(), mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := m.HandleStream(mtStart, mtPeerAddr(1), msg); err == nil {
			b.Fatal("accepted")
		}
	}
}

// perSourceConfig has few stream slots, a small per-source share and a
// first-bytes deadline far longer than the test (4·ProbeTimeout), so that
// the idle connections it opens stay until it closes them.
func perSourceConfig(name string) *Config {
	c := testConfig(name)
	c.MaxConcurrentStreams = 8
	c.MaxStreamsPerSource = 2
	c.ProbeInterval = 5 * time.Second
	c.ProbeTimeout = 4 * time.Second
	c.PauseTolerance = 10 * time.Second
	c.StreamTimeout = 30 * time.Second
	return c
}

// tcpPing sends a TCP ping for target on conn and reads the reply.
func tcpPing(conn net.Conn, target string) error {
	f, err := wire.AppendFrame(nil, &wire.Ping{Seq: 1, Target: target, From: "prober"})
	if err != nil {
		return err
	}
	if err := conn.SetDeadline(time.Now().Add(formTimeout)); err != nil {
		return err
	}
	if err := wire.WriteStreamMessage(conn, wire.AppendCompound(nil, [][]byte{f})); err != nil {
		return err
	}
	reply, err := wire.ReadStreamMessage(conn, 0)
	if err != nil {
		return err
	}
	msgs, err := wire.DecodeStreamPacket(reply)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return errors.New("empty reply")
	}
	if _, ok := msgs[0].(*wire.Ack); !ok {
		return fmt.Errorf("reply starts with %T, want an ack", msgs[0])
	}
	return nil
}

// TestStreamsPerSourceWhenSlotsAreScarce: with every slot taken by one
// address, another address still gets MaxStreamsPerSource streams (taken
// from the first address's oldest), and no more; the first gets none more.
func TestStreamsPerSourceWhenSlotsAreScarce(t *testing.T) {
	t.Parallel()
	m := startMember(t, perSourceConfig("target"))
	addr := m.LocalMember().Addr.String()
	slots, share := m.cfg.MaxConcurrentStreams, m.cfg.MaxStreamsPerSource

	var hog []net.Conn
	for range slots {
		hog = append(hog, mustDialFrom(t, "127.0.1.2", addr))
	}
	require.Eventually(t, func() bool { return inboundInUse(m.Memberlist) == slots }, formTimeout, pollEvery)
	extra := mustDialFrom(t, "127.0.1.2", addr)
	require.True(t, closedByPeer(extra), "a source holding every slot gets no more")
	require.Equal(t, uint64(1), m.Stats().StreamsRefusedPerSource)

	var other []net.Conn
	for range share + 1 {
		other = append(other, mustDialFrom(t, "127.0.2.3", addr))
	}
	require.True(t, closedByPeer(other[share]), "one stream over the share is refused")
	for i, conn := range other[:share] {
		require.NoError(t, tcpPing(conn, "target"), "stream %d within the share", i)
	}
	for i, conn := range hog[:share] {
		require.True(t, closedByPeer(conn), "the hog's oldest streams made room: %d", i)
	}
	st := m.Stats()
	require.Equal(t, uint64(1+share+1), st.StreamsRefusedPerSource, "refused and closed for the share: %+v", st)
	require.Zero(t, st.StreamsRefused, "no refusal for want of a slot: %+v", st)
}

// TestJoinStormFromOneAddress: two dozen members on one host (one source
// address) joining one seed at the same moment all succeed: the per-source
// share never refuses an address while slots are free.
func TestJoinStormFromOneAddress(t *testing.T) {
	seed := startMember(t, testConfig("seed"))
	addr := seed.LocalMember().Addr.String()
	const n = 24
	joiners := make([]*testMember, n)
	for i := range joiners {
		joiners[i] = startMember(t, testConfig(fmt.Sprintf("j%02d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	start := make(chan struct{})
	errs := make(chan error, n)
	for _, j := range joiners {
		go func() {
			<-start
			_, err := j.Join(ctx, addr)
			errs <- err
		}()
	}
	close(start)
	for range n {
		require.NoError(t, <-errs)
	}
	require.Eventually(t, func() bool { return seed.NumMembers() == n+1 }, formTimeout, pollEvery)
	st := seed.Stats()
	require.Zero(t, st.StreamsRefused, "%+v", st)
	require.Zero(t, st.StreamsRefusedPerSource, "%+v", st)
}

// TestInboundSlots: the sharing rule of Config.MaxStreamsPerSource, step by
// step, with 4 slots and a share of 1; sources are networks, so a, b and c
// are addresses of different /24s.
func TestInboundSlots(t *testing.T) {
	net := func(addr string) netip.Prefix { return sourceNetwork(netip.MustParseAddr(addr)) }
	a, b, c := net("10.0.1.1"), net("10.0.2.1"), net("10.0.3.1")
	s := newInboundSlots(4, 1)
	admit := func(src netip.Prefix, want admission) (st, evicted *inboundStream) {
		t.Helper()
		st, evicted, got := s.admit(src, nil)
		require.Equal(t, want, got)
		return st, evicted
	}
	held := func() map[netip.Prefix]int { return s.bySource }

	var as []*inboundStream
	for range 4 {
		st, evicted := admit(a, admitted)
		require.Nil(t, evicted, "slots free: no one is evicted")
		as = append(as, st)
	}
	admit(a, refusedShare) // full, and a holds more than its share
	b1, evicted := admit(b, admitted)
	require.Same(t, as[0], evicted, "the oldest stream of the largest holder")
	require.Equal(t, map[netip.Prefix]int{a: 3, b: 1}, held())
	admit(b, refusedShare)
	_, evicted = admit(c, admitted)
	require.Same(t, as[1], evicted)
	require.Equal(t, map[netip.Prefix]int{a: 2, b: 1, c: 1}, held())

	s.release(as[0]) // evicted: its slot is already c's
	require.Equal(t, 4, s.inUse())
	s.release(b1)
	require.Equal(t, 3, s.inUse())
	require.Equal(t, map[netip.Prefix]int{a: 2, c: 1}, held())

	// Fill again: a takes the free slot, then the rest hold at most their
	// share: no one to evict for a new address.
	admit(a, admitted)
	_, evicted = admit(b, admitted) // a holds 3
	require.Same(t, as[2], evicted)
	_, evicted = admit(net("10.0.4.1"), admitted) // a holds 2
	require.Same(t, as[3], evicted)
	require.Equal(t, 4, len(held()), "one stream each")
	// Every source within its share: the oldest stream that has not
	// authenticated its request gives its slot to the new one.
	oldest := s.inFlight[0]
	_, evicted = admit(net("10.0.5.1"), admitted)
	require.Same(t, oldest, evicted, "the oldest unauthenticated stream")
	require.True(t, evicted.idle)
	// Once all have authenticated, none gives way.
	for _, st := range s.inFlight {
		s.authenticate(st)
	}
	admit(net("10.0.6.1"), refusedSlots)
	// Another address of a's network is a: its share is taken.
	admit(net("10.0.1.200"), refusedShare)
	require.Equal(t, 4, s.inUse())
}

// warnedOnce reports whether logs hold exactly one warning of the kind.
func warnedOnce(logs *observer.ObservedLogs, kind string) bool {
	return logs.FilterMessage("refused: "+kind).FilterLevelExact(zap.WarnLevel).Len() == 1
}

// TestStreamRefusalsAreLogged: every kind of refused stream is counted and
// logged as a warning, with two slots each way and a share of one to make
// refusals easy.
func TestStreamRefusalsAreLogged(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	cfg := perSourceConfig("target")
	cfg.MaxConcurrentStreams = 2
	cfg.MaxStreamsPerSource = 1
	cfg.Logger = zap.New(core)
	m := startMember(t, cfg)
	addr := m.LocalMember().Addr.String()
	warned := func(kind string) bool { return warnedOnce(logs, kind) }

	big := mustDialFrom(t, "127.0.0.1", addr)
	_, err := big.Write(binary.BigEndian.AppendUint32(nil, 32<<20))
	require.NoError(t, err)
	require.True(t, closedByPeer(big))
	require.Eventually(t, func() bool { return warned(refusalTooLarge) }, formTimeout, pollEvery)
	require.Eventually(t, func() bool { return inboundInUse(m.Memberlist) == 0 }, formTimeout, pollEvery)

	// 127.0.1.2 takes both slots while they are free.
	first := mustDialFrom(t, "127.0.1.2", addr)
	second := mustDialFrom(t, "127.0.1.2", addr)
	require.Eventually(t, func() bool { return inboundInUse(m.Memberlist) == 2 }, formTimeout, pollEvery)
	require.True(t, closedByPeer(mustDialFrom(t, "127.0.1.2", addr)))
	require.True(t, warned(refusalInboundShare))
	mustDialFrom(t, "127.0.2.3", addr)
	require.True(t, closedByPeer(first))
	require.True(t, warned(refusalInboundEvicted))
	// Every source within its share: the oldest stream still without a
	// request gives its slot to the new one. (With every slot held by an
	// authenticated request, the new one is refused: refusalInboundSlots,
	// TestInboundSlots.)
	mustDialFrom(t, "127.0.3.4", addr)
	require.True(t, closedByPeer(second))
	require.True(t, warned(refusalInboundIdle))

	// Three seeds that never answer: two exchanges hold the outbound
	// slots, the third is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = m.Join(ctx, silentSeed(t), silentSeed(t), silentSeed(t))
	require.ErrorIs(t, err, errStreamsBusy)
	require.True(t, warned(refusalOutboundSlots))

	st := m.Stats()
	require.Equal(t, uint64(1), st.StreamsTooLarge, "%+v", st)
	require.Equal(t, uint64(2), st.StreamsRefusedPerSource, "%+v", st)
	require.Equal(t, uint64(1), st.StreamsRefused, "outbound: %+v", st)
	require.Equal(t, uint64(1), st.StreamsTimedOut, "the idle stream: %+v", st)
}

// TestNetTransportLogsRefusedStreams: a stream accepted while the Streams
// channel is full is closed, counted and logged, one line per 10 s.
func TestNetTransportLogsRefusedStreams(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	tr := newTestTransport(t, NetTransportConfig{BindAddr: "127.0.0.1", MaxConcurrentStreams: 1, Logger: zap.New(core)})
	addr := tr.LocalAddr().String()
	mustDialFrom(t, "127.0.0.1", addr) // waits in Streams: nobody receives
	require.Eventually(t, func() bool { return tr.Stats().StreamsAccepted == 1 }, formTimeout, pollEvery)
	for i := range 3 {
		require.True(t, closedByPeer(mustDialFrom(t, "127.0.0.1", addr)))
		require.Equal(t, uint64(i+1), tr.Stats().StreamsRefused)
	}
	require.True(t, warnedOnce(logs, refusalTransportQueue), "one line for three refusals: %v", logs.All())
}

// TestInboundStreamsByteBudget: the bytes inbound requests have sent
// and not finished are held to 4·MaxStreamBytes together and half of that
// per source network; a stream whose next bytes would take either over is
// refused (counted, logged), and a stream that ends gives its bytes back.
func TestInboundStreamsByteBudget(t *testing.T) {
	t.Parallel()
	cfg := testConfig("target")
	cfg.MaxStreamBytes = 100_000
	m := startMember(t, cfg)
	addr := m.LocalMember().Addr.String()
	used := func() int64 {
		m.inBytes.mu.Lock()
		defer m.inBytes.mu.Unlock()
		return m.inBytes.used
	}
	// partial announces MaxStreamBytes and sends all of it but one byte.
	const sent = 100_000 - 1
	partial := func(from string) net.Conn {
		conn := mustDialFrom(t, from, addr)
		_, err := conn.Write(binary.BigEndian.AppendUint32(nil, uint32(cfg.MaxStreamBytes)))
		require.NoError(t, err)
		_, err = conn.Write(make([]byte, sent))
		require.NoError(t, err)
		return conn
	}
	held := []net.Conn{partial("127.0.0.1"), partial("127.0.0.1")}
	require.Eventually(t, func() bool { return used() == 2*sent }, formTimeout, time.Millisecond)
	require.True(t, closedByPeer(partial("127.0.0.1")), "over the network's half of the budget")
	require.Equal(t, uint64(1), m.Stats().StreamsOverBudget)

	held = append(held, partial("127.0.1.1"), partial("127.0.2.1"))
	require.Eventually(t, func() bool { return used() == 4*sent }, formTimeout, time.Millisecond)
	require.True(t, closedByPeer(partial("127.0.3.1")), "over the whole budget")
	require.Equal(t, uint64(2), m.Stats().StreamsOverBudget)

	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool { return used() == 3*sent }, formTimeout, time.Millisecond,
		"a stream that ended gave its bytes back")
	for _, c := range held[1:] {
		_ = c.Close()
	}
	require.Eventually(t, func() bool { return used() == 0 }, formTimeout, time.Millisecond)
}

// TestTableRefusalsAreLogged: invented members beyond MaxMembers, sent in
// one packet by a member (a key holder: a stranger's would be checked
// first), are counted by the Machine and logged by the Memberlist once per
// 10 s, not once per member.
func TestTableRefusalsAreLogged(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	cfg := testConfig("target")
	cfg.MaxMembers = 4
	cfg.Logger = zap.New(core)
	m := startMember(t, cfg)
	holder := newRawPeer(t)
	holder.joinAs(m, "holder")
	msgs := make([]wire.Message, 0, 20)
	for i := range 20 {
		inv := mtInvented(i)
		msgs = append(msgs, &wire.Alive{Name: inv.Name, Addr: inv.Addr, Incarnation: inv.Incarnation})
	}
	holder.send(m.LocalMember().Addr, msgs...)
	require.Eventually(t, func() bool { return m.Stats().MembersRefused == 20-2 }, formTimeout, 10*time.Millisecond)
	require.Eventually(t, func() bool { return warnedOnce(logs, refusalMember) }, formTimeout, 10*time.Millisecond)
}

// TestAnnouncedBytesDoNotBlockStreams: four connections from one address,
// each announcing a message of MaxStreamBytes and then sending nothing,
// reserve nothing they did not send: an encrypted member's joins still
// work while they are open (the attack: a stranger without the key held
// the whole inbound byte budget, 4·MaxStreamBytes, before anything was
// authenticated, and every stream was refused).
func TestAnnouncedBytesDoNotBlockStreams(t *testing.T) {
	t.Parallel()
	victim := startMember(t, secureConfig("victim", "blue", testKey1))
	addr := victim.LocalMember().Addr.String()
	for range inboundBudgetStreams {
		conn := mustDialFrom(t, "127.0.0.1", addr)
		_, err := conn.Write(binary.BigEndian.AppendUint32(nil, uint32(victim.cfg.maxStreamBytes())))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return inboundInUse(victim.Memberlist) == inboundBudgetStreams },
		formTimeout, time.Millisecond, "the idle streams hold their slots")

	joiner := startMember(t, secureConfig("joiner", "blue", testKey1))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := joiner.Join(ctx, addr)
	require.NoError(t, err, "the join through the member the idle streams hold")
	require.Zero(t, victim.Stats().StreamsOverBudget)
}
