package swim

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim/internal/wire"
)

// The limits on streams: what a peer that opens streams only to hold this
// member's slots, or announces messages only to make it allocate, can
// cost. Each refusal is counted (MemberlistStats) and logged through the
// rate-limited refusal log.

// Kinds of refused streams, as the refusal log names them.
const (
	refusalTooLarge       = "stream message over MaxStreamBytes"
	refusalFirstBytes     = "inbound stream without a request in time (first bytes)"
	refusalRequestLate    = "inbound stream without a request in time (StreamTimeout)"
	refusalInboundSlots   = "inbound stream, every slot in use (MaxConcurrentStreams)"
	refusalInboundShare   = "inbound stream, every slot in use and its source holds MaxStreamsPerSource"
	refusalInboundEvicted = "inbound stream closed to give its slot to a source under MaxStreamsPerSource"
	refusalInboundIdle    = "inbound stream closed before its request was authenticated, to give its slot to a new one (every slot in use)"
	refusalOutboundSlots  = "outbound stream, every slot in use (MaxConcurrentStreams)"
	refusalTransportQueue = "accepted stream, Streams channel full (MaxConcurrentStreams)"
	refusalOverBudget     = "inbound stream message over what inbound streams may hold at once (4·MaxStreamBytes, half of it per source network)"
	refusalRequestStalled = "inbound stream stalled mid-request (no byte for the first-bytes timeout)"
)

// inboundBudgetStreams is how many MaxStreamBytes messages inbound
// streams may hold at once, all together: MaxStreamBytes bounds one
// message, this bounds what many streams, each under it, cost together.
const inboundBudgetStreams = 4

// errOverBudget ends the read of a request that would take the inbound
// streams over their byte budget.
var errOverBudget = errors.New("inbound streams' byte budget exhausted")

// byteBudget is the bytes the inbound requests being read or handled hold
// together, and per source network: the whole may hold total, one network
// at most share. Bytes are taken as they arrive, not as a request's length
// header announces them, so that a stream that announces much and sends
// little, before anything of it can be authenticated, holds only what it
// sent. Safe for concurrent use.
type byteBudget struct {
	mu       sync.Mutex
	total    int64
	share    int64
	used     int64
	bySource map[netip.Prefix]int64
}

func newByteBudget(total int64) byteBudget {
	return byteBudget{total: total, share: total / 2, bySource: make(map[netip.Prefix]int64)}
}

// take reserves n bytes for src, reporting false when they do not fit.
func (b *byteBudget) take(src netip.Prefix, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+int64(n) > b.total || b.bySource[src]+int64(n) > b.share {
		return false
	}
	b.used += int64(n)
	b.bySource[src] += int64(n)
	return true
}

// give returns n bytes src took.
func (b *byteBudget) give(src netip.Prefix, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= int64(n)
	if b.bySource[src] -= int64(n); b.bySource[src] <= 0 {
		delete(b.bySource, src)
	}
}

// budgetReader passes a stream message through, taking each byte of its
// body from the budget as it arrives; the read fails when one does not
// fit. The length header is left for wire.ReadStreamMessage to check
// against MaxStreamBytes; it allocates as the body arrives too, so what a
// stream holds is what it sent (up to twice that, as its buffer doubles).
type budgetReader struct {
	r      io.Reader
	budget *byteBudget
	src    netip.Prefix
	header int  // header bytes still to pass
	taken  int  // bytes reserved
	over   bool // a reservation failed
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.over {
		return 0, errOverBudget
	}
	n, err := b.r.Read(p)
	body := n
	if b.header > 0 {
		h := min(b.header, n)
		b.header -= h
		body -= h
	}
	if body > 0 {
		if !b.budget.take(b.src, body) {
			b.over = true
			return n, errOverBudget
		}
		b.taken += body
	}
	return n, err
}

// release returns the reservation; it may be called more than once.
func (b *budgetReader) release() {
	if b.taken > 0 {
		b.budget.give(b.src, b.taken)
	}
	b.taken = 0
}

