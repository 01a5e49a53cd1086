package swim

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// The count of failed members in the dead list follows every transition:
// a failure, a leave, a failure becoming a leave, a comeback.
func TestDeadListCountsFailed(t *testing.T) {
	cfg := mtConfig()
	cfg.ReconnectInterval = 1e9
	h := newMT(t, cfg)
	h.joinPeers(4, 1)
	failed := func() int {
		n := 0
		h.m.dead.each(func(d deadEntry) {
			if h.m.entry(d.id).state() == StateDead {
				n++
			}
		})
		require.Equal(t, n, h.m.dead.failed, "the count matches the list")
		return n
	}
	h.feedConfirmed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	h.feed(mtPeerAddr(3), &wire.Dead{Name: mtPeer(3), Incarnation: 2, From: mtPeer(3), Left: true})
	h.m.Ready()
	require.Equal(t, failed(), 1)
	require.True(t, h.m.hasDeadToRetry())
	h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 2, From: mtPeer(1), Left: true})
	require.Equal(t, 0, failed(), "a failure that became a leave")
	require.False(t, h.m.hasDeadToRetry())
	h.feedConfirmed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(2), Incarnation: 1, From: mtPeer(4)})
	require.Equal(t, 1, failed())
	h.feed(mtPeerAddr(2), &wire.Alive{Name: mtPeer(2), Addr: wire.EncodeAddr(mtPeerAddr(2)), Incarnation: 3})
	require.Equal(t, 0, failed(), "back alive")
}

// BenchmarkPacketAfterMassLeave is the cost of one ping and NextDeadline,
// the work of every packet, in a table of 2,048 members of which none,
// or 10%, just left gracefully: the second must cost no more than the
// first (before the count, NextDeadline scanned the dead list for a
// reconnect target on every packet).
func BenchmarkPacketAfterMassLeave(b *testing.B) {
	for _, share := range []int{0, 10} {
		b.Run(fmt.Sprintf("left=%d%%", share), func(b *testing.B) {
			t := &testing.T{}
			cfg := mtConfig()
			cfg.ReconnectInterval = 1e9
			cfg.MaxMembers = 4096
			h := newMT(t, cfg)
			h.joinPeers(2048, 1)
			for i := 1; i <= 2048*share/100; i++ {
				h.feed(mtPeerAddr(i), &wire.Dead{Name: mtPeer(i), Incarnation: 2, From: mtPeer(i), Left: true})
			}
			// Past the first reconnect round: with no target, the
			// reconnect timer is dropped, and NextDeadline asks again
			// after every packet whether it is wanted.
			h.tick(mtStart.Add(3 * cfg.ReconnectInterval))
			h.m.Ready()
			pkt := mtPacket(t, &wire.Ping{Seq: 7, Target: mtSelf, From: mtPeer(2000)})
			b.ReportAllocs()
			for b.Loop() {
				if err := h.m.HandlePacket(h.now, mtPeerAddr(2000), pkt); err != nil {
					b.Fatal(err)
				}
				h.m.NextDeadline()
				h.m.Ready()
			}
		})
	}
}

// massFailure is a Machine with the LAN defaults (and the partition
// alarm on) in a table of n peers, of which share% (spread evenly) have
// just crashed: three live members accuse each (enough confirmations for the
// shortest suspicion timeout), and the Machine is driven, the live peers
// answering its probes, until phase: "suspect", one second after the
// accusations, or "dead", once its final checks declared them all dead.
// It returns the Machine and the failed and live peers' indices.
func massFailure(tb testing.TB, n, share int, phase string, tweak func(*Config)) (h *mt, failed, live []int) {
	t := &testing.T{}
	cfg := DefaultLANConfig()
	cfg.Name = mtSelf
	cfg.BindAddr = "127.0.0.1"
	cfg.Partition.Share = 0.5
	if tweak != nil {
		tweak(cfg)
	}
	h = newMT(t, cfg)
	h.joinPeers(n, 1)
	h.run(h.now.Add(2*time.Second), nil)
	silent := map[netip.AddrPort]bool{}
	for i := 1; i <= n; i++ {
		if spread(i, share) {
			failed = append(failed, i)
			silent[mtPeerAddr(i)] = true
		} else {
			live = append(live, i)
		}
	}
	for k, f := range failed {
		for c := range 3 {
			from := live[(3*k+c)%len(live)]
			h.feed(mtPeerAddr(from), &wire.Suspect{Name: mtPeer(f), Incarnation: 1, From: mtPeer(from)})
		}
	}
	switch phase {
	case "suspect":
		h.run(h.now.Add(time.Second), silent)
	case "dead":
		h.run(h.now.Add(30*time.Second), silent) // past the suspicion timeout at 4,096 members
		for _, f := range failed {
			if s, _ := h.m.Member(mtPeer(f)); s.State != StateDead {
				tb.Fatalf("%s is %v, not dead", mtPeer(f), s.State)
			}
		}
	}
	if t.Failed() {
		tb.Fatal("setting up the mass failure failed")
	}
	h.m.Ready()
	return h, failed, live
}

