package swim

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
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

// suspectFrame returns the suspicion about name riding in a packet.
func suspectFrame(p mtPkt, name string) *wire.Suspect {
	for _, msg := range p.Msgs {
		if s, ok := msg.(*wire.Suspect); ok && s.Name == name {
			return s
		}
	}
	return nil
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
// D = T + SuspicionMult·max(1, log10 N)·ProbeInterval. With FinalCheck off
// the member is declared dead at D exactly. With FinalCheck on, the final
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
				cfg.FinalCheck = finalCheck
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

// finalCheckOf drives the Machine, with the member at silentAddr silent and
// everyone else answering, until the final check of that member goes out.
// It returns that tick's outputs, the final-check pings to the member (a
// probe of it may go out in the same tick; a test acks them all) and, when
// there is one, the TCP check of the final check.
func (h *mt) finalCheckOf(name string, silentAddr netip.AddrPort, limit time.Time) (mtOut, []*wire.Ping, *StreamRequest) {
	h.t.Helper()
	silent := map[netip.AddrPort]bool{silentAddr: true}
	before := h.m.Stats().FinalChecks
	var out mtOut
	for h.m.Stats().FinalChecks == before {
		out = h.step(limit, silent)
	}
	require.Equal(h.t, before+1, h.m.Stats().FinalChecks)
	ps, pkts := pingsTo(out, name)
	require.NotEmpty(h.t, ps, "the final check pings the suspect")
	seqs := map[uint32]bool{}
	for i, p := range ps {
		require.Equal(h.t, silentAddr, pkts[i].To)
		seqs[p.Seq] = true
	}
	var final *StreamRequest
	for i, sr := range out.Streams {
		msgs, err := wire.DecodeStreamPacket(sr.Data)
		require.NoError(h.t, err)
		if p, ok := msgs[0].(*wire.Ping); ok && seqs[p.Seq] {
			require.Nil(h.t, final, "one TCP check per final check")
			final = &out.Streams[i]
		}
	}
	return out, ps, final
}

// TestFinalCheck: at the suspicion timeout a final ping goes to the
// suspect, carrying the suspicion; with TCPChecks a member that accused the
// suspect itself adds a TCP ping. An answer saves the member (an alive in
// the TCP reply refutes at once); silence for ProbeTimeout makes it dead.
func TestFinalCheck(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		for _, outcome := range []string{"silent", "udp ack", "tcp ack with refutation", "tcp error"} {
			if !tcp && outcome != "silent" && outcome != "udp ack" {
				continue
			}
			t.Run(fmt.Sprintf("tcp=%v/%s", tcp, outcome), func(t *testing.T) {
				cfg := mtConfig()
				cfg.FinalCheck = true
				cfg.TCPChecks = tcp
				h := newMT(t, cfg)
				h.joinPeers(3, 1)
				// This member accuses the first member it probes, which
				// stays silent.
				ping, pkt, _ := h.firstProbe()
				x, xAddr := ping.Target, pkt.To
				out, ps, stream := h.finalCheckOf(x, xAddr, h.now.Add(time.Minute))
				final := h.now
				mem, _ := h.m.Member(x)
				require.Equal(t, StateSuspect, mem.State)

				carried := false
				for _, p := range out.Packets {
					if p.To != xAddr {
						continue
					}
					if s := suspectFrame(p, x); s != nil {
						require.Equal(t, &wire.Suspect{Name: x, Incarnation: 1, From: mtSelf}, withoutSilence(s)[0])
						carried = true
					}
				}
				require.True(t, carried, "the final check carries the suspicion")

				if !tcp {
					require.Nil(t, stream, "no TCP check with TCPChecks off")
				} else {
					require.NotNil(t, stream, "an accuser adds a TCP check to the UDP one")
					require.Equal(t, xAddr, stream.To)
					require.Positive(t, stream.Timeout)
					msgs, err := wire.DecodeStreamPacket(stream.Data)
					require.NoError(t, err)
					require.Equal(t, x, msgs[0].(*wire.Ping).Target)
					require.Equal(t, mtSelf, msgs[0].(*wire.Ping).From)
					require.Contains(t, withoutSilence(msgs[1:]...), wire.Message(&wire.Suspect{Name: x, Incarnation: 1, From: mtSelf}),
						"the TCP check carries the suspicion")
				}

				h.now = final.Add(cfg.ProbeTimeout / 5)
				saved := false
				switch outcome {
				case "udp ack":
					for _, p := range ps {
						h.feed(xAddr, &wire.Ack{Seq: p.Seq})
					}
					saved = true
				case "tcp ack with refutation":
					msgs, err := wire.DecodeStreamPacket(stream.Data)
					require.NoError(t, err)
					ack, err := wire.AppendFrame(nil, &wire.Ack{Seq: msgs[0].(*wire.Ping).Seq})
					require.NoError(t, err)
					alive, err := wire.AppendFrame(nil, &wire.Alive{Name: x, Addr: wire.EncodeAddr(xAddr), Incarnation: 2})
					require.NoError(t, err)
					reply := wire.AppendCompound(nil, [][]byte{ack, alive})
					require.NoError(t, h.m.HandleStreamResponse(h.now, stream.ID, reply, nil))
					saved = true
				case "tcp error":
					failed := h.m.Stats().TCPPingsFailed
					boom := errors.New("connection refused")
					require.ErrorIs(t, h.m.HandleStreamResponse(h.now, stream.ID, nil, boom), boom)
					require.Equal(t, failed+1, h.m.Stats().TCPPingsFailed)
				}
				h.m.Ready()

				h.tick(final.Add(cfg.ProbeTimeout - time.Nanosecond))
				out = h.ready()
				mem, _ = h.m.Member(x)
				require.NotEqual(t, StateDead, mem.State, "not dead before the final check times out")
				require.Empty(t, out.eventsAbout(x))

				h.tick(final.Add(cfg.ProbeTimeout))
				out = h.ready()
				mem, _ = h.m.Member(x)
				st := h.m.Stats()
				if saved {
					require.Equal(t, uint64(1), st.FinalChecksSaved)
					require.Zero(t, st.DeathsDeclared)
					require.NotEqual(t, StateDead, mem.State, "an answer to the final check prevents death")
					for _, e := range out.eventsAbout(x) {
						require.NotEqual(t, EventLeave, e.Kind)
					}
					if outcome == "tcp ack with refutation" {
						require.Equal(t, StateAlive, mem.State, "the alive in the TCP reply refutes the suspicion")
						require.Equal(t, uint64(2), mem.Incarnation)
					}
					return
				}
				require.Zero(t, st.FinalChecksSaved)
				require.Equal(t, uint64(1), st.DeathsDeclared)
				require.Equal(t, StateDead, mem.State)
				evs := out.eventsAbout(x)
				require.Len(t, evs, 1)
				require.Equal(t, EventLeave, evs[0].Kind)
				require.Equal(t, StateDead, evs[0].Member.State, "a failed member leaves as dead, not left")
				require.True(t, containsMsg(h.piggyback(), &wire.Dead{Name: x, Incarnation: 1, From: mtSelf}), "the death is gossiped")
			})
		}
	}
}

