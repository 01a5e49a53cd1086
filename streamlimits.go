package swim

import (
	"errors"
	"io"
	"net"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim/internal/wire"
)

// The limits on streams: what a peer that opens streams only to hold this
// member's slots, or announces messages only to make it allocate, can
// cost. Each refusal is counted (MemberlistStats) and logged through the
// rate-limited refusal log.

// readStreamMessage reads one message from a stream, inbound request or
// outbound reply, refusing one announced over MaxStreamBytes after its
// length header, before anything is allocated for it (counted:
// StreamsTooLarge).
func (ml *Memberlist) readStreamMessage(r io.Reader, peer net.Addr) ([]byte, error) {
	max := ml.cfg.maxStreamBytes()
	data, err := wire.ReadStreamMessage(r, max)
	if errors.Is(err, wire.ErrTooLarge) {
		ml.streamsTooLarge.Add(1)
		ml.refusals.warn("stream message over MaxStreamBytes",
			zap.Stringer("peer", peer), zap.Int("max", max), zap.Error(err))
	}
	return data, err
}

// addStreamStats fills in the counters of refused streams.
func (ml *Memberlist) addStreamStats(s *MemberlistStats) {
	s.StreamsTimedOut = ml.streamsTimedOut.Load()
	s.StreamsTooLarge = ml.streamsTooLarge.Load()
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
func (ml *Memberlist) readRequest(conn net.Conn, deadline time.Time) ([]byte, error) {
	wait := ml.cfg.firstBytesTimeout()
	first := time.Now().Add(wait)
	if deadline.Before(first) {
		first = deadline
	}
	_ = conn.SetReadDeadline(first)
	r := &firstBytesReader{conn: conn, pending: wire.StreamHeaderLen, deadline: deadline}
	data, err := ml.readStreamMessage(r, conn.RemoteAddr())
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		ml.streamsTimedOut.Add(1)
		if r.pending > 0 {
			ml.refusals.warn("inbound stream without a request in time (first bytes)",
				zap.Stringer("from", conn.RemoteAddr()), zap.Duration("timeout", wait))
		} else {
			ml.refusals.warn("inbound stream without a request in time (StreamTimeout)",
				zap.Stringer("from", conn.RemoteAddr()), zap.Duration("timeout", ml.cfg.StreamTimeout))
		}
	}
	return data, err
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
