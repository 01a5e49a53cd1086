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
		{have: dAlive, msg: dSuspect, inc: lower},
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

// TestPrecedenceUnknownMember: alive about an unknown member adds it with a
// join event and gossips it; suspect, dead and left about an unknown member
// are ignored.
func TestPrecedenceUnknownMember(t *testing.T) {
	for _, kind := range []deltaKind{dAlive, dSuspect, dDead, dLeft} {
		t.Run(string(kind), func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.joinPeers(3, 1)
			const x = 9
			h.feed(mtStranger, deltaMsg(kind, x, 7))
			out := h.ready()
			mem, known := h.m.Member(mtPeer(x))
			gossip := deltasAbout(h.piggyback(), mtPeer(x))
			if kind != dAlive {
				require.False(t, known, "a %s about an unknown member added it", kind)
				require.Empty(t, out.Events)
				require.Empty(t, gossip)
				return
			}
			require.True(t, known)
			require.Equal(t, StateAlive, mem.State)
			require.Equal(t, uint64(7), mem.Incarnation)
			require.Equal(t, mtPeerAddr(x), mem.Addr)
			require.Len(t, out.Events, 1)
			require.Equal(t, EventJoin, out.Events[0].Kind)
			require.Equal(t, mtPeer(x), out.Events[0].Member.Name)
			require.Len(t, gossip, 1)
			requireDelta(t, dAlive, mtPeer(x), 7, gossip[0])
		})
	}
}

// TestAliveMetaChange: an alive at a higher incarnation with new metadata is
// an update event; new metadata at the same incarnation is ignored.
func TestAliveMetaChange(t *testing.T) {
	tests := []struct {
		name     string
		inc      uint64
		accepted bool
	}{
		{"higher incarnation", 6, true},
		{"same incarnation", 5, false},
		{"lower incarnation", 4, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.join(mtMember(1, StateAlive, 5), mtMember(2, StateAlive, 1))
			a := mtAlive(1, tc.inc)
			a.Meta = []byte("zone=b")
			h.feed(mtStranger, a)
			out := h.ready()
			mem, _ := h.m.Member(mtPeer(1))
			gossip := deltasAbout(h.piggyback(), mtPeer(1))
			if !tc.accepted {
				require.Nil(t, mem.Meta)
				require.Equal(t, uint64(5), mem.Incarnation)
				require.Empty(t, out.Events)
				require.Empty(t, gossip)
				return
			}
			require.Equal(t, []byte("zone=b"), mem.Meta)
			require.Equal(t, StateAlive, mem.State)
			require.Len(t, out.Events, 1)
			require.Equal(t, EventUpdate, out.Events[0].Kind)
			require.Equal(t, []byte("zone=b"), out.Events[0].Member.Meta)
			require.Len(t, gossip, 1)
			requireDelta(t, dAlive, mtPeer(1), tc.inc, gossip[0])
			require.Equal(t, []byte("zone=b"), gossip[0].(*wire.Alive).Meta)
		})
	}
}

