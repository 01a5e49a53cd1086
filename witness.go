package swim

import (
	"time"
)

// A member asked to ping a target on another's behalf (a ping-req, SWIM
// §3.1) whose own ping goes unanswered has seen the target's silence for
// itself, as the requester did. When the requester's suspicion then
// reaches it, it accuses the target too, anchored at its own ping: an
// independent accusation (Lifeguard §IV-B) from the moment it observed.
//
// This is what lets every member count a real crash's suspicion window
// from close to the crash without taking one accuser's word for when the
// silence began (suspicion.windowStart needs two accusers to agree): the
// requester and its helpers observe the silence within one probe, where
// the next member to probe the target on its own may come a probe round
// later. A helper that hears from the target after its ping forgets what
// it saw.

// maxSilences bounds the silences remembered: one per ping-req served at
// once at most.
const maxSilences = maxRelays

// silenceKept is how long an unanswered relayed ping counts as an
// observation of silence: the requester's suspicion, which follows its
// probe's end, arrives within it.
func (m *Machine) silenceKept() time.Duration { return 2 * m.cfg.ProbeInterval }

// relayExpired forgets a relayed ping whose target never answered, noting
// the silence it saw of a live member it knows at that address.
func (m *Machine) relayExpired(now time.Time, rl *relay) {
	delete(m.relays, rl.seq)
	s := m.lookup(rl.name)
	if s == nil || s == m.self || !s.live() || m.addrOf(s) != rl.target || m.heardSince(s, rl.start) {
		return
	}
	if s.state() == StateSuspect {
		m.suspect(now, s, s.inc(), m.selfName, rl.start)
		return
	}
	if len(m.silences) >= maxSilences {
		m.forgetSilences(now)
		if len(m.silences) >= maxSilences {
			return
		}
	}
	if _, ok := m.silences[rl.name]; !ok {
		m.silences[rl.name] = rl.start
	}
}

// witness accuses s, just suspected by another at inc, itself when this
// member saw its silence lately and has not heard from it since.
func (m *Machine) witness(now time.Time, s *memberState, inc uint64) {
	name := m.nameOf(s)
	at, ok := m.silences[name]
	if !ok {
		return
	}
	delete(m.silences, name)
	if now.Sub(at) > m.silenceKept() || m.heardSince(s, at) || s.state() != StateSuspect || s.inc() != inc {
		return
	}
	m.suspect(now, s, inc, m.selfName, at)
}

// forgetSilences drops the silences too old to count.
func (m *Machine) forgetSilences(now time.Time) {
	for name, at := range m.silences {
		if now.Sub(at) > m.silenceKept() {
			delete(m.silences, name)
		}
	}
}
