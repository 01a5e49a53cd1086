package swim

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// ErrMetaTooLarge is matched (errors.Is) by the error UpdateMeta returns for
// metadata over Config.MaxMetaSize.
var ErrMetaTooLarge = errors.New("swim: metadata over MaxMetaSize")

// The Machine's own API: joining, leaving and changing this member's
// metadata. Memberlist wraps each in a method of the same name.

// Errors returned by the Machine's API.
var (
	// ErrLeft: this member has left the cluster; it no longer takes part.
	ErrLeft = errors.New("swim: member has left")
	// ErrUnknownStream: a stream response names no exchange in flight.
	ErrUnknownStream = errors.New("swim: unknown stream id")
)

// Join starts a push-pull join with each seed and returns the IDs of the
// StreamRequests it queued; their HandleStreamResponse results say which
// seeds answered. A member that left joins again. The seeds are remembered for ReconnectTimeout and retried
// while this member is alone, so a member that started before its peers, or
// was cut off from all of them, joins without operator action.
func (m *Machine) Join(now time.Time, seeds []netip.AddrPort) []uint64 {
	if m.self.state() == StateLeft {
		m.rejoin(now)
	}
	ids := make([]uint64, 0, len(seeds))
	for _, addr := range seeds {
		if addr == m.addrOf(m.self) {
			continue
		}
		if id, ok := m.startPushPull(now, addr, streamJoin); ok {
			ids = append(ids, id)
		}
	}
	if len(seeds) > 0 && m.cfg.ReconnectInterval > 0 {
		m.seeds = append(m.seeds[:0], seeds...)
		m.seedsUntil = now.Add(m.cfg.ReconnectTimeout)
		m.armAt(timerSeeds, m.seedsUntil)
	}
	return ids
}

// AddSeeds adds seeds found after Join: the addresses a seed name resolved
// to later (it did not resolve at first, or the addresses behind it
// changed). The seeds are then remembered until at least until, and
// retried as Join's are. While this member is alive and alone, it joins
// through each new one at once; it returns how many joins it started.
func (m *Machine) AddSeeds(now time.Time, addrs []netip.AddrPort, until time.Time) int {
	if m.cfg.ReconnectInterval <= 0 {
		return 0
	}
	started := 0
	for _, addr := range addrs {
		if addr == m.addrOf(m.self) || slices.Contains(m.seeds, addr) {
			continue
		}
		m.seeds = append(m.seeds, addr)
		if m.self.state() == StateAlive && m.numOthers() == 0 {
			if _, ok := m.startPushPull(now, addr, streamJoin); ok {
				started++
			}
		}
	}
	if until.After(m.seedsUntil) {
		m.seedsUntil = until
		m.armAt(timerSeeds, m.seedsUntil)
	}
	return started
}

// Leave announces a graceful leave: this member gossips itself as left at a
// higher incarnation and stops probing. LeaveDone reports when it was sent.
func (m *Machine) Leave(now time.Time) error {
	if m.self.state() != StateAlive {
		return ErrLeft
	}
	m.self.setInc(nextIncarnation(m.self.inc()))
	m.self.setState(StateLeft)
	m.version++
	m.probes = nil
	m.leaveBroadcast = m.queueOwnNews(m.selfName, &wire.Dead{
		Name: m.selfName, Incarnation: m.self.inc(), From: m.selfName, Left: true,
	})
	// Send it now rather than at the next gossip slot.
	m.gossipNow(now)
	return nil
}

// rejoin makes a member that left take part again, in the same process
// (memberlist needs a new one): a higher incarnation than its leave, which
// its alive overrides wherever the leave spread (SWIM §4.2), and probing,
// push-pulls and the rest resume as at start.
func (m *Machine) rejoin(now time.Time) {
	m.self.setInc(nextIncarnation(m.self.inc()))
	m.self.setState(StateAlive)
	m.version++
	m.leaveBroadcast = nil
	m.broadcastSelfAlive() // replaces the queued leave, if it is still queued
	if m.cfg.AlignedProbing {
		m.probeRound = m.roundOf(now)
		m.scheduleNextProbe(now)
		m.scheduleHeartbeats(now)
	} else {
		m.timers.due[timerProbe] = now.Add(m.jitter(m.cfg.ProbeInterval))
	}
	if m.cfg.PushPullInterval > 0 {
		m.timers.due[timerPushPull] = now.Add(m.jitter(m.cfg.PushPullInterval))
	}
}

// LeaveDone reports whether the leave announcement has been sent as often as
// any delta is (or there is nobody left to tell).
func (m *Machine) LeaveDone() bool {
	if m.leaveBroadcast == nil {
		return false
	}
	return m.leaveBroadcast.removed || m.numOthers() == 0
}

// UpdateMeta changes this member's metadata and gossips it at a new
// incarnation.
func (m *Machine) UpdateMeta(now time.Time, meta []byte) error {
	if m.self.state() != StateAlive {
		return ErrLeft
	}
	if len(meta) > m.cfg.MaxMetaSize {
		return fmt.Errorf("%w: %d bytes, over MaxMetaSize %d", ErrMetaTooLarge, len(meta), m.cfg.MaxMetaSize)
	}
	m.setIdentity(now, m.self, m.addrOf(m.self), meta, m.versionsOf(m.self))
	m.self.setInc(nextIncarnation(m.self.inc()))
	m.version++
	m.broadcastSelfAlive()
	return nil
}

// expireSeeds forgets the join seeds ReconnectTimeout after the join.
func (m *Machine) expireSeeds(now time.Time) {
	if m.seedsUntil.IsZero() {
		return
	}
	if now.Before(m.seedsUntil) {
		m.armAt(timerSeeds, m.seedsUntil)
		return
	}
	m.seeds, m.seedsUntil = nil, time.Time{}
}
