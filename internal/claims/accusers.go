package claims

import "time"

// AccuserBurst and AccuserEvery bound the accusations taken from one
// accuser: a bucket of AccuserBurst, refilled by one per AccuserEvery
// probe intervals. A member accuses at most the one member it probes per
// round (SWIM §4.3); a crash of many at once is declared dead by every
// member, so one accuser's accusations past the bound delay nothing that
// the others' do not bring.
const (
	AccuserBurst = 32
	AccuserEvery = 1
)

// accuser counts one accuser's accusations and holds its bucket.
type accuser struct {
	tokens  float64
	at      time.Time
	taken   uint64
	limited uint64
}

// takeAccusation takes a token from the accuser's bucket, reporting
// whether there was one.
func (t *Table) takeAccusation(now time.Time, from string) bool {
	a := t.accusers[from]
	if a == nil {
		if len(t.accusers) >= t.maxMembers {
			clear(t.accusers)
		}
		a = &accuser{tokens: AccuserBurst, at: now}
		t.accusers[from] = a
	}
	if t.refill > 0 {
		a.tokens = min(AccuserBurst, a.tokens+float64(now.Sub(a.at))/float64(t.refill))
	}
	a.at = now
	if a.tokens < 1 {
		a.limited++
		t.stats.AccusationsLimited++
		return false
	}
	a.tokens--
	a.taken++
	return true
}

// AccusationsBy returns how many accusations by the member called name
// were taken, and how many dropped past the accuser's bound.
func (t *Table) AccusationsBy(name string) (taken, limited uint64) {
	if a := t.accusers[name]; a != nil {
		return a.taken, a.limited
	}
	return 0, 0
}