// TestFinalCheckTCPOnlyByAccusers: a member that only heard of a suspicion
// checks the suspect over UDP alone, so that a member resuming from a pause
// does not face a TCP connection from everyone.
func TestFinalCheckTCPOnlyByAccusers(t *testing.T) {
	cfg := mtConfig()
	cfg.FinalCheck = true
	cfg.TCPChecks = true
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	deadline := h.suspectPeer1()
	h.tick(deadline)
	out := h.ready()
	require.Equal(t, uint64(1), h.m.Stats().FinalChecks)
	ps, _ := pingsTo(out, mtPeer(1))
	require.NotEmpty(t, ps, "the UDP final check goes out")
	for _, sr := range out.Streams {
		require.NotEqual(t, mtPeerAddr(1), sr.To, "no TCP final check by a member that did not accuse")
	}
}

// TestFinalCheckPingsTwice: a UDP final check left unanswered pings the
// suspect once more halfway through, with the same sequence number and the
// suspicion, so a single lost packet does not kill; an answer to the second
// ping saves the member.
func TestFinalCheckPingsTwice(t *testing.T) {
	cfg := mtConfig()
	cfg.FinalCheck = true
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	deadline := h.suspectPeer1()
	h.tick(deadline)
	first, _ := pingsTo(h.ready(), mtPeer(1))
	require.Len(t, first, 1, "the final check")
	start := h.now

	h.tick(start.Add(cfg.ProbeTimeout/2 - time.Nanosecond))
	again, _ := pingsTo(h.ready(), mtPeer(1))
	require.Empty(t, again, "no second ping before halfway")
	require.Equal(t, start.Add(cfg.ProbeTimeout/2), h.m.NextDeadline(), "the retry is a deadline")
	h.tick(start.Add(cfg.ProbeTimeout / 2))
	out := h.ready()
	again, pkts := pingsTo(out, mtPeer(1))
	require.Len(t, again, 1, "the unanswered check pings again")
	require.Equal(t, first[0].Seq, again[0].Seq)
	require.NotNil(t, suspectFrame(pkts[0], mtPeer(1)), "the second ping carries the suspicion too")

	h.tick(start.Add(cfg.ProbeTimeout * 3 / 4))
	h.ready()
	require.Empty(t, func() []*wire.Ping { p, _ := pingsTo(h.ready(), mtPeer(1)); return p }(), "one retry only")
	h.feed(mtPeerAddr(1), &wire.Ack{Seq: again[0].Seq})
	h.tick(start.Add(cfg.ProbeTimeout))
	h.ready()
	mem, _ := h.m.Member(mtPeer(1))
	require.NotEqual(t, StateDead, mem.State)
	require.Equal(t, uint64(1), h.m.Stats().FinalChecksSaved)
}

