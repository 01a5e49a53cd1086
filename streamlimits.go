package swim

import (
	"errors"
	"io"
	"net"

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
	s.StreamsTooLarge = ml.streamsTooLarge.Load()
}
