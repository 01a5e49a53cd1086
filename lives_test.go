package swim

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// mtLife is the life of test peer i's process, generation g.
func mtLife(i, g int) uint64 { return uint64(1796171455000+g)<<16 | uint64(i) }

// joinLivePeers joins n alive peers of ProtocolLife, each at life
// mtLife(i, 0), incarnation 1.
func (h *mt) joinLivePeers(n int) {
	h.t.Helper()
	ms := make([]wire.MemberState, 0, n)
	for i := 1; i <= n; i++ {
		ms = append(ms, wire.MemberState{Name: mtPeer(i), Addr: wire.EncodeAddr(mtPeerAddr(i)), Incarnation: 1,
			Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: wire.ProtocolLife}, Life: mtLife(i, 0)})
	}
	h.join(ms...)
	require.Equal(h.t, n+1, h.m.NumMembers())
}

func lifeAlive(i int, life uint64, addr netip.AddrPort, inc uint64) *wire.Alive {
	return &wire.Alive{Name: mtPeer(i), Addr: wire.EncodeAddr(addr), Incarnation: inc,
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: wire.ProtocolLife}, Life: life}
}

// A key holder claims a new life for a live member, at an address it
// answers at: the check finds the real process answering for its own
// life, the claim is refused and counted, nothing moves, no event, and the
// same claim again within refusedLifeFor is dropped without a check.
func TestForgedRestartHasNoLastingEffect(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinLivePeers(6)
	forger := netip.MustParseAddrPort("10.9.9.9:7946")
	before, _ := h.m.Member(mtPeer(3))
	forged := lifeAlive(3, mtLife(3, 99), forger, 0)

	h.feed(mtPeerAddr(1), forged)
	// Every address answers: the real process, and the forger.
	out := h.run(h.now.Add(2*h.cfg.ProbeInterval), nil)
	for _, e := range out.Events {
		require.NotEqual(t, mtPeer(3), e.Member.Name, "an event about the member: %v", e)
	}
	after, _ := h.m.Member(mtPeer(3))
	require.Equal(t, before.Addr, after.Addr)
	require.Equal(t, before.Life, after.Life)
	require.Equal(t, StateAlive, after.State)
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.Lives.Checks)
	require.Equal(t, uint64(1), st.Lives.Refused)
	require.Zero(t, st.Lives.Restarts)
	// The forged life was not passed on.
	for _, p := range out.Packets {
		for _, msg := range p.Msgs {
			if a, ok := msg.(*wire.Alive); ok && a.Life == forged.Life {
				require.Equal(t, mtPeerAddr(3), p.To, "the forged claim went to %v", p.To)
			}
		}
	}

	h.feed(mtPeerAddr(2), forged)
	h.run(h.now.Add(h.cfg.ProbeInterval), nil)
	require.Equal(t, uint64(1), h.m.Stats().Lives.Checks, "the refused life was checked again")
	require.Equal(t, uint64(2), h.m.Stats().Lives.Refused)
}

// A restart: a new life claimed at the member's own address, where the old
// life stays silent and the new one answers, is taken at once (one round
// trip), reported as EventRestart, and passed on; an accusation of the
// old life afterwards is stale.
func TestRestartTakenAtOnce(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinLivePeers(6)
	newLife := mtLife(3, 1)
	h.feed(mtPeerAddr(3), lifeAlive(3, newLife, mtPeerAddr(3), 0))
	// The held life's ping goes unanswered; the new life's is answered.
	var oldSeq, newSeq uint32
	for _, p := range h.ready().Packets {
		for _, msg := range p.Msgs {
			if ping, ok := msg.(*wire.Ping); ok && ping.Target == mtPeer(3) {
				switch ping.TargetLife {
				case mtLife(3, 0):
					oldSeq = ping.Seq
				case newLife:
					newSeq = ping.Seq
				}
			}
		}
	}
	require.NotZero(t, oldSeq)
	require.NotZero(t, newSeq)
	h.feed(mtPeerAddr(3), &wire.Ack{Seq: newSeq})
	out := h.ready()
	mb, _ := h.m.Member(mtPeer(3))
	require.Equal(t, newLife, mb.Life)
	require.Equal(t, uint64(0), mb.Incarnation)
	var kinds []EventKind
	for _, e := range out.Events {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []EventKind{EventRestart}, kinds)
	require.Equal(t, uint64(1), h.m.Stats().Lives.Restarts)

	// The death of the old life, reported later at its incarnation, is
	// about another life: stale.
	h.feed(mtPeerAddr(1), &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: mtPeer(1), Life: mtLife(3, 0)})
	h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtPeer(3), Incarnation: 1, From: mtPeer(1), Life: mtLife(3, 0)})
	mb, _ = h.m.Member(mtPeer(3))
	require.Equal(t, StateAlive, mb.State)
	require.Equal(t, newLife, mb.Life)
}

