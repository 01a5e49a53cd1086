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
	// ErrLeft: this member has left the cluster; it takes part again only
	// after Join.
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

// Leave announces a graceful leave: this member takes itself as left at a
// higher incarnation, stops probing, queues its leave for gossip (sent at
// once, then as often as any delta is) and sends every live member it
// knows a leave notice, a ping with the leave riding on it, again after
// each ProbeTimeout until acknowledged, five times at most. LeaveDone
// reports when both are done.
func (m *Machine) Leave(now time.Time) error {
	if m.self.state() != StateAlive {
		return ErrLeft
	}
	m.self.setInc(nextIncarnation(m.self.inc()))
	m.self.setState(StateLeft)
	m.version++
	m.probes = nil
	m.leaveNews = m.queueOwnNews(m.selfName, m.ownLeave())
	// Send it now rather than at the next gossip slot.
	m.gossipNow(now)
	m.noticeLeave(now)
	return nil
}

// Leave notices. A leave is final for the applications, so a leave
// reported by another is checked with the member (suspicion.go), and one
// whose check goes unanswered could be forged during a stall: it counts as
// a death. A member that really leaves makes its word reach every member
// first-hand instead: it pings each live member it knows, the leave riding
// on the ping, and waits for the acks (LeaveDone), answering the checks of
// those that heard of it by gossip first meanwhile. A leave from the
// member itself, from its own address, needs no check. Unanswered notices
// are sent again after a probe timeout, at most leaveNoticeTries times in
// all. A member whose notices were all lost checks the gossiped leave
// instead, which the member answers while it is still sending notices;
// only if that check goes unanswered too (the leaver exited) does it count
// the leave as a death (wire.ProtocolLeaveNotice). At 30% packet loss a
// notice and its ack get through with a chance of one in two, so five
// tries miss a member 3% of the time.

// leaveNoticeTries is how often a leave notice is sent at most.
const leaveNoticeTries = 5

// leaveNotice is a leave notice waiting for its ack.
type leaveNotice struct {
	name  string
	tries int
}

// ownLeave is this member's leave, at its incarnation since it left.
func (m *Machine) ownLeave() *wire.Dead {
	return m.proveDead(&wire.Dead{Name: m.selfName, Incarnation: m.self.inc(), From: m.selfName, Left: true, Life: m.life})
}

// sendLeaveNotice sends the notice seq to the member s: a ping with the
// leave riding on it, alone.
func (m *Machine) sendLeaveNotice(seq uint32, s *memberState) {
	m.sendAlone(m.addrOf(s), &wire.Ping{Seq: seq, Target: m.nameOf(s), From: m.selfName}, m.ownLeave())
}

// noticeLeave sends the leave to every live member this one knows.
func (m *Machine) noticeLeave(now time.Time) {
	m.leaveNotices = make(map[uint32]*leaveNotice, m.numOthers())
	m.ring.each(func(id uint32) {
		if id == m.self.id {
			return
		}
		s := m.entry(id)
		seq := m.nextSeq()
		m.leaveNotices[seq] = &leaveNotice{name: m.nameOf(s), tries: 1}
		m.sendLeaveNotice(seq, s)
	})
	if len(m.leaveNotices) > 0 {
		m.armAt(timerLeaveNotices, now.Add(m.cfg.ProbeTimeout))
	}
}

// resendLeaveNotices sends again the notices not acknowledged, and drops
// (and counts) those sent leaveNoticeTries times.
func (m *Machine) resendLeaveNotices(now time.Time) {
	if m.self.state() != StateLeft {
		return
	}
	for seq, n := range m.leaveNotices {
		s := m.lookup(n.name)
		if n.tries >= leaveNoticeTries || s == nil || !s.live() {
			if n.tries >= leaveNoticeTries {
				m.stats.LeaveNoticesUnanswered++
			}
			delete(m.leaveNotices, seq)
			continue
		}
		n.tries++
		m.sendLeaveNotice(seq, s)
	}
	if len(m.leaveNotices) > 0 {
		m.armAt(timerLeaveNotices, now.Add(m.cfg.ProbeTimeout))
	}
}

// leaveNoticeAnswered handles an ack that answers a leave notice, and
// reports whether it did.
func (m *Machine) leaveNoticeAnswered(from netip.AddrPort, seq uint32) bool {
	n, ok := m.leaveNotices[seq]
	if !ok {
		return false
	}
	if s := m.lookup(n.name); s != nil && m.addrOf(s) != from {
		m.stats.AcksRefused++
		return true
	}
	delete(m.leaveNotices, seq)
	return true
}

// rejoin makes a member that left take part again, in the same process
// (memberlist needs a new one): a higher incarnation than its leave, which
// its alive overrides wherever the leave spread (SWIM §4.2), and probing,
// push-pulls and the rest resume as at start.
func (m *Machine) rejoin(now time.Time) {
	m.self.setInc(nextIncarnation(m.self.inc()))
	m.self.setState(StateAlive)
	m.version++
	m.lives.yielded = false // asked to join again: the conflict is found again if it lasts
	m.leaveNews = nil
	m.leaveNotices = nil
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

// leaveDone reports whether the leave is done: its gossip has left the
// queue (sent as often as any delta is, or dropped from a full queue) or
// there is nobody left to tell, and every member this one knew has
// acknowledged its leave notice, was sent it five times, or has died or
// left since.
func (m *Machine) leaveDone() bool {
	if m.leaveNews == nil || len(m.leaveNotices) > 0 {
		return false
	}
	return m.leaveNews.removed || m.numOthers() == 0
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
	m.setIdentity(now, m.self, m.addrOf(m.self), meta, m.versionsOf(m.self), m.life)
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