// TestFinalCheckCarriesSuspicionWithoutBuddyPing: Config.FinalCheck says
// the final ping carries the suspicion, whether or not BuddyPing is on.
// The broadcast queue is drained first, so only the final check itself can
// carry it.
func TestFinalCheckCarriesSuspicionWithoutBuddyPing(t *testing.T) {
	for _, buddy := range []bool{true, false} {
		t.Run(fmt.Sprintf("BuddyPing=%v", buddy), func(t *testing.T) {
			cfg := mtConfig()
			cfg.FinalCheck = true
			cfg.BuddyPing = buddy
			cfg.RetransmitMult = 1
			h := newMT(t, cfg)
			h.joinPeers(3, 1)
			deadline := h.suspectPeer1()
			h.settle()
			h.tick(deadline)
			out := h.ready()
			require.Equal(t, uint64(1), h.m.Stats().FinalChecks)
			_, pkts := pingsTo(out, mtPeer(1))
			carried := false
			for _, p := range pkts {
				carried = carried || suspectFrame(p, mtPeer(1)) != nil
			}
			require.True(t, carried, "the final check carries the suspicion")
		})
	}
}

// TestRefutationCancelsSuspicion: an alive at a higher incarnation ends the
// suspicion: no final check, no death when its timer would have run out.
func TestRefutationCancelsSuspicion(t *testing.T) {
	for _, finalCheck := range []bool{true, false} {
		t.Run(fmt.Sprintf("finalCheck=%v", finalCheck), func(t *testing.T) {
			cfg := mtConfig()
			cfg.FinalCheck = finalCheck
			h := newMT(t, cfg)
			h.joinPeers(3, 1)
			deadline := h.suspectPeer1()
			h.m.Ready()
			h.now = h.now.Add(cfg.ProbeInterval)
			h.feed(mtPeerAddr(1), mtAlive(1, 2))
			out := h.ready()
			evs := out.eventsAbout(mtPeer(1))
			require.Len(t, evs, 1)
			require.Equal(t, EventAlive, evs[0].Kind)
			require.Equal(t, uint64(2), evs[0].Member.Incarnation)

			for _, at := range []time.Time{deadline, deadline.Add(cfg.ProbeTimeout)} {
				h.tick(at)
				out = h.ready()
				require.Empty(t, out.eventsAbout(mtPeer(1)), "at %v", at.Sub(mtStart))
			}
			mem, _ := h.m.Member(mtPeer(1))
			require.Equal(t, StateAlive, mem.State)
			require.Zero(t, h.m.Stats().FinalChecks)
			require.Zero(t, h.m.Stats().DeathsDeclared)
		})
	}
}

