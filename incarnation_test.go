package swim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// deltaKind names the four membership deltas a member can receive.
type deltaKind string

const (
	dAlive   deltaKind = "alive"
	dSuspect deltaKind = "suspect"
	dDead    deltaKind = "dead"
	dLeft    deltaKind = "left"
)

// deltaMsg builds a delta of kind about peer i at inc, as gossiped by p003
// (a left is announced by the member itself).
func deltaMsg(kind deltaKind, i int, inc uint64) wire.Message {
	switch kind {
	case dAlive:
		return mtAlive(i, inc)
	case dSuspect:
		return &wire.Suspect{Name: mtPeer(i), Incarnation: inc, From: mtPeer(3)}
	case dDead:
		return &wire.Dead{Name: mtPeer(i), Incarnation: inc, From: mtPeer(3)}
	case dLeft:
		return &wire.Dead{Name: mtPeer(i), Incarnation: inc, From: mtPeer(i), Left: true}
	}
	panic(kind)
}

// requireDelta checks that msg is the delta kind about name at inc.
func requireDelta(t *testing.T, kind deltaKind, name string, inc uint64, msg wire.Message) {
	t.Helper()
	switch kind {
	case dAlive:
		a, ok := msg.(*wire.Alive)
		require.True(t, ok, "want alive, got %#v", msg)
		require.Equal(t, inc, a.Incarnation)
	case dSuspect:
		s, ok := msg.(*wire.Suspect)
		require.True(t, ok, "want suspect, got %#v", msg)
		require.Equal(t, inc, s.Incarnation)
	case dDead, dLeft:
		d, ok := msg.(*wire.Dead)
		require.True(t, ok, "want dead, got %#v", msg)
		require.Equal(t, inc, d.Incarnation)
		require.Equal(t, kind == dLeft, d.Left, "Left flag")
	}
	require.Equal(t, name, deltaName(msg))
}

// stateOf maps a delta kind to the state it puts a member in.
func stateOf(k deltaKind) State {
	return map[deltaKind]State{dAlive: StateAlive, dSuspect: StateSuspect, dDead: StateDead, dLeft: StateLeft}[k]
}

// precedenceCase: a known member at (have, 5) receives (msg, inc).
type precedenceCase struct {
	have deltaKind
	msg  deltaKind
	inc  uint64
	// accepted: the member ends in stateOf(msg) at inc and the delta is
	// gossiped; otherwise nothing changes and nothing is gossiped.
	accepted bool
	// answered: ignored, but what we know (alive@5) is gossiped again, to
	// reach the holder of the stale claim (answerStale).
	answered bool
	// event is the event an accepted delta emits; 0 means none.
	event EventKind
}

func precedenceCases() []precedenceCase {
	const lower, same, higher = 4, 5, 6
	return []precedenceCase{
		// Known alive@5.
		{have: dAlive, msg: dAlive, inc: lower},
		{have: dAlive, msg: dAlive, inc: same},
		{have: dAlive, msg: dAlive, inc: higher, accepted: true}, // same meta and address: no event
		{have: dAlive, msg: dSuspect, inc: lower, answered: true},
		{have: dAlive, msg: dSuspect, inc: same, accepted: true, event: EventSuspect},
		{have: dAlive, msg: dSuspect, inc: higher, accepted: true, event: EventSuspect},
		{have: dAlive, msg: dDead, inc: lower},
		{have: dAlive, msg: dDead, inc: same, accepted: true, event: EventLeave},
		{have: dAlive, msg: dDead, inc: higher, accepted: true, event: EventLeave},
		{have: dAlive, msg: dLeft, inc: lower},
		{have: dAlive, msg: dLeft, inc: same, accepted: true, event: EventLeave},
		{have: dAlive, msg: dLeft, inc: higher, accepted: true, event: EventLeave},

		// Known suspect@5.
		{have: dSuspect, msg: dAlive, inc: lower},
		{have: dSuspect, msg: dAlive, inc: same}, // alive never beats suspect at the same incarnation
		{have: dSuspect, msg: dAlive, inc: higher, accepted: true, event: EventAlive},
		{have: dSuspect, msg: dSuspect, inc: lower},
		{have: dSuspect, msg: dSuspect, inc: same},                   // same accuser again: no confirmation, not gossiped
		{have: dSuspect, msg: dSuspect, inc: higher, accepted: true}, // already suspect: no new event
		{have: dSuspect, msg: dDead, inc: lower},
		{have: dSuspect, msg: dDead, inc: same, accepted: true, event: EventLeave},
		{have: dSuspect, msg: dDead, inc: higher, accepted: true, event: EventLeave},
		{have: dSuspect, msg: dLeft, inc: lower},
		{have: dSuspect, msg: dLeft, inc: same, accepted: true, event: EventLeave},
		{have: dSuspect, msg: dLeft, inc: higher, accepted: true, event: EventLeave},

		// Known dead@5: only the member's own newer alive brings it back.
		{have: dDead, msg: dAlive, inc: lower},
		{have: dDead, msg: dAlive, inc: same}, // never resurrects at the same incarnation
		{have: dDead, msg: dAlive, inc: higher, accepted: true, event: EventJoin},
		{have: dDead, msg: dSuspect, inc: lower},
		{have: dDead, msg: dSuspect, inc: same},
		{have: dDead, msg: dSuspect, inc: higher}, // a suspicion resurrects nobody
		{have: dDead, msg: dDead, inc: lower},
		{have: dDead, msg: dDead, inc: same},
		{have: dDead, msg: dDead, inc: higher, accepted: true}, // departure reported already: no event
		{have: dDead, msg: dLeft, inc: lower},
		{have: dDead, msg: dLeft, inc: same}, // dead and left rank equal
		{have: dDead, msg: dLeft, inc: higher, accepted: true},

		// Known left@5.
		{have: dLeft, msg: dAlive, inc: lower},
		{have: dLeft, msg: dAlive, inc: same},
		{have: dLeft, msg: dAlive, inc: higher, accepted: true, event: EventJoin},
		{have: dLeft, msg: dSuspect, inc: lower},
		{have: dLeft, msg: dSuspect, inc: same},
		{have: dLeft, msg: dSuspect, inc: higher},
		{have: dLeft, msg: dDead, inc: lower},
		{have: dLeft, msg: dDead, inc: same},
		{have: dLeft, msg: dDead, inc: higher, accepted: true},
		{have: dLeft, msg: dLeft, inc: lower},
		{have: dLeft, msg: dLeft, inc: same},
		{have: dLeft, msg: dLeft, inc: higher, accepted: true},
	}
}

