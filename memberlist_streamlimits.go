package swim

import (
	"encoding/binary"
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
	refusalOutboundSlots  = "outbound stream, every slot in use (MaxConcurrentStreams)"
	refusalTransportQueue = "accepted stream, Streams channel full (MaxConcurrentStreams)"
	refusalOverBudget     = "inbound stream message over what inbound streams may hold at once (4·MaxStreamBytes)"
)

// inboundBudgetStreams is how many MaxStreamBytes messages inbound
// streams may hold at once, all together: MaxStreamBytes bounds one
// message, this bounds what many streams, each under it, cost together.
const inboundBudgetStreams = 4

// errOverBudget ends the read of a request that would take the inbound
// streams over their byte budget.
var errOverBudget = errors.New("inbound streams' byte budget exhausted")

// byteBudget is the bytes the inbound requests being read or handled may
// hold together. Safe for concurrent use.
type byteBudget struct {
	mu    sync.Mutex
	total int64
	used  int64
}

// take reserves n bytes, reporting false when they do not fit.
func (b *byteBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+int64(n) > b.total {
		return false
	}
	b.used += int64(n)
	return true
}

func (b *byteBudget) give(n int) {
	b.mu.Lock()
	b.used -= int64(n)
	b.mu.Unlock()
}

// budgetReader passes a stream message through, reserving its announced
// length from the budget once the length header has gone by; the read
// fails when it does not fit (after wire.ReadStreamMessage's first small
// buffer, never the announced length). A length over limit is left for
// ReadStreamMessage to refuse.
type budgetReader struct {
	r      io.Reader
	budget *byteBudget
	limit  int
	hdr    [wire.StreamHeaderLen]byte
	got    int  // header bytes seen
	taken  int  // bytes reserved
	over   bool // the reservation failed
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.over {
		return 0, errOverBudget
	}
	n, err := b.r.Read(p)
	if b.got < len(b.hdr) {
		b.got += copy(b.hdr[b.got:], p[:n])
		if b.got == len(b.hdr) {
			if want := int(binary.BigEndian.Uint32(b.hdr[:])); want <= b.limit {
				if b.budget.take(want) {
					b.taken = want
				} else {
					b.taken, b.over = want, true
				}
			}
		}
	}
	return n, err
}

// release returns the reservation; it may be called more than once.
func (b *budgetReader) release() {
	if b.taken > 0 && !b.over {
		b.budget.give(b.taken)
	}
	b.taken, b.over = 0, false
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
	r := &firstBytesReader{conn: conn, pending: wire.StreamHeaderLen, deadline: deadline}
	b := &budgetReader{r: r, budget: &ml.inBytes, limit: ml.cfg.maxStreamBytes()}
	data, err = ml.readStreamMessage(b, conn.RemoteAddr())
	if err != nil {
		b.release()
	}
	if errors.Is(err, errOverBudget) {
		ml.streamsOverBudget.Add(1)
		ml.refusals.Warn(refusalOverBudget,
			zap.Stringer("from", conn.RemoteAddr()), zap.Int("announced", b.taken), zap.Int64("budget", ml.inBytes.total))
	}
	release = b.release
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		ml.streamsTimedOut.Add(1)
		if r.pending > 0 {
			ml.refusals.Warn(refusalFirstBytes,
				zap.Stringer("from", conn.RemoteAddr()), zap.Duration("timeout", wait))
		} else {
			ml.refusals.Warn(refusalRequestLate,
				zap.Stringer("from", conn.RemoteAddr()), zap.Duration("timeout", ml.cfg.StreamTimeout))
		}
	}
	return data, release, err
}

// firstBytesReader reads from conn under the first-bytes deadline until
// the length header is in, then moves the read deadline to the exchange's.
type firstBytesReader struct {
	conn     net.Conn
	pending  int       // header bytes not received yet
	deadline time.Time // the exchange's deadline
}

func (r *firstBytesReader) Read(p []byte) (int, error) {
	n, err := r.conn.Read(p)
	if r.pending > 0 && n > 0 {
		r.pending -= n
		if r.pending <= 0 {
			_ = r.conn.SetReadDeadline(r.deadline)
		}
	}
	return n, err
}

// inboundSlots shares the MaxConcurrentStreams inbound stream slots among
// source addresses (Config.MaxStreamsPerSource). While slots are free,
// anyone takes one: a cluster of many members on one host, all one
// address, is never refused for its address. Once every slot is taken, a
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
	inFlight []*inboundStream   // admission order, oldest first; evicted ones removed
	bySource map[netip.Addr]int // streams in flight per source address
}

// inboundStream is one admitted stream, holding a slot until release.
type inboundStream struct {
	conn    net.Conn
	src     netip.Addr
	evicted bool // its slot went to another stream; guarded by inboundSlots.mu
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
	return &inboundSlots{max: max, share: share, bySource: make(map[netip.Addr]int)}
}

// admit gives conn, from src, a slot, or says why not. When it took the
// slot of another stream, it returns that one too: the caller closes its
// conn, and its release then changes nothing.
func (s *inboundSlots) admit(src netip.Addr, conn net.Conn) (st, evicted *inboundStream, verdict admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inFlight) >= s.max {
		if s.bySource[src] >= s.share {
			return nil, nil, refusedShare
		}
		if evicted = s.evictFromLargest(); evicted == nil {
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
	src := addrPortOf(conn.RemoteAddr()).Addr()
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
	if evicted != nil {
		ml.streamsRefusedPerSource.Add(1)
		ml.refusals.Warn(refusalInboundEvicted,
			zap.Stringer("from", evicted.conn.RemoteAddr()), zap.Stringer("for", conn.RemoteAddr()),
			zap.Int("per_source", ml.cfg.MaxStreamsPerSource))
		_ = evicted.conn.Close()
	}
	return st, true
}
