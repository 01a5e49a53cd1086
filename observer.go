package swim

import (
	"math"
	"time"
)

// Observer receives the measurements the protocol takes as it runs, for a
// metrics library to aggregate: round trips, how long each suspicion
// lasted and how it ended, and how long broadcasts took to arrive. Set it as Config.Observer; package swimprom
// implements it with Prometheus histograms. Nil observes nothing, and
// costs nothing.
//
// Its methods are called inside the protocol: under Memberlist with the
// member's state locked, on whichever goroutine is feeding the Machine
// (Memberlist's type comment); under a simulator, from its event loop.
// Each call holds up the protocol until it returns, so it must be quick
// (an atomic add, a histogram's Observe), must not block (no channel send
// that can wait, no lock that a caller of Memberlist may hold, no I/O),
// should not allocate, and must not call Memberlist methods, which would
// wait for the lock held around the call. The protocol itself allocates
// nothing for a call.
//
// Durations are measured on the clock that drives the Machine: the real
// clock under Memberlist, virtual time in a simulator (internal/sim), so
// the same Observer measures both.
//
// Methods may be added to the interface; an implementation that embeds
// NopObserver keeps compiling, the new methods observing nothing.
type Observer interface {
	// ObserveProbeRTT reports a round trip to a peer, from a ping this
	// member sent to the ack that came straight back: a direct probe,
	// a ping sent on behalf of another member's ping-req, and an
	// application's Ping. With paired probing (the default), a round
	// whose partners hear each other's Heartbeat sends no ping, so most
	// samples come from the fallback probes of partners not heard in
	// time, from ping-reqs and from Ping.
	ObserveProbeRTT(rtt time.Duration)
	// ObserveSuspicion reports the end of a suspicion this member held
	// of a peer: held is how long it held the peer suspect, from the
	// moment it did (its own accusation, or the gossip that brought
	// another's) to the end; refuted is true when the peer refuted it
	// (an alive at a newer incarnation arrived), false when the peer was
	// declared dead, by this member or by gossip from another. A suspect
	// that turns out to have left gracefully ends its suspicion without
	// an observation, as does a suspicion of a newer incarnation, which
	// continues the one held. Suspicions of this member itself are not
	// reported (Stats.Refutations counts them).
	ObserveSuspicion(held time.Duration, refuted bool)
	// ObserveBroadcastDelay reports the delay of an application's
	// broadcast this member delivered: from the moment its origin sent
	// it, on the origin's clock, to the delivery, on this member's.
	// Clocks apart by more than the delay make it read low (a negative
	// delay is reported as 0), so across machines it is as good as their
	// clocks' synchronisation. Broadcasts from releases that do not say
	// when they were sent give no sample.
	ObserveBroadcastDelay(delay time.Duration)
}

// NopObserver observes nothing. Embed it in an Observer implementation
// so that methods added to Observer later observe nothing instead of
// breaking the build.
type NopObserver struct{}

// ObserveProbeRTT does nothing.
func (NopObserver) ObserveProbeRTT(time.Duration) {}

// ObserveSuspicion does nothing.
func (NopObserver) ObserveSuspicion(time.Duration, bool) {}

// ObserveBroadcastDelay does nothing.
func (NopObserver) ObserveBroadcastDelay(time.Duration) {}

// observeRTT hands a round trip to the Observer, if any.
func (m *Machine) observeRTT(rtt time.Duration) {
	if m.obs != nil {
		m.obs.ObserveProbeRTT(rtt)
	}
}

// observeBroadcastDelay hands the delay of a broadcast sent at sent
// (Unix milliseconds on its origin's clock, 0 when not known) and
// delivered now to the Observer, if any.
func (m *Machine) observeBroadcastDelay(now time.Time, sent uint64) {
	if m.obs == nil || sent == 0 || sent > math.MaxInt64 {
		return
	}
	m.obs.ObserveBroadcastDelay(max(now.Sub(time.UnixMilli(int64(sent))), 0))
}

// suspectChanged follows a member's state into or out of suspect (was and
// st differ, one of them StateSuspect): it keeps the count of suspects,
// and, for the Observer, when each became suspect, reporting the
// suspicion's length when it ends in a refutation or a death.
func (m *Machine) suspectChanged(now time.Time, s *memberState, was, st State) {
	if st == StateSuspect {
		m.suspects++
		if m.obs != nil {
			m.suspectSince[s.id] = now
		}
		return
	}
	m.suspects--
	if m.obs == nil {
		return
	}
	since, ok := m.suspectSince[s.id]
	delete(m.suspectSince, s.id)
	if ok && st != StateLeft {
		m.obs.ObserveSuspicion(now.Sub(since), st == StateAlive)
	}
}

// MemberCounts is how many members of each state a member's table holds.
type MemberCounts struct {
	// Alive and Suspect count the live members, this one among the
	// alive while it has not left.
	Alive, Suspect int
	// Dead and Left count the members declared dead or left that are
	// still in the table, for GossipToDeadTime; Left includes this
	// member once it has left.
	Dead, Left int
}

// MemberCounts counts the members in the table by state, in O(1).
func (m *Machine) MemberCounts() MemberCounts {
	c := MemberCounts{
		Alive:   m.numOthers() - m.suspects,
		Suspect: m.suspects,
		Dead:    m.dead.failed,
		Left:    m.dead.len() - m.dead.failed,
	}
	switch m.self.state() {
	case StateAlive:
		c.Alive++
	case StateLeft:
		c.Left++
	}
	return c
}