// TestSuspicionAtNewerIncarnationRestartsTimer: a suspicion at a newer
// incarnation replaces the old one, with a timer that starts over.
func TestSuspicionAtNewerIncarnationRestartsTimer(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	first := h.suspectPeer1()
	h.now = h.now.Add(2 * cfg.ProbeInterval)
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 2, From: "accuser"})
	second := h.now.Add(expectedSuspicionTimeout(cfg, h.m.NumMembers()))
	h.m.Ready()

	h.tick(first)
	h.m.Ready()
	mem, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateSuspect, mem.State, "the old timer no longer counts")
	require.Equal(t, uint64(2), mem.Incarnation)

	h.tick(second)
	out := h.ready()
	mem, _ = h.m.Member(mtPeer(1))
	require.Equal(t, StateDead, mem.State)
	require.Equal(t, uint64(2), mem.Incarnation)
	evs := out.eventsAbout(mtPeer(1))
	require.NotEmpty(t, evs)
	require.Equal(t, EventLeave, evs[len(evs)-1].Kind)
}

// TestBuddyPing: with BuddyPing a ping to a member held suspect carries the
// suspicion (Lifeguard §IV-C); without it, or to an alive member, it does
// not. The broadcast queue is drained first, so only the buddy frame can
// carry it.
func TestBuddyPing(t *testing.T) {
	for _, buddy := range []bool{true, false} {
		for _, suspect := range []bool{true, false} {
			t.Run(fmt.Sprintf("BuddyPing=%v/suspect=%v", buddy, suspect), func(t *testing.T) {
				cfg := mtConfig()
				cfg.BuddyPing = buddy
				h := newMT(t, cfg)
				h.joinPeers(1, 1) // every probe goes to p001
				if suspect {
					h.suspectPeer1()
				}
				h.settle()
				ping, pkt, _ := h.firstProbe()
				require.Equal(t, mtPeer(1), ping.Target)
				s := suspectFrame(pkt, mtPeer(1))
				if !(buddy && suspect) {
					require.Nil(t, s, "no suspicion rides on the ping")
					return
				}
				require.Equal(t, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: mtSelf}, withoutSilence(s)[0])
			})
		}
	}
}

// TestSuspicionConfirmations: independent accusations shorten the timeout
// from Max toward Min, timeout = max(Min, Max − (Max−Min)·ln(C+1)/ln(K+1))
// with K = SuspicionMult−2 (Lifeguard §IV-B); an accuser counts once, the
// first accuser not at all, and each new confirmation is passed on.
func TestSuspicionConfirmations(t *testing.T) {
	const (
		minT = 4 * time.Second // SuspicionMult 4, N=10, ProbeInterval 1s
		maxT = 6 * minT        // SuspicionMaxTimeoutMult 6
	)
	timeout := func(c int) time.Duration {
		const k = 2 // SuspicionMult-2
		frac := math.Log(float64(c)+1) / math.Log(k+1)
		return max(minT, maxT-time.Duration(frac*float64(maxT-minT)))
	}
	tests := []struct {
		name       string
		confirmers []string
		c          int
	}{
		{"none", nil, 0},
		{"one", []string{"a2"}, 1},
		{"two", []string{"a2", "a3"}, 2},
		{"more than K", []string{"a2", "a3", "a4", "a5"}, 2},
		{"the same accuser twice", []string{"a2", "a2"}, 1},
		{"the first accuser again", []string{"a1"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mtConfig()
			cfg.SuspicionMult = 4
			cfg.SuspicionMaxTimeoutMult = 6
			h := newMT(t, cfg)
			h.joinPeers(9, 1)
			t0 := h.now
			h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: "a1"})
			h.settle()
			confirmed := map[string]bool{"a1": true}
			for _, from := range tc.confirmers {
				h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: from})
				gossip := withoutSilence(deltasAbout(h.piggyback(), mtPeer(1))...)
				if confirmed[from] || len(confirmed) > 2 {
					require.Empty(t, gossip, "an accusation that does not count is not passed on")
				} else {
					require.Equal(t, []wire.Message{&wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: from}}, gossip,
						"a new confirmation is passed on")
				}
				confirmed[from] = true
				h.settle()
			}
			deadline := t0.Add(timeout(tc.c))
			h.tick(deadline.Add(-time.Nanosecond))
			mem, _ := h.m.Member(mtPeer(1))
			require.Equal(t, StateSuspect, mem.State, "still suspect just before %v", timeout(tc.c))
			h.tick(deadline)
			mem, _ = h.m.Member(mtPeer(1))
			require.Equal(t, StateDead, mem.State, "dead at %v", timeout(tc.c))
		})
	}
}

