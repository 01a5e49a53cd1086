package swim

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// expectedSuspicionTimeout is SuspicionMult·max(1, log10 N)·ProbeInterval.
func expectedSuspicionTimeout(cfg *Config, n int) time.Duration {
	scale := math.Max(1, math.Log10(float64(n)))
	return time.Duration(float64(cfg.SuspicionMult) * scale * float64(cfg.ProbeInterval))
}

// suspectPeer1 makes p001 suspect at incarnation 1 through gossip from
// another member, at h.now, and returns when its suspicion times out.
func (h *mt) suspectPeer1() time.Time {
	h.t.Helper()
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: "accuser"})
	mem, _ := h.m.Member(mtPeer(1))
	require.Equal(h.t, StateSuspect, mem.State)
	h.m.Ready()
	return h.now.Add(expectedSuspicionTimeout(h.cfg, h.m.NumMembers()))
}

// pingsTo returns the pings addressed to the named member and their packets.
func pingsTo(o mtOut, name string) ([]*wire.Ping, []mtPkt) {
	var ps []*wire.Ping
	var pkts []mtPkt
	all, allPkts := o.pings()
	for i, p := range all {
		if p.Target == name {
			ps = append(ps, p)
			pkts = append(pkts, allPkts[i])
		}
	}
	return ps, pkts
}

// TestSuspicionTimeout: a suspicion raised at T times out at
// D = T + SuspicionMult·max(1, log10 N)·ProbeInterval. With Detection.FinalCheck off
// the member is declared dead at D exactly. With Detection.FinalCheck on, the final
// check goes out within the last ProbeTimeout before D (it may lead the
// timeout, so that it overlaps the window's end), the member is never
// declared dead before D, and it is declared dead ProbeTimeout after the
// unanswered check. The Machine is driven from its own NextDeadline, so
// these are the times a driver would see.
func TestSuspicionTimeout(t *testing.T) {
	for _, finalCheck := range []bool{false, true} {
		for _, tc := range []struct{ n, mult int }{
			{2, 4}, {4, 4}, {10, 4}, {50, 4}, {100, 4}, {1000, 4}, {100, 2}, {4, 1},
		} {
			t.Run(fmt.Sprintf("finalCheck=%v/N=%d/mult=%d", finalCheck, tc.n, tc.mult), func(t *testing.T) {
				cfg := mtConfig()
				cfg.SuspicionMult = tc.mult
				cfg.Detection.FinalCheck = finalCheck
				h := newMT(t, cfg)
				h.joinPeers(tc.n-1, 1)
				h.now = mtStart.Add(123 * time.Millisecond)
				deadline := h.suspectPeer1()
				silent := map[netip.AddrPort]bool{mtPeerAddr(1): true}
				limit := deadline.Add(2 * cfg.ProbeInterval)

				var finalAt, deathAt time.Time
				var deathEvents []Event
				var finalOut mtOut
				for deathAt.IsZero() {
					out := h.step(limit, silent)
					if finalAt.IsZero() && h.m.Stats().FinalChecks > 0 {
						finalAt, finalOut = h.now, out
					}
					for _, e := range out.eventsAbout(mtPeer(1)) {
						if e.Kind == EventLeave {
							deathAt = h.now
							deathEvents = append(deathEvents, e)
						}
					}
				}
				mem, _ := h.m.Member(mtPeer(1))
				require.Equal(t, StateDead, mem.State)
				require.Len(t, deathEvents, 1)
				require.Equal(t, StateDead, deathEvents[0].Member.State, "a failed member leaves as dead, not left")
				require.Equal(t, uint64(1), h.m.Stats().DeathsDeclared)
				require.Contains(t, h.piggyback(), wire.Message(&wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtSelf}),
					"the death is gossiped")
				if !finalCheck {
					require.Zero(t, h.m.Stats().FinalChecks)
					require.Equal(t, deadline, deathAt, "dead exactly at the suspicion timeout")
					return
				}
				require.Equal(t, uint64(1), h.m.Stats().FinalChecks)
				require.False(t, finalAt.After(deadline), "final check at %v, after the timeout %v", finalAt.Sub(mtStart), deadline.Sub(mtStart))
				require.False(t, finalAt.Before(deadline.Add(-cfg.ProbeTimeout)), "final check at %v, over ProbeTimeout before the timeout %v",
					finalAt.Sub(mtStart), deadline.Sub(mtStart))
				ps, _ := pingsTo(finalOut, mtPeer(1))
				require.NotEmpty(t, ps, "the final check pings the suspect")
				require.Equal(t, finalAt.Add(cfg.ProbeTimeout), deathAt, "dead ProbeTimeout after the unanswered final check")
				require.False(t, deathAt.Before(deadline), "never dead before the suspicion timeout")
			})
		}
	}
}