// spread picks share% of the peers, evenly: peer i is picked when the
// share of the first i peers reaches a new whole member (every tenth for
// 10%).
func spread(i, share int) bool { return i*share/100 != (i-1)*share/100 }

// shares are the failure shares benchmarked at n members: at the largest
// also 30%, where a cost linear in the dead stands out of the rest.
func shares(n int) []int {
	if n == 4096 {
		return []int{10, 30}
	}
	return []int{10}
}

// BenchmarkPacketAfterMassFailure is the cost of the packets that follow
// a crash of 10% of n members at once (and 30% of the largest n), and of
// NextDeadline after each
// (the work of every packet), against the same table with no failure:
//
//   - failed=0%: a ping carrying an alive already known, the steady
//     state's rumor;
//   - suspect: a ping carrying a confirmation of a suspicion, while the
//     failed members are suspect;
//   - dead: a ping carrying a death heard before, once they are dead;
//   - comeback (two packets): a failed member restarts and refutes, and
//     dies again, so that it leaves the dead list and re-enters it;
//     comeback-rr the same with randomized round-robin probing, where the
//     member also returns to the probe order;
//   - restart (three packets): a live member leaves gracefully (its leave,
//     then the ack to the leave check) and rejoins, as in a rolling
//     restart after the crash.
//
// None of these may grow with n: nothing a packet does may scan the
// members, the dead or the checks in flight.
func BenchmarkPacketAfterMassFailure(b *testing.B) {
	for _, n := range []int{1024, 2048, 4096} {
		b.Run(fmt.Sprintf("n=%d/failed=0%%", n), func(b *testing.B) { benchMassFailure(b, n, 0, "suspect") })
		for _, share := range shares(n) {
			for _, phase := range []string{"suspect", "dead", "comeback", "comeback-rr", "restart"} {
				b.Run(fmt.Sprintf("n=%d/failed=%d%%/%s", n, share, phase), func(b *testing.B) { benchMassFailure(b, n, share, phase) })
			}
		}
	}
}

func benchMassFailure(b *testing.B, n, share int, phase string) {
	var tweak func(*Config)
	if phase == "comeback-rr" {
		phase = "comeback"
		tweak = func(c *Config) { c.AlignedProbing = false }
	}
	setup := phase
	if phase == "comeback" || phase == "restart" {
		setup = "dead"
	}
	h, failed, live := massFailure(b, n, share, setup, tweak)
	t := &testing.T{}
	// The packets, built before the loop: one per (sender, subject).
	const variety = 64
	pkts := make([][]byte, variety)
	from := make([]netip.AddrPort, variety)
	for i := range pkts {
		sender := live[(i*7919)%len(live)]
		from[i] = mtPeerAddr(sender)
		ping := &wire.Ping{Seq: uint32(i), Target: mtSelf, From: mtPeer(sender)}
		var rumor wire.Message
		switch {
		case phase == "suspect" && len(failed) > 0:
			rumor = &wire.Suspect{Name: mtPeer(failed[i%len(failed)]), Incarnation: 1, From: mtPeer(sender)}
		case phase == "suspect":
			rumor = mtAlive(live[(i*31)%len(live)], 1)
		case phase == "dead":
			rumor = &wire.Dead{Name: mtPeer(failed[i%len(failed)]), Incarnation: 1, From: mtPeer(sender)}
		}
		if rumor != nil {
			pkts[i] = mtPacket(t, ping, rumor)
		}
	}
	// The packets of comebacks and restarts change incarnation every
	// round; each round's are built with the timer stopped.
	subjects := failed
	if phase == "restart" {
		subjects = live[:len(failed)]
	}
	var round []cycle
	inc := uint64(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % max(len(subjects), 1)
		if k == 0 && (phase == "comeback" || phase == "restart") {
			b.StopTimer()
			inc++
			round = round[:0]
			for j, s := range subjects {
				round = append(round, cycleOf(t, phase, s, live[(j+int(inc))%len(live)], inc))
			}
			b.StartTimer()
		}
		switch phase {
		case "comeback", "restart":
			for _, p := range round[k].pkts {
				if err := h.m.HandlePacket(h.now, p.from, p.data); err != nil {
					b.Fatal(err)
				}
				if p.ackLeave {
					h.ackLeaveCheck(b, subjects[k])
				}
			}
		default:
			if err := h.m.HandlePacket(h.now, from[i%variety], pkts[i%variety]); err != nil {
				b.Fatal(err)
			}
		}
		h.m.NextDeadline()
		h.m.Ready()
	}
}

