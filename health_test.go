package swim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// TestLateProbeAccusesNoOne: with a real-time driver (WatchClock), a probe
// whose end is handled well after its deadlines were due accuses no one
// and raises the health score; handled on time, the same silence makes the
// target suspect.
func TestLateProbeAccusesNoOne(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			cfg := mtConfig()
			cfg.IndirectChecks = 0
			cfg.AwarenessMaxMultiplier = 8
			h := newMT(t, cfg)
			WatchClock()(h.m)
			h.joinPeers(3, 1)
			ping, _, _ := h.firstProbe() // never answered
			t0 := h.now
			if late {
				// Asleep from before the ack timeout until after the
				// probe's end.
				h.tick(t0.Add(cfg.ProbeInterval + 3*h.m.lateSlack()))
			} else {
				h.tick(t0.Add(cfg.ProbeTimeout))
				h.tick(t0.Add(cfg.ProbeInterval))
			}
			mem, _ := h.m.Member(ping.Target)
			st := h.m.Stats()
			require.Equal(t, uint64(1), st.ProbesFailed)
			if late {
				require.Equal(t, StateAlive, mem.State, "a late member accuses no one")
				require.Equal(t, uint64(1), st.ProbesInconclusive)
				require.Equal(t, 1, h.m.Status().HealthScore, "waking late is evidence against ourselves")
				return
			}
			require.Equal(t, StateSuspect, mem.State)
			require.Zero(t, st.ProbesInconclusive)
		})
	}
}

// TestLateFinalCheckRunsAgain: a final check that expires while this member
// was not running is run again (same sequence number, a fresh timeout)
// instead of ending in death; once a check expires on time, the suspect is
// declared dead; and an answer to the re-run ping saves it.
func TestLateFinalCheckRunsAgain(t *testing.T) {
	for _, answer := range []bool{false, true} {
		t.Run(fmt.Sprintf("answered=%v", answer), func(t *testing.T) {
			cfg := mtConfig()
			cfg.Detection.FinalCheck = true
			h := newMT(t, cfg)
			WatchClock()(h.m)
			h.joinPeers(3, 1)
			deadline := h.suspectPeer1()
			h.tick(deadline)
			first, _ := pingsTo(h.ready(), mtPeer(1))
			require.Len(t, first, 1, "the final check")
			start := h.now

			// Asleep through the retry and the expiry.
			h.tick(start.Add(cfg.ProbeTimeout + 3*h.m.lateSlack()))
			again, _ := pingsTo(h.ready(), mtPeer(1))
			require.Len(t, again, 1, "the check runs again")
			require.Equal(t, first[0].Seq, again[0].Seq)
			mem, _ := h.m.Member(mtPeer(1))
			require.Equal(t, StateSuspect, mem.State, "no death decided while late")
			require.Equal(t, uint64(1), h.m.Stats().FinalChecksExtended)
			restart := h.now

			if answer {
				h.feed(mtPeerAddr(1), &wire.Ack{Seq: again[0].Seq})
			}
			// On time from here: the retry, then the expiry.
			h.tick(restart.Add(cfg.ProbeTimeout / 2))
			h.tick(restart.Add(cfg.ProbeTimeout))
			h.ready()
			mem, _ = h.m.Member(mtPeer(1))
			if answer {
				require.NotEqual(t, StateDead, mem.State)
				require.Equal(t, uint64(1), h.m.Stats().FinalChecksSaved)
				return
			}
			require.Equal(t, StateDead, mem.State, "a check that expires on time decides")
			require.Equal(t, uint64(1), h.m.Stats().FinalChecksExtended)
		})
	}
}

// TestFinalCheckWaitsByHealth: a member whose health score is 3 waits four
// ProbeTimeouts for the answer to its final check, as for any probe
// (Lifeguard §IV-A), before it declares the suspect dead.
func TestFinalCheckWaitsByHealth(t *testing.T) {
	cfg := mtConfig()
	cfg.Detection.FinalCheck = true
	cfg.AwarenessMaxMultiplier = 8
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	deadline := h.suspectPeer1()
	h.m.adjustHealth(3)
	h.tick(deadline)
	first, _ := pingsTo(h.ready(), mtPeer(1))
	require.Len(t, first, 1, "the final check")
	start := h.now

	h.tick(start.Add(cfg.ProbeTimeout))
	h.ready()
	mem, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateSuspect, mem.State, "decided after one ProbeTimeout at health 3")
	h.tick(start.Add(4*cfg.ProbeTimeout - 1))
	h.ready()
	mem, _ = h.m.Member(mtPeer(1))
	require.Equal(t, StateSuspect, mem.State)
	h.tick(start.Add(4 * cfg.ProbeTimeout))
	h.ready()
	mem, _ = h.m.Member(mtPeer(1))
	require.Equal(t, StateDead, mem.State, "no answer in four ProbeTimeouts")
}
