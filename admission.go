package swim

import (
	"errors"
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Admission: the application's say over who joins its view
// (Config.Admission.Admit and Config.Admission.Join), and a seed's refusal
// of a join, by its application or by signed claims (joinerProven), which
// the joiner is told the reason of. The protocol's own admission of
// members not known before is newcomers.go's.

// admit asks Config.Admission.Admit about a member never seen before, as it
// announced itself; a refusal is counted and the member not added.
func (m *Machine) admit(a *wire.Alive, addr netip.AddrPort) bool {
	if m.cfg.Admission.Admit == nil {
		return true
	}
	mb := Member{Name: a.Name, Addr: addr, Meta: cloneBytes(a.Meta), State: StateAlive, Incarnation: a.Incarnation,
		Versions: Versions(a.Versions.Effective())}
	if err := m.cfg.Admission.Admit(mb); err != nil {
		m.stats.Admission.Refused++
		return false
	}
	return true
}

// admitsChange asks Config.Admission.Admit, with Admission.Updates, about a's news of s,
// a member in the table, when it changes s (changed: a new address,
// metadata, versions or life) or brings back a member a refusal took out.
func (m *Machine) admitsChange(s *memberState, a *wire.Alive, addr netip.AddrPort, changed bool) bool {
	if !m.cfg.Admission.Updates || m.cfg.Admission.Admit == nil {
		return true
	}
	if _, out := m.refusedChanges[s.id]; !changed && !out {
		return true
	}
	if !m.admit(a, addr) {
		return false
	}
	delete(m.refusedChanges, s.id)
	return true
}

// refuseChange takes s out of this member's view after Admit refused news
// of it (Config.Admission.Updates): held dead here, with EventLeave, but not
// gossiped and left out of push-pulls (encodeState).
func (m *Machine) refuseChange(now time.Time, s *memberState) {
	m.refusedChanges[s.id] = struct{}{}
	if !s.live() {
		return
	}
	if s.state() == StateSuspect {
		m.cancelSuspicion(m.nameOf(s))
	}
	m.setState(now, s, StateDead)
	m.version++
	m.event(EventLeave, s)
}

// admitJoin asks Config.Admission.Join about the whole view a join brings: the
// seed's answer to this member's join, or a joiner's request.
func (m *Machine) admitJoin(pp *wire.PushPullView) error {
	if m.cfg.Admission.Join == nil {
		return nil
	}
	peers := make([]Member, 0, pp.Count)
	var v wire.MemberView
	for c := pp.Cursor(); c.Next(&v); {
		mb := Member{Name: string(v.Name), Meta: cloneBytes(v.Meta), State: State(v.State), Incarnation: v.Incarnation,
			Versions: Versions(v.Versions.Effective())}
		if addr, err := wire.DecodeAddr(v.Addr); err == nil {
			mb.Addr = addr
		}
		peers = append(peers, mb)
	}
	if err := m.cfg.Admission.Join(peers); err != nil {
		m.stats.Admission.JoinsRefused++
		return err
	}
	return nil
}

// ErrJoinRefused is matched (errors.Is) by the error of a join a seed
// refused, which carries the seed's reason: a certificate that expired or
// that no root it trusts signed, unsigned claims where it requires
// signatures, or its application's Admission.Join.
var ErrJoinRefused = errors.New("swim: join refused")

// refusal is a join refused by this member as a seed, with the reason the
// joiner is told (wire.Refusal).
type refusal struct{ reason string }

func (r *refusal) Error() string { return "join refused: " + r.reason }

// joinerProven checks a joiner's own entry in its join request: signed
// where signatures are required, and certified where there is an
// authority.
func (m *Machine) joinerProven(now time.Time, pp *wire.PushPullView) error {
	if !m.signing() {
		return nil
	}
	var v wire.MemberView
	for c := pp.Cursor(); c.Next(&v); {
		if string(v.Name) != pp.From {
			continue
		}
		if err := m.sigs.CheckJoiner(now, pp.From, v.Key, v.Sig, v.Cert); err != nil {
			return &refusal{err.Error()}
		}
		return nil
	}
	return nil
}

// encodeRefusal is the answer to a join refused for r, no longer than the
// request was (limit): nobody unknown gets more bytes back than it sent.
func encodeRefusal(r *refusal, limit int) ([]byte, error) {
	reason := r.reason
	reason = reason[:min(len(reason), wire.MaxRefusalLen, max(limit-8, 0))]
	return wire.AppendPacket(nil, &wire.Refusal{Reason: reason})
}