// readStreamMessage reads one message from a stream, inbound request or
// outbound reply, refusing one announced over MaxStreamBytes after its
// length header, before anything is allocated for it (counted:
// StreamsTooLarge).
func (ml *Memberlist) readStreamMessage(r io.Reader, peer net.Addr) ([]byte, error) {
	limit := ml.cfg.maxStreamBytes()
	data, err := wire.ReadStreamMessage(r, limit)
	if errors.Is(err, wire.ErrTooLarge) {
		ml.streamsTooLarge.Add(1)
		ml.refusals.Warn(refusalTooLarge,
			zap.Stringer("peer", peer), zap.Int("max", limit), zap.Error(err))
	}
	return data, err
}

// addStreamStats fills in the counters of refused streams.
func (ml *Memberlist) addStreamStats(s *MemberlistStats) {
	s.StreamsRefusedPerSource = ml.streamsRefusedPerSource.Load()
	s.StreamsTimedOut = ml.streamsTimedOut.Load()
	s.StreamsTooLarge = ml.streamsTooLarge.Load()
	s.StreamsOverBudget = ml.streamsOverBudget.Load()
}

// minFirstBytesTimeout is the least time an accepted stream is given to
// deliver the length header of its request.
const minFirstBytesTimeout = time.Second

// firstBytesTimeout is how long an accepted stream may take to deliver the
// length header of its request before it is closed (StreamsTimedOut): a
// connection that sends nothing holds a slot this long, not StreamTimeout.
//
// It is derived from ProbeTimeout, the configured bound on the network's
// round-trip time: 4·ProbeTimeout, at least minFirstBytesTimeout, at most
// StreamTimeout (1 s for the local profile, 2 s on a LAN, 12 s on a WAN).
// An honest dialer writes its request as soon as it is connected, so on a
// plain stream the header arrives within one round trip of the accept; TLS
// puts its handshake first, one round trip more (TLS 1.3) or two (1.2),
// which leaves a round trip to spare for a lost segment. The floor covers a
// busy host and the handshake's CPU where round trips are short.
func (c *Config) firstBytesTimeout() time.Duration {
	return min(c.StreamTimeout, max(minFirstBytesTimeout, 4*c.ProbeTimeout))
}

// readRequest reads the request of an accepted stream whose exchange ends
// at deadline: its length header within firstBytesTimeout, the rest by
// deadline. A request late in either part is counted (StreamsTimedOut).
func (ml *Memberlist) readRequest(conn net.Conn, deadline time.Time) (data []byte, release func(), err error) {
	wait := ml.cfg.firstBytesTimeout()
	first := time.Now().Add(wait)
	if deadline.Before(first) {
		first = deadline
	}
	_ = conn.SetReadDeadline(first)
	r := &firstBytesReader{conn: conn, pending: wire.StreamHeaderLen, deadline: deadline, gap: wait}
	src := sourceNetwork(addrPortOf(conn.RemoteAddr()).Addr())
	b := &budgetReader{r: r, budget: &ml.inBytes, src: src, header: wire.StreamHeaderLen}
	data, err = ml.readStreamMessage(b, conn.RemoteAddr())
	if err != nil {
		b.release()
	}
	if errors.Is(err, errOverBudget) {
		ml.streamsOverBudget.Add(1)
		ml.refusals.Warn(refusalOverBudget,
			zap.Stringer("from", conn.RemoteAddr()), zap.Int("received", b.taken), zap.Int64("budget", ml.inBytes.total))
	}
	release = b.release
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		ml.streamsTimedOut.Add(1)
		switch {
		case r.pending > 0:
			ml.refusals.Warn(refusalFirstBytes,
				zap.Stringer("from", conn.RemoteAddr()), zap.Duration("timeout", wait))
		case r.gapArmed:
			ml.refusals.Warn(refusalRequestStalled,
				zap.Stringer("from", conn.RemoteAddr()), zap.Duration("timeout", wait))
		default:
			ml.refusals.Warn(refusalRequestLate,
				zap.Stringer("from", conn.RemoteAddr()), zap.Duration("timeout", ml.cfg.StreamTimeout))
		}
	}
	return data, release, err
}