// cycle is the packets of one comeback or restart.
type cycle struct {
	pkts []cyclePacket
}

type cyclePacket struct {
	from     netip.AddrPort
	data     []byte
	ackLeave bool // then answer the leave check the packet starts
}

// cycleOf builds the packets of one comeback of failed member subject (it
// refutes at inc, then sender declares it dead at inc) or one restart of
// live member subject (it leaves at inc and confirms it, then rejoins at
// inc+1; restarts use every other incarnation).
func cycleOf(t *testing.T, phase string, subject, sender int, inc uint64) cycle {
	if phase == "comeback" {
		return cycle{pkts: []cyclePacket{
			{from: mtPeerAddr(subject), data: mtPacket(t, mtAlive(subject, inc))},
			{from: mtPeerAddr(sender), data: mtPacket(t, &wire.Dead{Name: mtPeer(subject), Incarnation: inc, From: mtPeer(sender)})},
		}}
	}
	leave := 2*inc - 2 // 2, 4, 6...: above the joined incarnation 1
	return cycle{pkts: []cyclePacket{
		{from: mtPeerAddr(subject), data: mtPacket(t, &wire.Dead{Name: mtPeer(subject), Incarnation: leave, From: mtPeer(subject), Left: true}), ackLeave: true},
		{from: mtPeerAddr(subject), data: mtPacket(t, mtAlive(subject, leave+1))},
	}}
}

// ackLeaveCheck answers the leave check of peer i the last packet
// started (its sequence number is the last one drawn) with the bare ack of
// a member that did leave.
func (h *mt) ackLeaveCheck(b *testing.B, i int) {
	if fc := h.m.finalChecks[h.m.seq]; fc == nil || !fc.leave || fc.name != mtPeer(i) {
		b.Fatalf("no leave check of %s", mtPeer(i))
	}
	if err := h.m.HandlePacket(h.now, mtPeerAddr(i), mtPacket(h.t, &wire.Ack{Seq: h.m.seq})); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPacketDuringMassLeave is the cost of one packet and
// NextDeadline while 10% of n members (and 30% of the largest n) are
// leaving at once: each announced
// its leave, and the leave checks (a ping to the member, which must
// answer without refuting) are in flight. Each packet is a ping carrying
// one of those leaves, heard again from a live member. failed=0% is the
// same ping with an alive already known.
func BenchmarkPacketDuringMassLeave(b *testing.B) {
	for _, n := range []int{1024, 2048, 4096} {
		for _, share := range append([]int{0}, shares(n)...) {
			b.Run(fmt.Sprintf("n=%d/leaving=%d%%", n, share), func(b *testing.B) {
				t := &testing.T{}
				cfg := DefaultLANConfig()
				cfg.Name = mtSelf
				cfg.BindAddr = "127.0.0.1"
				h := newMT(t, cfg)
				h.joinPeers(n, 1)
				h.run(h.now.Add(2*time.Second), nil)
				var leaving, live []int
				for i := 1; i <= n; i++ {
					if spread(i, share) {
						leaving = append(leaving, i)
						h.feed(mtPeerAddr(i), &wire.Dead{Name: mtPeer(i), Incarnation: 2, From: mtPeer(i), Left: true})
					} else {
						live = append(live, i)
					}
				}
				if len(h.m.finalChecks) != len(leaving) || t.Failed() {
					b.Fatalf("%d leave checks for %d leaving", len(h.m.finalChecks), len(leaving))
				}
				h.m.Ready()
				const variety = 64
				pkts := make([][]byte, variety)
				from := make([]netip.AddrPort, variety)
				for i := range pkts {
					sender := live[(i*7919)%len(live)]
					from[i] = mtPeerAddr(sender)
					var rumor wire.Message = mtAlive(live[(i*31)%len(live)], 1)
					if len(leaving) > 0 {
						rumor = &wire.Dead{Name: mtPeer(leaving[i%len(leaving)]), Incarnation: 2, From: mtPeer(sender), Left: true}
					}
					pkts[i] = mtPacket(t, &wire.Ping{Seq: uint32(i), Target: mtSelf, From: mtPeer(sender)}, rumor)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if err := h.m.HandlePacket(h.now, from[i%variety], pkts[i%variety]); err != nil {
						b.Fatal(err)
					}
					h.m.NextDeadline()
					h.m.Ready()
				}
			})
		}
	}
}
