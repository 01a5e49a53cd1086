package swim

import (
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Join storms. While members join one after another, every member has the
// alive of some newcomer queued at all times, and gossip (SWIM §4.1, one
// round every GossipInterval to GossipNodes members while anything is
// queued) sends GossipNodes packets per GossipInterval per member: 15 a
// second each, 61,000 a second at 4,096 members, however few newcomers each
// packet carries. The news of a join is the one kind nobody waits on: the
// newcomer already holds the whole table from its join exchange, and the
// others only learn that one more member exists. So in a storm, in a
// cluster over joinStormScale members, join news opens a gossip round of
// its own at most once per joinStormGap; it still rides on every packet
// sent meanwhile (Heartbeats, probes, acks, and the rounds other news
// opens) and is sent half as many times as other news (lazyLimit), so
// each round and each packet carries more of it, and each member
// receives fewer copies of it. The first join after a quiet spell goes out
// as before: a lone join spreads as fast as it always did.
//
// Relayed news keeps the same pace, storm or not, from 1,024 members (where
// joinStormGap is longer than GossipInterval).
// Each member that hears a suspicion, a refutation or a death would
// otherwise open a round every GossipInterval until it has sent it its
// RetransmitMult·log N times: every member at once, 61,000 packets a
// second at 4,096 members for as long as such news keeps coming (a join
// storm's later joins, a mass failure's deaths). When that load makes a
// member slow, its peers suspect it, and the suspicion brings back the
// full pace everywhere: the load feeds on itself. Paced, the news goes out
// in the first round a member opens once it hears it (the last one is
// usually long past), then once per joinStormGap, and rides first on
// every packet meanwhile (the queue sends the least-sent news first): a
// lone rumor spreads as fast as before, and a stream of them costs the
// cluster no more rounds a second than a storm does. News this member is
// the source of is not paced (ownNews): its refutation, its leave, an
// accusation it raises or a death it declares opens a round at once; that
// costs one member's rounds, not N. Nor are the applications' broadcasts
// (eagerNewsQueued): their pace is the applications' to set.
//
// Slower join news means members hear from newcomers they do not know yet,
// each a hole to ask for (repair.go) with a push-pull of the whole table. In
// a storm those asks wait joinStormGrace first, by which time gossip has
// mostly brought the news, and are dropped if it did.

// joinStormScale is the cluster size above which join storms are thinned:
// below it the 15 packets a second per member are what a cluster of that
// size moves anyway at a few joins a second.
const joinStormScale = 512

// joinStormGap is the least time between two gossip rounds that only join
// news or relayed news opens (roundsPaced): GossipInterval times
// N/joinStormScale, rounded down, so that a storm's rounds cost the
// cluster about the same packets a second at any size (1.6 s at 4,096
// members with LAN defaults). Zero at or below the scale.
func (m *Machine) joinStormGap() time.Duration {
	n := m.NumMembers()
	if n <= joinStormScale || m.cfg.GossipInterval <= 0 {
		return 0
	}
	return m.cfg.GossipInterval * time.Duration(n/joinStormScale)
}

// joinStormGrace is how long, in a storm, a hole waits before it is asked
// for: about the time join news takes to reach everyone at one hop per
// joinStormGap (4 hops, since each packet reaches a new member among few
// who know the newcomer, and the Heartbeats add hops of their own).
func (m *Machine) joinStormGrace() time.Duration { return 4 * m.joinStormGap() }

// queueJoinNews queues the alive of a member new to the table; it is lazy
// (opens no round of its own before joinStormGap) when the join before it
// was queued less than joinStormGap ago.
func (m *Machine) queueJoinNews(now time.Time, name string, msg wire.Message) {
	gap := m.joinStormGap()
	lazy := gap > 0 && !m.lastJoinNews.IsZero() && now.Sub(m.lastJoinNews) < gap
	m.lastJoinNews = now
	if m.queueDelta(name, msg, lazy) == nil || !lazy {
		return
	}
	m.stats.JoinNewsLazy++
	for m.bq.lazy > joinStormBacklog && m.bq.dropMostSentLazy() {
		m.stats.JoinNewsDropped++
	}
}

// joinStormBacklog bounds the join news of a storm one member holds. In a
// storm of a large cluster the newcomers arrive faster than a member's
// packets can carry each of them lazyLimit times (at 4,096 members, 15
// joins a second need some 120 sends a second; its three or four packets
// a second carry about 20 each), so unbounded the queue only grows, to
// DeltaQueueLimit, with news ever older and less sent: 400 items per
// member at 2,000 members, up to the whole cluster at the seed, each an
// object the collector marks and a take looks past, in every member. The
// news sent most is dropped first: others have long passed it on, and
// whoever still lacks it asks (repair.go) or gets it at anti-entropy.
const joinStormBacklog = 256

// lazyLimit is how many times lazy join news is sent, of the limit other
// news is sent: half. At RetransmitMult·log10 N sends a member misses a
// delta with odds of about e^-16 at 4,096 members; at half, e^-8, some
// 5,700 (member, newcomer) holes in a 4,096-member boot, which the asks
// and view digests fill within seconds of the last join, while every
// member receives each newcomer's alive 8 times instead of 16: in a storm,
// applying those copies is most of a member's work.
func lazyLimit(limit int) int { return (limit + 1) / 2 }

// roundsPaced reports whether the next gossip round waits for
// joinStormGap after the last one: when all that is queued is news this
// member relays, or lazy join news (whatever else is queued), in a cluster
// where that gap is longer than GossipInterval; never while an
// application's broadcast is queued.
func (m *Machine) roundsPaced() bool {
	if m.uq.Len() > 0 || m.joinStormGap() <= m.cfg.GossipInterval {
		return false
	}
	return !m.ownNews || m.bq.Len() == m.bq.lazy
}

// eagerNewsQueued brings the next gossip round back to GossipInterval after
// the last one (at once if that is past) when news other than join news is
// queued while a storm has put the round off. Only a storm puts it later
// than that, so elsewhere this changes nothing.
func (m *Machine) eagerNewsQueued() {
	if m.lastGossipRound.IsZero() || m.cfg.GossipInterval <= 0 {
		return
	}
	if at := m.lastGossipRound.Add(m.cfg.GossipInterval); at.Before(m.timers.due[timerGossip]) {
		m.schedule(timerGossip, at)
	}
}

// inJoinStorm reports whether join news came within the last
// joinStormGrace: the holes noticed now are likely news still in flight.
func (m *Machine) inJoinStorm(now time.Time) bool {
	g := m.joinStormGrace()
	return g > 0 && !m.lastJoinNews.IsZero() && now.Sub(m.lastJoinNews) < g
}
