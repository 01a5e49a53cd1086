package swim

import (
	"time"
)

// An accuser whose accusation of a member was refuted waits before its
// next accusation of that member is taken: each member holding the
// suspicion reported it to its application (EventSuspect) and its
// refutation again (EventAlive), so without the wait one accuser within
// its bucket (internal/claims: one accusation per probe interval) made
// every application see the member suspected over a thousand times a
// minute. The wait starts at the suspicion's shortest window and doubles
// with each refutation in a row, up to its longest. A member that fails
// for real is accused by others (every prober, SWIM §4.3), and its
// accuser's own view does not wait.

// strike is one accuser's refuted accusations of a member.
type strike struct {
	accuser string
	until   time.Time // its accusations of the member wait until then
	count   int       // refuted in a row
}

// maxStrikesPerMember bounds the accusers remembered per member: those of
// one suspicion are its first accuser and its confirmations, at most
// SuspicionMult-1; past the bound the oldest is forgotten.
const maxStrikesPerMember = 8

// strikeRefuted records that the accusers of sp, a suspicion of name the
// member just refuted, were wrong.
func (m *Machine) strikeRefuted(now time.Time, name string, sp *suspicion) {
	if sp == nil {
		return
	}
	lo, hi := m.suspicionBounds()
	strikes := m.strikes[name]
	for _, accuser := range append([]string{sp.from}, sp.confirmers...) {
		if accuser == m.selfName {
			continue
		}
		k := -1
		for j := range strikes {
			if strikes[j].accuser == accuser {
				k = j
			}
		}
		if k < 0 {
			if len(strikes) >= maxStrikesPerMember {
				strikes = strikes[1:]
			}
			strikes = append(strikes, strike{accuser: accuser})
			k = len(strikes) - 1
		}
		st := &strikes[k]
		if now.After(st.until.Add(hi)) {
			st.count = 0 // right for a long while since: start over
		}
		st.count++
		wait := lo << min(st.count-1, 16)
		st.until = now.Add(min(wait, hi))
	}
	m.strikes[name] = strikes
}

// accusationWaits reports whether an accusation of name by accuser comes
// while the accuser's last refuted one of it still holds its next back,
// counting it.
func (m *Machine) accusationWaits(now time.Time, name, accuser string) bool {
	for _, st := range m.strikes[name] {
		if st.accuser == accuser && now.Before(st.until) {
			m.stats.AccusationsWaited++
			return true
		}
	}
	return false
}