// TestSuspicions: Machine.Suspicions reports a suspicion from the moment
// it is raised, with its accuser, its confirmations and the deadline at
// which the member is then declared dead (Detection.FinalCheck off: exactly then); a
// confirmation brings the deadline closer, and a refutation or the death
// removes it.
func TestSuspicions(t *testing.T) {
	cfg := mtConfig()
	cfg.SuspicionMult = 5 // K = 3 confirmations
	cfg.SuspicionMaxTimeoutMult = 4
	h := newMT(t, cfg)
	h.joinPeers(9, 1)
	require.Empty(t, h.m.Suspicions())

	h.now = mtStart.Add(250 * time.Millisecond)
	raised := h.now
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: "accuser"})
	lo, hi := h.m.suspicionBounds()
	require.Equal(t, []Suspicion{{
		Name: mtPeer(1), Incarnation: 1, From: "accuser", Since: raised, Deadline: raised.Add(hi),
	}}, h.m.Suspicions(), "no confirmation yet: the longest timeout")

	h.now = h.now.Add(100 * time.Millisecond)
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	got := h.m.Suspicions()
	require.Len(t, got, 1)
	require.Equal(t, 1, got[0].Confirmations)
	require.Equal(t, raised, got[0].Since, "a confirmation keeps the anchor")
	require.True(t, got[0].Deadline.Before(raised.Add(hi)), "a confirmation brings the deadline closer")
	require.False(t, got[0].Deadline.Before(raised.Add(lo)), "never before the shortest timeout")

	// A second suspect, refuted: only the first remains.
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(3), Incarnation: 1, From: "accuser"})
	require.Equal(t, []string{mtPeer(1), mtPeer(3)}, suspicionNames(h.m.Suspicions()), "sorted by name")
	h.feed(mtPeerAddr(3), mtAlive(3, 2))
	require.Equal(t, []string{mtPeer(1)}, suspicionNames(h.m.Suspicions()), "a refutation ends the suspicion")

	// The member is declared dead at the deadline last reported (this
	// member's own failed probes of it confirm and move it meanwhile).
	silent := map[netip.AddrPort]bool{mtPeerAddr(1): true}
	var deadline, deathAt time.Time
	for deathAt.IsZero() {
		ss := h.m.Suspicions()
		require.Len(t, ss, 1, "at %v", h.now.Sub(mtStart))
		deadline = ss[0].Deadline
		out := h.step(raised.Add(hi+2*cfg.ProbeInterval), silent)
		for _, e := range out.eventsAbout(mtPeer(1)) {
			if e.Kind == EventLeave {
				deathAt = h.now
			}
		}
	}
	require.Equal(t, deadline, deathAt)
	require.Empty(t, h.m.Suspicions(), "a death ends the suspicion")
}

func suspicionNames(ss []Suspicion) []string {
	var names []string
	for _, s := range ss {
		names = append(names, s.Name)
	}
	return names
}