// firstBytesReader reads from conn under the first-bytes deadline until
// the length header is in; after it, no read may wait longer than gap for
// the next bytes (a minimum data rate: a stream that stalls mid-request
// gives its slot back), nor past the exchange's deadline.
type firstBytesReader struct {
	conn     net.Conn
	pending  int           // header bytes not received yet
	deadline time.Time     // the exchange's deadline
	gap      time.Duration // the longest wait for the next bytes after the header
	gapArmed bool          // the read deadline in force is the gap's, not the exchange's
}

func (r *firstBytesReader) Read(p []byte) (int, error) {
	if r.pending <= 0 {
		next := time.Now().Add(r.gap)
		r.gapArmed = next.Before(r.deadline)
		if !r.gapArmed {
			next = r.deadline
		}
		_ = r.conn.SetReadDeadline(next)
	}
	n, err := r.conn.Read(p)
	if r.pending > 0 && n > 0 {
		r.pending -= n
	}
	return n, err
}

// inboundSlots shares the MaxConcurrentStreams inbound stream slots among
// sources (Config.MaxStreamsPerSource), a source being a network
// (sourceNetwork): an attacker with many addresses of one network is one
// source. While slots are free, anyone takes one: a cluster of many
// members on one host or one network is never refused for its address. Once every slot is taken, a
// stream from an address holding fewer than its share takes the slot of
// the oldest stream of the address holding the most, if that one holds
// more than its share; so an address that filled every slot gives way to
// the next address, and no address can keep the others out. Safe for
// concurrent use: admit runs on the loop, release on the streams'
// goroutines.
type inboundSlots struct {
	max   int // MaxConcurrentStreams
	share int // MaxStreamsPerSource

	mu       sync.Mutex
	inFlight []*inboundStream     // admission order, oldest first; evicted ones removed
	bySource map[netip.Prefix]int // streams in flight per source network
}

// inboundStream is one admitted stream, holding a slot until release.
type inboundStream struct {
	conn    net.Conn
	src     netip.Prefix
	evicted bool // its slot went to another stream; guarded by inboundSlots.mu
	// authenticated: its request was read and opened (the cluster's key
	// and label, where there are): a peer's, not just a connection.
	// Guarded by inboundSlots.mu.
	authenticated bool
	// idle: it was evicted before it authenticated (refusalInboundIdle).
	idle bool
}

// admission is what admit decided.
type admission uint8

const (
	admitted admission = iota
	// refusedSlots: every slot is in use and no address holds more than
	// its share to make room.
	refusedSlots
	// refusedShare: every slot is in use and the stream's address holds
	// its share already.
	refusedShare
)

func newInboundSlots(max, share int) *inboundSlots {
	return &inboundSlots{max: max, share: share, bySource: make(map[netip.Prefix]int)}
}

// admit gives conn, from src, a slot, or says why not. When it took the
// slot of another stream, it returns that one too: the caller closes its
// conn, and its release then changes nothing.
func (s *inboundSlots) admit(src netip.Prefix, conn net.Conn) (st, evicted *inboundStream, verdict admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inFlight) >= s.max {
		if s.bySource[src] >= s.share {
			return nil, nil, refusedShare
		}
		if evicted = s.evictFromLargest(); evicted == nil {
			evicted = s.evictUnauthenticated()
		}
		if evicted == nil {
			return nil, nil, refusedSlots
		}
	}
	st = &inboundStream{conn: conn, src: src}
	s.inFlight = append(s.inFlight, st)
	s.bySource[src]++
	return st, evicted, admitted
}