// TestPrecedence checks every incoming delta against every state of a known
// member, at a lower, equal and higher incarnation (incarnation.go).
func TestPrecedence(t *testing.T) {
	const b = 1 // the member the deltas are about
	for _, tc := range precedenceCases() {
		t.Run(fmt.Sprintf("%s@5+%s@%d", tc.have, tc.msg, tc.inc), func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.join(mtMember(b, StateAlive, 5), mtMember(2, StateAlive, 1), mtMember(3, StateAlive, 1))
			if tc.have != dAlive {
				h.feedConfirmed(mtStranger, deltaMsg(tc.have, b, 5))
			}
			h.settle()
			mem, ok := h.m.Member(mtPeer(b))
			require.True(t, ok)
			require.Equal(t, stateOf(tc.have), mem.State, "setup")
			require.Equal(t, uint64(5), mem.Incarnation, "setup")

			out := h.feedConfirmed(mtStranger, deltaMsg(tc.msg, b, tc.inc))
			out.Packets = nil
			mem, ok = h.m.Member(mtPeer(b))
			require.True(t, ok)
			gossip := deltasAbout(h.piggyback(), mtPeer(b))

			if !tc.accepted {
				require.Equal(t, stateOf(tc.have), mem.State, "ignored delta changed the state")
				require.Equal(t, uint64(5), mem.Incarnation, "ignored delta changed the incarnation")
				require.Empty(t, out.Events, "ignored delta emitted an event")
				if tc.answered {
					require.Len(t, gossip, 1, "a stale accusation is answered with the alive we know")
					requireDelta(t, dAlive, mtPeer(b), 5, gossip[0])
					return
				}
				require.Empty(t, gossip, "ignored delta was gossiped")
				return
			}
			require.Equal(t, stateOf(tc.msg), mem.State)
			require.Equal(t, tc.inc, mem.Incarnation)
			require.Len(t, gossip, 1, "accepted delta is gossiped once per packet")
			requireDelta(t, tc.msg, mtPeer(b), tc.inc, gossip[0])
			if tc.event == 0 {
				require.Empty(t, out.Events)
				return
			}
			require.Len(t, out.Events, 1)
			ev := out.Events[0]
			require.Equal(t, tc.event, ev.Kind, "event kind")
			require.Equal(t, mtPeer(b), ev.Member.Name)
			require.Equal(t, stateOf(tc.msg), ev.Member.State, "the event carries the state after the change (dead vs left)")
			require.Equal(t, tc.inc, ev.Member.Incarnation)
		})
	}
}

// TestPrecedenceRule: the one rule every delta goes through, every held
// state against every claimed state at a lower, the same and a higher
// incarnation.
func TestPrecedenceRule(t *testing.T) {
	const (
		A = StateAlive
		S = StateSuspect
		D = StateDead
		L = StateLeft
	)
	// want[held][claimed] at a lower, the same and a higher incarnation.
	want := map[State]map[State][3]verdict{
		A: {A: {stale, stale, supersedes}, S: {stale, supersedes, supersedes}, D: {stale, supersedes, supersedes}, L: {stale, supersedes, supersedes}},
		S: {A: {stale, stale, supersedes}, S: {stale, confirms, supersedes}, D: {stale, supersedes, supersedes}, L: {stale, supersedes, supersedes}},
		D: {A: {stale, stale, supersedes}, S: {stale, stale, stale}, D: {stale, stale, supersedes}, L: {stale, stale, supersedes}},
		L: {A: {stale, stale, supersedes}, S: {stale, stale, stale}, D: {stale, stale, supersedes}, L: {stale, stale, supersedes}},
	}
	for held, row := range want {
		for claimed, verdicts := range row {
			for i, inc := range []uint64{4, 5, 6} {
				require.Equal(t, verdicts[i], precedence(held, 5, claimed, inc), "%s@5 hearing %s@%d", held, claimed, inc)
			}
		}
	}
	require.Equal(t, stale, precedence(StateAlive, 5, State(9), 5), "an unknown state at the same incarnation changes nothing")
}