// TestRelayedSuspicionWaits: in a cluster whose relayed news is paced, a
// member that only relayed a suspicion holds it relayWait longer than the
// accuser does, so the accuser's verdict comes first; once it accuses the
// member itself the wait is gone. Below the pacing scale a relayer waits
// as long as the accuser (TestSuspicions).
func TestRelayedSuspicionWaits(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipInterval = 200 * time.Millisecond
	h := newMT(t, cfg)
	h.joinPeers(1200, 1)
	require.Greater(t, h.m.joinStormGap(), cfg.GossipInterval, "relayed news is paced at this size")
	wait := h.m.relayWait()
	require.Positive(t, wait)

	raised := h.now
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: "accuser"})
	_, hi := h.m.suspicionBounds()
	require.Equal(t, []Suspicion{{
		Name: mtPeer(1), Incarnation: 1, From: "accuser", Since: raised, Deadline: raised.Add(hi + wait),
	}}, h.m.Suspicions(), "a relayer waits relayWait past the accuser's deadline")

	// The member is declared dead at the deadline reported, not before.
	var deathAt time.Time
	for deathAt.IsZero() {
		out := h.step(raised.Add(hi+wait+cfg.ProbeInterval), nil)
		for _, e := range out.eventsAbout(mtPeer(1)) {
			if e.Kind == EventLeave {
				deathAt = h.now
			}
		}
	}
	require.Equal(t, raised.Add(hi+wait), deathAt, "dead at the relayer's deadline")

	// A relayer that then accuses the member itself keeps the accuser's
	// deadline.
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(2), Incarnation: 1, From: "accuser"})
	since := h.now
	_, hi = h.m.suspicionBounds()
	wait = h.m.relayWait()
	require.Equal(t, since.Add(hi+wait), h.m.Suspicions()[0].Deadline)
	h.m.startSuspicion(h.now, mtPeer(2), 1, mtSelf, since)
	require.Equal(t, since.Add(hi), h.m.Suspicions()[0].Deadline, "its own accusation ends the wait")
}

// TestAccuserTellsSuspectAtOnce: when its probe of a member fails, the
// accuser pings the member at once with the suspicion (Detection.BuddyPing), in the
// very tick it raises it, rather than leaving the member to hear of it by
// gossip; the member's refutation, riding on the ack, ends the suspicion.
// With Detection.BuddyPing off nothing is sent.
func TestAccuserTellsSuspectAtOnce(t *testing.T) {
	for _, buddy := range []bool{true, false} {
		t.Run(fmt.Sprintf("BuddyPing=%v", buddy), func(t *testing.T) {
			cfg := mtConfig()
			cfg.Detection.BuddyPing = buddy
			h := newMT(t, cfg)
			h.joinPeers(8, 1)
			ping, pkt, _ := h.firstProbe()
			target := ping.Target
			silent := map[netip.AddrPort]bool{pkt.To: true}
			var told []*wire.Ping
			for h.m.Stats().SuspicionsRaised == 0 {
				out := h.step(h.now.Add(2*cfg.ProbeInterval), silent)
				if h.m.Stats().SuspicionsRaised == 0 {
					continue
				}
				ps, pkts := pingsTo(out, target)
				for i, p := range ps {
					if slices.ContainsFunc(pkts[i].Msgs, func(msg wire.Message) bool {
						sp, ok := msg.(*wire.Suspect)
						return ok && sp.Name == target && sp.Incarnation == 1 && sp.From == mtSelf && sp.Life == 0 && sp.Sig == nil
					}) {
						told = append(told, p)
					}
				}
			}
			mem, _ := h.m.Member(target)
			require.Equal(t, StateSuspect, mem.State)
			if !buddy {
				require.Empty(t, told, "BuddyPing off: the suspect is not told")
				require.Zero(t, h.m.Stats().SuspectsTold)
				return
			}
			require.Len(t, told, 1, "one ping carrying the suspicion, in the tick that raised it")
			require.Equal(t, uint64(1), h.m.Stats().SuspectsTold)

			// The member, alive after all, refutes on the ack.
			h.feed(pkt.To, &wire.Ack{Seq: told[0].Seq}, &wire.Alive{Name: target, Addr: wire.EncodeAddr(pkt.To), Incarnation: 2})
			mem, _ = h.m.Member(target)
			require.Equal(t, StateAlive, mem.State)
			require.Equal(t, uint64(2), mem.Incarnation)
			require.Empty(t, h.m.Suspicions())
		})
	}
}