// A member's process ignores accusations of another life of its name,
// and a ping that asks for another life stays unanswered.
func TestOwnOtherLifeIgnored(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinLivePeers(3)
	own := h.m.LocalMember().Life
	require.NotZero(t, own)
	inc := h.m.LocalMember().Incarnation
	h.feed(mtPeerAddr(1), &wire.Suspect{Name: mtSelf, Incarnation: inc + 5, From: mtPeer(1), Life: own + 1})
	require.Equal(t, inc, h.m.LocalMember().Incarnation, "refuted an accusation of another life")
	h.feed(mtPeerAddr(1), &wire.Ping{Seq: 77, Target: mtSelf, From: mtPeer(1), TargetLife: own + 1})
	for _, p := range h.ready().Packets {
		for _, msg := range p.Msgs {
			if a, ok := msg.(*wire.Ack); ok {
				require.NotEqual(t, uint32(77), a.Seq, "answered a ping for another life")
			}
		}
	}
	h.feed(mtPeerAddr(1), &wire.Ping{Seq: 78, Target: mtSelf, From: mtPeer(1), TargetLife: own})
	acked := false
	for _, p := range h.ready().Packets {
		for _, msg := range p.Msgs {
			if a, ok := msg.(*wire.Ack); ok && a.Seq == 78 {
				acked = true
			}
		}
	}
	require.True(t, acked, "a ping for this life went unanswered")
}

// With Admission.Updates, Admit sees a member's later changes: a refused
// change takes the member out of this member's view (EventLeave, dead
// here only, not in its push-pulls), and its next news is asked about
// again. Without it, the change is applied unasked.
func TestAdmitUpdates(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("Admission.Updates=%v", on), func(t *testing.T) {
			cfg := mtConfig()
			cfg.Admission.Updates = on
			asked := 0
			cfg.Admission.Admit = func(mb Member) error {
				asked++
				if string(mb.Meta) == "bad" {
					return errors.New("bad metadata")
				}
				return nil
			}
			h := newMT(t, cfg)
			h.joinLivePeers(4)
			asked = 0
			bad := lifeAlive(2, mtLife(2, 0), mtPeerAddr(2), 2)
			bad.Meta = []byte("bad")
			h.feed(mtPeerAddr(2), bad)
			out := h.ready()
			mb, _ := h.m.Member(mtPeer(2))
			if !on {
				require.Zero(t, asked)
				require.Equal(t, "bad", string(mb.Meta))
				require.Equal(t, EventUpdate, out.Events[0].Kind)
				return
			}
			require.Equal(t, 1, asked)
			require.Equal(t, StateDead, mb.State)
			require.Equal(t, "", string(mb.Meta), "the refused change was applied")
			require.Len(t, out.Events, 1)
			require.Equal(t, EventLeave, out.Events[0].Kind)
			require.Equal(t, uint64(1), h.m.Stats().Admission.Refused)
			for _, p := range out.Packets {
				for _, msg := range p.Msgs {
					if d, ok := msg.(*wire.Dead); ok {
						require.NotEqual(t, mtPeer(2), d.Name, "the refusal was gossiped")
					}
				}
			}
			state, err := h.m.encodeState(false, mtPeer(1), peerView{})
			require.NoError(t, err)
			pp, err := wire.ParsePushPull(state)
			require.NoError(t, err)
			pp.Each(func(v *wire.MemberView) {
				require.NotEqual(t, mtPeer(2), string(v.Name), "the refused member is in the push-pull")
			})

			good := lifeAlive(2, mtLife(2, 0), mtPeerAddr(2), 3)
			good.Meta = []byte("good")
			h.feed(mtPeerAddr(2), good)
			out = h.ready()
			require.Equal(t, 2, asked)
			mb, _ = h.m.Member(mtPeer(2))
			require.Equal(t, StateAlive, mb.State)
			require.Equal(t, "good", string(mb.Meta))
			require.Equal(t, EventJoin, out.Events[0].Kind)
		})
	}
}