// TestRefutation: an accusation of this member at or above its incarnation
// is refuted with an alive one past the accused incarnation; a stale one is
// answered by re-announcing the current alive without raising it.
func TestRefutation(t *testing.T) {
	const selfInc = 3
	tests := []struct {
		name       string
		msg        wire.Message
		wantInc    uint64
		refutation bool // else a reassert
	}{
		{"suspect at our incarnation", &wire.Suspect{Name: mtSelf, Incarnation: selfInc, From: mtPeer(1)}, selfInc + 1, true},
		{"dead at our incarnation", &wire.Dead{Name: mtSelf, Incarnation: selfInc, From: mtPeer(1)}, selfInc + 1, true},
		{"left at our incarnation", &wire.Dead{Name: mtSelf, Incarnation: selfInc, From: mtPeer(1), Left: true}, selfInc + 1, true},
		{"suspect above our incarnation", &wire.Suspect{Name: mtSelf, Incarnation: selfInc + 4, From: mtPeer(1)}, selfInc + 5, true},
		{"dead above our incarnation", &wire.Dead{Name: mtSelf, Incarnation: selfInc + 4, From: mtPeer(1)}, selfInc + 5, true},
		{"alive above our incarnation (a previous life)", &wire.Alive{Name: mtSelf, Addr: wire.EncodeAddr(mtSelfAddr), Incarnation: selfInc + 2}, selfInc + 3, true},
		{"stale suspect", &wire.Suspect{Name: mtSelf, Incarnation: selfInc - 1, From: mtPeer(1)}, selfInc, false},
		{"stale dead", &wire.Dead{Name: mtSelf, Incarnation: selfInc - 1, From: mtPeer(1)}, selfInc, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.joinPeers(3, 1)
			for i := 0; i < selfInc; i++ {
				require.NoError(t, h.m.UpdateMeta(h.now, nil))
			}
			h.settle()
			require.Equal(t, uint64(selfInc), h.m.LocalMember().Incarnation)
			before := h.m.Stats()

			h.feed(mtPeerAddr(1), tc.msg)
			local := h.m.LocalMember()
			require.Equal(t, tc.wantInc, local.Incarnation)
			require.Equal(t, StateAlive, local.State)
			st := h.m.Stats()
			if tc.refutation {
				require.Equal(t, before.Refutations+1, st.Refutations)
				require.Equal(t, before.Reasserts, st.Reasserts)
			} else {
				require.Equal(t, before.Refutations, st.Refutations)
				require.Equal(t, before.Reasserts+1, st.Reasserts)
			}
			gossip := deltasAbout(h.piggyback(), mtSelf)
			require.Len(t, gossip, 1, "the refutation is gossiped")
			requireDelta(t, dAlive, mtSelf, tc.wantInc, gossip[0])
			require.Equal(t, wire.EncodeAddr(mtSelfAddr), gossip[0].(*wire.Alive).Addr)
		})
	}
}

// TestRefutationIgnoresOwnIncarnationAlive: an alive about this member at
// its own incarnation needs no answer.
func TestRefutationIgnoresOwnIncarnationAlive(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(2, 1)
	h.feed(mtPeerAddr(1), &wire.Alive{Name: mtSelf, Addr: wire.EncodeAddr(mtSelfAddr), Incarnation: 0})
	require.Equal(t, uint64(0), h.m.LocalMember().Incarnation)
	require.Zero(t, h.m.Stats().Refutations)
	require.Empty(t, deltasAbout(h.piggyback(), mtSelf))
}

// TestNoRefutationAfterLeave: a member that left does not refute, whatever
// it is accused of.
func TestNoRefutationAfterLeave(t *testing.T) {
	for _, msg := range []wire.Message{
		&wire.Suspect{Name: mtSelf, Incarnation: 1, From: mtPeer(1)},
		&wire.Dead{Name: mtSelf, Incarnation: 1, From: mtPeer(1)},
		&wire.Suspect{Name: mtSelf, Incarnation: 5, From: mtPeer(1)},
		&wire.Suspect{Name: mtSelf, Incarnation: 0, From: mtPeer(1)},
	} {
		t.Run(fmt.Sprintf("%T", msg), func(t *testing.T) {
			h := newMT(t, mtConfig())
			h.joinPeers(3, 1)
			require.NoError(t, h.m.Leave(h.now))
			require.Equal(t, uint64(1), h.m.LocalMember().Incarnation)
			h.feed(mtPeerAddr(1), msg)
			local := h.m.LocalMember()
			require.Equal(t, StateLeft, local.State)
			require.Equal(t, uint64(1), local.Incarnation)
			require.Zero(t, h.m.Stats().Refutations)
			require.Zero(t, h.m.Stats().Reasserts)
			for _, d := range deltasAbout(h.piggyback(), mtSelf) {
				dead, ok := d.(*wire.Dead)
				require.True(t, ok, "a member that left gossiped %#v", d)
				require.True(t, dead.Left)
			}
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
