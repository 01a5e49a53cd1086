package swim

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// answerAsMember answers, as the live member i at incarnation *inc would,
// every ping out sends it: with its ack, and with its refutation (alive
// above the claim) when the ping carries a claim that it died or left. It
// returns the outputs that followed.
func (h *mt) answerAsMember(out mtOut, i int, inc *uint64) mtOut {
	h.t.Helper()
	var more mtOut
	for _, p := range out.Packets {
		if p.To != mtPeerAddr(i) {
			continue
		}
		var ping *wire.Ping
		claimed := false
		for _, msg := range p.Msgs {
			switch msg := msg.(type) {
			case *wire.Ping:
				ping = msg
			case *wire.Dead:
				claimed = claimed || msg.Name == mtPeer(i) && msg.Incarnation >= *inc
			}
		}
		if ping == nil {
			continue
		}
		reply := []wire.Message{&wire.Ack{Seq: ping.Seq}}
		if claimed {
			*inc++
			reply = append(reply, mtAlive(i, *inc))
		}
		h.feed(mtPeerAddr(i), reply...)
		o := h.ready()
		more.Packets = append(more.Packets, o.Packets...)
		more.Events = append(more.Events, o.Events...)
	}
	return more
}

// TestForgedDeathsAreChecked: a death of a live member forged at its
// current incarnation every 250 ms for 15 s (the flapping attack: 49 leave
// and 50 join events on real agents) makes no event: each is checked with
// the member first, which answers and refutes.
func TestForgedDeathsAreChecked(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(4, 1)
	inc := uint64(1)
	var events []Event
	end := h.now.Add(15 * time.Second)
	forged := 0
	for at := h.now; at.Before(end); at = at.Add(250 * time.Millisecond) {
		h.tick(at)
		out := h.respond(map[netip.AddrPort]bool{mtPeerAddr(1): true})
		events = append(events, out.eventsAbout(mtPeer(1))...)
		h.feed(mtStranger, &wire.Dead{Name: mtPeer(1), Incarnation: inc, From: mtPeer(2)})
		forged++
		out = h.ready()
		events = append(events, out.eventsAbout(mtPeer(1))...)
		events = append(events, h.answerAsMember(out, 1, &inc).eventsAbout(mtPeer(1))...)
	}
	require.Empty(t, events, "a forged death made events")
	got, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateAlive, got.State)
	st := h.m.Stats()
	require.Equal(t, uint64(forged), st.DeathChecks)
	require.Equal(t, uint64(forged), st.DeathClaimsRefuted)
}

// TestReportedDeathOfASuspect: a death reported of a member this one
// holds suspect counts at once once the suspicion's window has passed as
// this member counts it (from where two accusers agree the silence began,
// or from when it first held the suspicion); one reported earlier, on one
// accuser's word, is checked with the member first, and the member's
// silence then only makes it a suspect (SWIM §4.2: its window to refute is
// not cut short by anyone's report).
func TestReportedDeathOfASuspect(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(4, 1)
	window, _ := h.m.suspicionBounds()

	// One accuser claims a long silence, and reports the death a probe
	// interval later: checked, and unanswered, still a suspect.
	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2), Silence: 60_000})
	h.ready()
	h.now = h.now.Add(h.cfg.ProbeInterval)
	h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	out := h.ready()
	require.Empty(t, out.eventsAbout(mtPeer(1)), "one accuser's word: checked first")
	require.Equal(t, uint64(1), h.m.Stats().DeathChecks)
	h.run(h.now.Add(h.cfg.ProbeTimeout), map[netip.AddrPort]bool{mtPeerAddr(1): true})
	got, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateSuspect, got.State, "unanswered: suspect, not dead")
	require.Equal(t, uint64(1), h.m.Stats().DeathClaimsUnanswered)

	// Two accusers agree the silence began a window ago: the death counts
	// at once.
	h.feed(mtPeerAddr(2), &wire.Suspect{Name: mtPeer(3), Incarnation: 1, From: mtPeer(2), Silence: uint32(window.Milliseconds())})
	h.feed(mtPeerAddr(4), &wire.Suspect{Name: mtPeer(3), Incarnation: 1, From: mtPeer(4), Silence: uint32(window.Milliseconds())})
	h.ready()
	h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(3), Incarnation: 1, From: mtPeer(2)})
	out = h.ready()
	require.Len(t, out.eventsAbout(mtPeer(3)), 1)
	require.Equal(t, StateDead, out.eventsAbout(mtPeer(3))[0].Member.State)
	require.Equal(t, uint64(1), h.m.Stats().DeathChecks, "no check")
}

// TestClaimChecksBounded: deaths reported of more live members at once
// than maxClaimChecks start that many checks; the rest are held as
// suspicions, which kill no one at once either, and are counted.
func TestClaimChecksBounded(t *testing.T) {
	const members = maxClaimChecks + 4
	h := newMT(t, mtConfig())
	h.joinPeers(members+1, 1)
	for i := 2; i <= members+1; i++ {
		h.feed(mtPeerAddr(1), &wire.Dead{Name: mtPeer(i), Incarnation: 1, From: mtPeer(1)})
	}
	out := h.ready()
	pings, _ := out.pings()
	require.Len(t, pings, maxClaimChecks)
	st := h.m.Stats()
	require.Equal(t, uint64(maxClaimChecks), st.DeathChecks)
	require.Equal(t, uint64(4), st.ClaimChecksRefused)
	for i := 2; i <= members+1; i++ {
		got, _ := h.m.Member(mtPeer(i))
		require.NotEqual(t, StateDead, got.State, fmt.Sprint(mtPeer(i)))
	}
	require.Len(t, h.m.Suspicions(), 4)

	// Unanswered, the checks end in suspicions and free their places.
	silent := map[netip.AddrPort]bool{}
	for i := 2; i <= members+1; i++ {
		silent[mtPeerAddr(i)] = true
	}
	h.run(h.now.Add(h.cfg.ProbeTimeout), silent)
	require.Zero(t, h.m.deathChecks)
	require.Empty(t, h.m.claimChecks)
	got, _ := h.m.Member(mtPeer(2))
	require.Equal(t, StateSuspect, got.State)
	require.Equal(t, uint64(maxClaimChecks), h.m.Stats().DeathClaimsUnanswered)

	// Leaves are not bounded: a scaled-down cluster's mass leave is
	// checked whole.
	h2 := newMT(t, mtConfig())
	h2.joinPeers(members+1, 1)
	for i := 2; i <= members+1; i++ {
		h2.feed(mtPeerAddr(1), &wire.Dead{Name: mtPeer(i), Incarnation: 1, From: mtPeer(1), Left: true})
	}
	pings, _ = h2.ready().pings()
	require.Len(t, pings, members)
	require.Zero(t, h2.m.Stats().ClaimChecksRefused)
}