// TestSuspicionAnchoredAtAccusersSilence: a suspicion that says the
// suspect has been silent for a while is anchored that far back, so every
// member decides at about the moment the accuser does.
func TestSuspicionAnchoredAtAccusersSilence(t *testing.T) {
	cfg := mtConfig()
	h := newMT(t, cfg)
	h.joinPeers(3, 1)
	const silence = 1500 * time.Millisecond
	h.now = mtStart.Add(10 * time.Second)
	h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1), Incarnation: 1, From: "a1", Silence: uint32(silence / time.Millisecond)})
	deadline := h.now.Add(-silence).Add(expectedSuspicionTimeout(cfg, 4))
	h.tick(deadline.Add(-time.Nanosecond))
	mem, _ := h.m.Member(mtPeer(1))
	require.Equal(t, StateSuspect, mem.State)
	h.tick(deadline)
	mem, _ = h.m.Member(mtPeer(1))
	require.Equal(t, StateDead, mem.State, "the timeout counts from the accuser's anchor")
}

// TestSuspicionHeardFromIsNotDeclaredDead: with AnyTrafficHeartbeat, a
// suspect heard from since it was accused is not declared dead when the
// timer runs out; its suspicion starts over from the last time it was
// heard (Geode).
func TestSuspicionHeardFromIsNotDeclaredDead(t *testing.T) {
	for _, heartbeat := range []bool{true, false} {
		t.Run(fmt.Sprintf("AnyTrafficHeartbeat=%v", heartbeat), func(t *testing.T) {
			cfg := mtConfig()
			cfg.AnyTrafficHeartbeat = heartbeat
			h := newMT(t, cfg)
			h.joinPeers(3, 1)
			deadline := h.suspectPeer1()
			heard := h.now.Add(time.Second)
			h.now = heard
			h.feed(mtPeerAddr(1), &wire.Ack{Seq: 12345}) // any packet from it
			h.m.Ready()

			h.tick(deadline)
			mem, _ := h.m.Member(mtPeer(1))
			if !heartbeat {
				require.Equal(t, StateDead, mem.State)
				return
			}
			require.Equal(t, StateSuspect, mem.State, "heard from since the accusation: not dead")
			require.Equal(t, uint64(1), h.m.Stats().SuspicionsSavedByTraffic)
			ps, _ := pingsTo(h.ready(), mtPeer(1))
			require.NotEmpty(t, ps, "the suspect is told of the suspicion")

			again := heard.Add(expectedSuspicionTimeout(cfg, 4))
			h.tick(again.Add(-time.Nanosecond))
			mem, _ = h.m.Member(mtPeer(1))
			require.Equal(t, StateSuspect, mem.State)
			h.tick(again)
			mem, _ = h.m.Member(mtPeer(1))
			require.Equal(t, StateDead, mem.State, "silent for a whole timeout since it was last heard")
		})
	}
}

// TestBuddyPingRefutationRidesOnTheAck: a ping that carries a suspicion of
// its receiver is answered with an ack that carries the refutation, so the
// prober learns of it in one round trip (Lifeguard §IV-C).
func TestBuddyPingRefutationRidesOnTheAck(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	h.ready()
	self := h.m.LocalMember()
	h.feed(mtPeerAddr(1),
		&wire.Ping{Seq: 7, Target: self.Name, From: mtPeer(1)},
		&wire.Suspect{Name: self.Name, Incarnation: self.Incarnation, From: mtPeer(1)})
	out := h.ready()
	require.Len(t, out.Packets, 1, "one answer")
	var acked bool
	var refutation *wire.Alive
	for _, msg := range out.Packets[0].Msgs {
		switch msg := msg.(type) {
		case *wire.Ack:
			acked = msg.Seq == 7
		case *wire.Alive:
			if msg.Name == self.Name {
				refutation = msg
			}
		}
	}
	require.True(t, acked, "the ping is acked")
	require.NotNil(t, refutation, "the refutation rides on the ack")
	require.Equal(t, self.Incarnation+1, refutation.Incarnation)
}