// evictFromLargest takes the oldest stream of the address holding the most
// streams out of its slot, if that address holds more than its share. The
// caller holds mu.
func (s *inboundSlots) evictFromLargest() *inboundStream {
	largest := 0
	for _, n := range s.bySource {
		largest = max(largest, n)
	}
	if largest <= s.share {
		return nil
	}
	for i, st := range s.inFlight {
		if s.bySource[st.src] == largest {
			s.remove(i)
			st.evicted = true
			return st
		}
	}
	return nil // not reached: some stream's source holds largest
}

// evictUnauthenticated takes the oldest stream that has not authenticated
// its request out of its slot, if any. Connections cost an attacker
// little and can come from many networks, each within its share, so that
// the shares alone leave every slot to idle connections (8 networks of 4
// took 32); a stream that authenticated is a peer's and keeps its slot,
// while one that has not gives way to the next, which has its round trip
// to authenticate in turn. The caller holds mu.
func (s *inboundSlots) evictUnauthenticated() *inboundStream {
	for i, st := range s.inFlight {
		if !st.authenticated {
			s.remove(i)
			st.evicted, st.idle = true, true
			return st
		}
	}
	return nil
}

// authenticate records that st's request was read and opened: its slot
// is no longer given to a new stream (evictUnauthenticated).
func (s *inboundSlots) authenticate(st *inboundStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.authenticated = true
}

// release frees st's slot, unless it was evicted (its slot is already
// another's).
func (s *inboundSlots) release(st *inboundStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.evicted {
		return
	}
	if i := slices.Index(s.inFlight, st); i >= 0 {
		s.remove(i)
	}
}

// remove takes inFlight[i] out of the accounting. The caller holds mu.
func (s *inboundSlots) remove(i int) {
	st := s.inFlight[i]
	s.inFlight = slices.Delete(s.inFlight, i, i+1)
	if s.bySource[st.src]--; s.bySource[st.src] == 0 {
		delete(s.bySource, st.src)
	}
}

// inUse is the number of slots taken.
func (s *inboundSlots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inFlight)
}

// admitStream gives an accepted stream an inbound slot (inboundSlots), or
// counts and logs why not; the caller closes a refused stream. A stream
// whose slot it took is closed here. It runs on the loop: closing a TCP
// connection does not block.
func (ml *Memberlist) admitStream(conn net.Conn) (*inboundStream, bool) {
	src := sourceNetwork(addrPortOf(conn.RemoteAddr()).Addr())
	st, evicted, verdict := ml.inStreams.admit(src, conn)
	switch verdict {
	case refusedSlots:
		ml.streamsRefused.Add(1)
		ml.refusals.Warn(refusalInboundSlots,
			zap.Stringer("from", conn.RemoteAddr()), zap.Int("max", ml.cfg.MaxConcurrentStreams))
		return nil, false
	case refusedShare:
		ml.streamsRefusedPerSource.Add(1)
		ml.refusals.Warn(refusalInboundShare,
			zap.Stringer("from", conn.RemoteAddr()), zap.Int("max", ml.cfg.MaxConcurrentStreams),
			zap.Int("per_source", ml.cfg.MaxStreamsPerSource))
		return nil, false
	}
	switch {
	case evicted != nil && evicted.idle:
		ml.streamsTimedOut.Add(1)
		ml.refusals.Warn(refusalInboundIdle,
			zap.Stringer("from", evicted.conn.RemoteAddr()), zap.Stringer("for", conn.RemoteAddr()))
		_ = evicted.conn.Close()
	case evicted != nil:
		ml.streamsRefusedPerSource.Add(1)
		ml.refusals.Warn(refusalInboundEvicted,
			zap.Stringer("from", evicted.conn.RemoteAddr()), zap.Stringer("for", conn.RemoteAddr()),
			zap.Int("per_source", ml.cfg.MaxStreamsPerSource))
		_ = evicted.conn.Close()
	}
	return st, true
}
