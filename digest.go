package swim

import (
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// View digests. Gossip reaches every member with high probability, not
// with certainty (SWIM §4.1), and a member that lost every copy of a join
// may go on lacking the member for minutes: once the news is old no packet
// names it, and under paired probing two members meet only once every N−1
// rounds. The asks of holes.go need a packet that names the missing
// member; a digest needs none. For a while after its view last changed, a
// member sends beside each Heartbeat a summary of the live members it
// holds (their number and the XOR of their name hashes, wire.ViewDigest),
// and a partner whose own view differs asks for the difference with a
// push-pull (holePushPull, rate-limited as every hole ask is). A hole left
// by a boot, a join or a refutation is found in the first round in which
// the member that has it is paired with one that does not.
//
// Digests are sent only while they can tell something: not while the
// view changes (news still in flight makes views differ for a round or
// two, and a push-pull then would carry a whole table to learn what gossip
// brings anyway), and not once the view has stood still for digestRounds:
// every view that changed around the same time has by then met many
// partners. A cluster at rest sends none, so they cost nothing in the
// steady state; after a change, 9 bytes per Heartbeat for a minute.
//
// A digest asks for nothing by itself: the push-pull goes to the member
// that sent it, at its address in this member's table, at most once per
// holePushPullEvery probe intervals, so a forged one can make a member do
// no more than what any hole ask does.

// digestRounds is how many rounds after the ring last changed Heartbeats
// carry the digest.
const digestRounds = 60

// viewDigest summarises this member's view: the ring holds the live
// members, itself included.
func (m *Machine) viewDigest() wire.ViewDigest {
	return wire.ViewDigest{Live: uint32(m.ring.len()), Digest: m.ringXor}
}

// viewStill reports whether the ring has stood still for the last
// stableRoundsToPair rounds, so that the digest speaks of news that has
// landed.
func (m *Machine) viewStill(now time.Time) bool {
	return m.roundOf(now)-m.ringChanged >= stableRoundsToPair
}

// digestDue reports whether this round's Heartbeats carry the digest.
func (m *Machine) digestDue(now time.Time) bool {
	return m.viewStill(now) && m.roundOf(now)-m.ringChanged <= digestRounds
}

// handleViewDigest compares a partner's digest with this member's view.
// When they differ one of the two asks: the one that holds fewer live
// members (the likelier to lack one), the other when the counts are equal
// and its name comes first; and this one in any case when it sends no
// digest itself, since the sender then cannot tell.
func (m *Machine) handleViewDigest(now time.Time, sender *memberState, d *wire.ViewDigest) {
	if sender == nil || !sender.live() || sender == m.self || m.self.state() != StateAlive || !m.viewStill(now) {
		return
	}
	mine := m.viewDigest()
	if mine == *d {
		return
	}
	m.stats.ViewDigestsDiffering++
	ask := !m.digestDue(now) || mine.Live < d.Live || mine.Live == d.Live && m.selfName < m.nameOf(sender)
	if ask {
		m.holePushPull(now, sender)
	}
}
