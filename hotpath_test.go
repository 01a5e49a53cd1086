package swim

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// Tests of the indexes that keep the work of a packet independent of the
// table's size: each checks the index against the structure it indexes
// after every step of cycles that remove, re-add and forget members.

// requireLeaveIndex fails unless claimChecks holds exactly the leave
// checks in finalChecks, one per member.
func (h *mt) requireLeaveIndex() {
	h.t.Helper()
	want := map[string]uint32{}
	for seq, fc := range h.m.finalChecks {
		if fc.leave {
			require.NotContains(h.t, want, fc.name, "two leave checks of one member")
			want[fc.name] = seq
		}
	}
	require.Equal(h.t, want, h.m.claimChecks, "the index of leave checks went stale")
}

// checkPingTo returns the sequence number of the ping out sent to peer i
// carrying a leave claim about it.
func checkPingTo(t *testing.T, out mtOut, i int) uint32 {
	t.Helper()
	for _, p := range out.Packets {
		if p.To != mtPeerAddr(i) {
			continue
		}
		var ping *wire.Ping
		for _, msg := range p.Msgs {
			switch msg := msg.(type) {
			case *wire.Ping:
				ping = msg
			case *wire.Dead:
				if ping != nil && msg.Left && msg.Name == mtPeer(i) {
					return ping.Seq
				}
			}
		}
	}
	t.Fatalf("no leave check of %s", mtPeer(i))
	return 0
}

func TestLeaveCheckIndex(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(6, 1)
	h.m.Ready()
	reportLeft := func(i int, inc uint64) mtOut {
		h.feed(mtPeerAddr(6), &wire.Dead{Name: mtPeer(i), Incarnation: inc, From: mtPeer(6), Left: true})
		out := h.ready()
		h.requireLeaveIndex()
		return out
	}
	seqs := map[int]uint32{}
	for i := 1; i <= 3; i++ {
		seqs[i] = checkPingTo(t, reportLeft(i, 2), i)
	}
	require.Len(t, h.m.claimChecks, 3)

	// The same report again starts no second check; a newer one replaces
	// the check in flight.
	require.Empty(t, reportLeft(1, 2).Packets)
	seqs[1] = checkPingTo(t, reportLeft(1, 3), 1)
	require.Len(t, h.m.claimChecks, 3)

	// p2 answers without refuting: it left, and its check is over.
	h.feed(mtPeerAddr(2), &wire.Ack{Seq: seqs[2]})
	h.requireLeaveIndex()
	require.NotContains(t, h.m.claimChecks, mtPeer(2))
	got, _ := h.m.Member(mtPeer(2))
	require.Equal(t, StateLeft, got.State)

	// It comes back and is reported left again: a new check, under its
	// name again.
	h.feed(mtPeerAddr(2), mtAlive(2, 4))
	h.requireLeaveIndex()
	seqs[2] = checkPingTo(t, reportLeft(2, 5), 2)
	require.Contains(t, h.m.claimChecks, mtPeer(2))

	// p1 refutes its leave (alive above it); the checks of p1 and p2 end
	// on their timers, p3's with a verdict of left. Nothing is left in
	// flight nor in the index.
	h.feed(mtPeerAddr(1), mtAlive(1, 4))
	h.run(h.now.Add(2*h.cfg.ProbeTimeout), map[netip.AddrPort]bool{mtPeerAddr(1): true, mtPeerAddr(2): true, mtPeerAddr(3): true})
	h.requireLeaveIndex()
	require.Empty(t, h.m.claimChecks)
	for i, want := range map[int]State{1: StateAlive, 2: StateLeft, 3: StateLeft} {
		got, _ := h.m.Member(mtPeer(i))
		require.Equal(t, want, got.State, mtPeer(i))
	}

	// And p3 again, after all that: reported left above its leave, it is
	// a member gone already (no check); back alive, reported left, a check.
	h.feed(mtPeerAddr(3), mtAlive(3, 6))
	seqs[3] = checkPingTo(t, reportLeft(3, 7), 3)
	h.feed(mtPeerAddr(3), &wire.Ack{Seq: seqs[3]})
	h.requireLeaveIndex()
	require.Empty(t, h.m.claimChecks)
}

// requireDeadList fails unless d holds exactly model, in order, with its
// index, counts and hole bound consistent.
func requireDeadList(t *testing.T, d *deadList, model []deadEntry) {
	t.Helper()
	var got []deadEntry
	d.each(func(e deadEntry) { got = append(got, e) })
	require.Equal(t, len(model), d.len())
	if len(model) == 0 {
		require.Empty(t, got)
		_, ok := d.oldest()
		require.False(t, ok)
		require.Zero(t, d.failed)
		require.Nil(t, d.slot, "an empty list keeps no index")
		return
	}
	require.Equal(t, model, got)
	failed := 0
	for _, e := range model {
		require.Equal(t, e, d.slots[d.slot[e.id]], "the index of %d went stale", e.id)
		if e.failed {
			failed++
		}
	}
	indexed := 0
	for _, i := range d.slot {
		if i >= 0 {
			indexed++
		}
	}
	require.Equal(t, len(model), indexed, "members indexed")
	require.LessOrEqual(t, len(d.slot), len(d.slots), "the index keeps members that left since the slots were compacted, no more")
	require.Equal(t, failed, d.failed)
	oldest, ok := d.oldest()
	require.True(t, ok)
	require.Equal(t, model[0], oldest)
	holes := d.slotCount() - d.len()
	require.LessOrEqual(t, holes, max(d.len(), compactMin), "holes are not compacted")
	require.LessOrEqual(t, len(d.slots), 4*max(d.len(), compactMin), "reaped slots and holes are not compacted")
	live := 0
	for i := range d.slotCount() {
		if _, ok := d.at(i); ok {
			live++
		}
	}
	require.Equal(t, d.len(), live)
}

// TestDeadListAgainstModel runs random pushes, removals from anywhere,
// reaps of the oldest and comebacks of the oldest against a plain slice.
func TestDeadListAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var d deadList
	var model []deadEntry
	in := map[uint32]bool{}
	now := mtStart
	for step := range 25000 {
		now = now.Add(time.Millisecond)
		// Bursts: a mass failure, then comebacks, then reaps.
		switch phase := step / 1000 % 5; {
		case phase == 4 && len(model) > 0:
			// The oldest comes back and dies again, over and over: it
			// leaves the front and re-enters at the back.
			e := model[0]
			require.True(t, d.remove(e.id))
			e.since = now
			d.push(e.id, e.since, e.failed)
			model = append(model[1:], e)
		case phase == 0 || rng.IntN(4) == 0:
			id := uint32(rng.IntN(3000))
			if in[id] {
				continue
			}
			e := deadEntry{id: id, since: now, failed: rng.IntN(2) == 0}
			d.push(e.id, e.since, e.failed)
			model = append(model, e)
			in[id] = true
		case phase == 1 || phase == 3:
			if len(model) == 0 {
				continue
			}
			i := rng.IntN(len(model))
			require.True(t, d.remove(model[i].id))
			require.False(t, d.remove(model[i].id), "removed twice")
			delete(in, model[i].id)
			model = append(model[:i], model[i+1:]...)
		default:
			if len(model) == 0 {
				continue
			}
			require.Equal(t, model[0], d.popOldest())
			delete(in, model[0].id)
			model = model[1:]
		}
		if step%97 == 0 || len(model) < 3 {
			requireDeadList(t, &d, model)
		}
		// What the Machine does after every change: find the oldest to
		// arm the reap timer.
		d.oldest()
	}
	for len(model) > 0 {
		require.Equal(t, model[0], d.popOldest())
		model = model[1:]
	}
	requireDeadList(t, &d, model)
}

// requireDeadIndex fails unless the Machine's dead list holds exactly the
// members of its table that are not live, each once.
func (h *mt) requireDeadIndex() {
	h.t.Helper()
	want := map[string]State{}
	for _, mem := range h.m.allMembers() {
		if mem.State == StateDead || mem.State == StateLeft {
			want[mem.Name] = mem.State
		}
	}
	got := map[string]State{}
	h.m.dead.each(func(d deadEntry) {
		s := h.m.entry(d.id)
		require.NotNil(h.t, s, "a forgotten member in the dead list")
		require.NotContains(h.t, got, h.m.nameOf(s), "twice in the dead list")
		got[h.m.nameOf(s)] = s.state()
		require.Equal(h.t, s.state() == StateDead, d.failed, "%s's failed flag went stale", h.m.nameOf(s))
	})
	require.Equal(h.t, want, got)
	require.Equal(h.t, len(want), h.m.dead.len())
}

// TestDeadListFollowsTheTable: members die, come back, die again, leave
// and are forgotten, many at once, from anywhere in the list (so that it
// compacts); the dead list follows the table at every step.
func TestDeadListFollowsTheTable(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipToDeadTime = 10 * time.Second
	h := newMT(t, cfg)
	const n = 240
	h.joinPeers(n, 1)
	inc := make([]uint64, n+1)
	for i := range inc {
		inc[i] = 1
	}
	dead := func(i int, left bool) {
		h.feed(mtPeerAddr(i), &wire.Dead{Name: mtPeer(i), Incarnation: inc[i], From: mtPeer(i), Left: left})
		h.confirmLeaves(h.ready())
	}
	back := func(i int) {
		inc[i]++
		h.feedAnswered(mtPeerAddr(i), mtAlive(i, inc[i]))
	}
	for round := range 4 {
		// A mass failure: every other member.
		for i := 2; i <= n; i += 2 {
			dead(i, false)
		}
		h.requireDeadIndex()
		// Three in four come back, from anywhere in the list.
		for i := 2; i <= n; i += 2 {
			if i%8 != 0 {
				back(i)
				h.requireDeadIndex()
			}
		}
		// Some of those die again, others leave; the deaths of those
		// still dead become leaves.
		for i := 2; i <= n; i += 2 {
			switch i % 16 {
			case 2, 4:
				inc[i]++
				dead(i, i%16 == 4)
			case 0:
				inc[i]++
				dead(i, true)
			}
		}
		h.requireDeadIndex()
		// Time passes, the live peers answering the probes: the dead
		// are forgotten; then all come back.
		h.run(h.now.Add(cfg.GossipToDeadTime/2), nil)
		h.requireDeadIndex()
		h.run(h.now.Add(cfg.GossipToDeadTime), nil)
		h.requireDeadIndex()
		require.Zero(t, h.m.dead.len(), "round %d: everyone dead was forgotten", round)
		for i := 2; i <= n; i += 2 {
			if _, ok := h.m.Member(mtPeer(i)); !ok {
				inc[i] += 2
				back(i)
			}
		}
		h.requireDeadIndex()
		require.Equal(t, n+1, h.m.NumMembers(), "round %d: everyone is back", round)
	}
}

// requireProbeQueue fails unless probeQueued holds exactly the members
// with an entry in the rest of the probe order's pass, each entry once.
func (h *mt) requireProbeQueue() {
	h.t.Helper()
	rest := map[uint32]bool{}
	for _, id := range h.m.probeOrder[h.m.probeNext:] {
		require.False(h.t, rest[id], "id %d twice in the rest of the pass", id)
		rest[id] = true
	}
	for w, bits := range h.m.probeQueued {
		for b := range 64 {
			id := uint32(w*64 + b)
			require.Equal(h.t, rest[id], bits&(1<<b) != 0, "the probe queue of id %d went stale", id)
		}
	}
	for id := range rest {
		require.True(h.t, h.m.probeQueued.has(id))
	}
}

// TestProbeOrderQueue: with randomized round-robin probing (SWIM §4.3),
// members are probed, die, come back, are forgotten and replaced by new
// members under their ids; the probe order never holds a member twice in
// the rest of a pass, and every live member is probed within two passes.
func TestProbeOrderQueue(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipToDeadTime = 5 * time.Second
	require.False(t, cfg.AlignedProbing)
	h := newMT(t, cfg)
	const n = 40
	h.joinPeers(n, 1)
	h.requireProbeQueue()
	probed := func(out mtOut) map[netip.AddrPort]bool {
		got := map[netip.AddrPort]bool{}
		ps, pkts := out.pings()
		for i := range ps {
			got[pkts[i].To] = true
		}
		return got
	}
	next := n
	for round := range 3 {
		// Half a pass.
		h.run(h.now.Add(n/2*cfg.ProbeInterval), nil)
		h.requireProbeQueue()
		// A quarter die; half of those come back at once, some of them
		// with their entry still waiting in this pass.
		for i := 1; i <= next; i += 4 {
			if _, ok := h.m.Member(mtPeer(i)); !ok {
				continue
			}
			h.feedConfirmed(mtPeerAddr(i), &wire.Dead{Name: mtPeer(i), Incarnation: uint64(10 + round), From: mtPeer(i)})
			h.requireProbeQueue()
			if i%8 == 1 {
				h.feed(mtPeerAddr(i), mtAlive(i, uint64(11+round)))
				h.requireProbeQueue()
			}
		}
		// The rest are forgotten (their ids freed), and new members join
		// under the freed ids.
		h.run(h.now.Add(2*cfg.GossipToDeadTime), nil)
		h.requireProbeQueue()
		for range n / 8 {
			next++
			h.feed(mtPeerAddr(next), mtAlive(next, 1))
			h.requireProbeQueue()
		}
		// The newcomers are admitted once their addresses answer (the
		// newcomer checks); then two passes: everyone live is probed.
		h.respond(nil)
		others := h.m.NumMembers() - 1
		out := h.run(h.now.Add(time.Duration(2*others+2)*cfg.ProbeInterval), nil)
		h.requireProbeQueue()
		got := probed(out)
		for _, mem := range h.m.allMembers() {
			if mem.Name != mtSelf && mem.State == StateAlive {
				require.True(t, got[mem.Addr], "round %d: %s was not probed in two passes", round, mem.Name)
			}
		}
	}
}

// refAlarm is the partition alarm as it was first written, decrementing
// every sample on each graceful leave: the reference partitionAlarm must
// agree with.
type refAlarm struct {
	samples []liveSample
	raised  bool
	before  int
}

func (pa *refAlarm) note(now time.Time, count int, left bool, share float64, window time.Duration) alarmChange {
	if left {
		for i := range pa.samples {
			pa.samples[i].count = max(pa.samples[i].count-1, 0)
		}
		if pa.raised {
			pa.before = max(pa.before-1, 0)
		}
	}
	cut := 0
	for cut < len(pa.samples) && now.Sub(pa.samples[cut].at) > window {
		cut++
	}
	keep := pa.samples[cut:]
	for len(keep) > 0 && keep[len(keep)-1].count <= count {
		keep = keep[:len(keep)-1]
	}
	pa.samples = append(keep, liveSample{at: now, count: count})
	peak := pa.samples[0].count
	switch {
	case !pa.raised && float64(count) < share*float64(peak):
		pa.raised, pa.before = true, peak
		return alarmRaised
	case pa.raised && float64(count) >= share*float64(pa.before):
		pa.raised = false
		return alarmCleared
	}
	return alarmSame
}

// TestPartitionAlarmAgainstReference: mass failures, joins and graceful
// leaves in bursts, at random moments of the window; the alarm, which
// applies a leave to the samples by an offset, raises and clears exactly
// as the reference that rewrites every sample does.
func TestPartitionAlarmAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const window = 30 * time.Second
	var got partitionAlarm
	var want refAlarm
	now, count := mtStart, 500
	changes := 0
	for step := range 30000 {
		now = now.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
		left := false
		switch phase := step / 500 % 5; {
		case phase == 1 && count > 1: // a mass failure
			count--
		case phase == 2 && count > 1: // a mass leave
			count--
			left = true
		case phase == 3 || count <= 1: // joins and comebacks
			count++
		default: // churn
			switch rng.IntN(3) {
			case 0:
				count++
			case 1:
				count = max(count-1, 1)
			default:
				count, left = max(count-1, 1), true
			}
		}
		g := got.note(now, count, left, 0.5, window)
		w := want.note(now, count, left, 0.5, window)
		require.Equal(t, w, g, "step %d", step)
		require.Equal(t, want.raised, got.raised)
		require.Len(t, got.samples, len(want.samples))
		for i := 0; i < len(want.samples) && step%16 == 0; i++ {
			require.Equal(t, want.samples[i].count, got.countOf(got.samples[i].count), "step %d: sample %d", step, i)
		}
		if want.raised {
			require.Equal(t, want.before, got.countOf(got.before), "step %d", step)
		}
		if g != alarmSame {
			changes++
		}
	}
	require.Greater(t, changes, 10, "the alarm must be raised and cleared for the test to mean anything")
}

// requireReconnectCandidates fails unless the reconnect candidates,
// counted and walked, are the members declared dead in the table and the
// tombstones of those forgotten that did not leave and are not back.
func (h *mt) requireReconnectCandidates() {
	h.t.Helper()
	var want []netip.AddrPort
	h.m.dead.each(func(d deadEntry) {
		if s := h.m.entry(d.id); s.state() == StateDead {
			want = append(want, h.m.addrOf(s))
		}
	})
	for _, t := range h.m.tombs {
		if h.m.tombByName[t.name] == t && !t.left {
			_, inTable := h.m.Member(t.name)
			require.False(h.t, inTable, "a current tombstone of %s, in the table", t.name)
			want = append(want, t.addr)
		}
	}
	require.Equal(h.t, len(want), h.m.dead.failed+h.m.deadTombs, "the reconnect candidates' count went stale")
	var got []netip.AddrPort
	for i := range len(want) + 1 {
		addr, _, ok := h.m.reconnectCandidate(i)
		if i == len(want) {
			require.False(h.t, ok, "a candidate past the count")
			break
		}
		require.True(h.t, ok)
		got = append(got, addr)
	}
	require.Equal(h.t, want, got)
}

// TestReconnectCandidates: members fail, leave, are forgotten into
// tombstones, come back under their names and fail again; the reconnect
// candidates follow at every step.
func TestReconnectCandidates(t *testing.T) {
	cfg := mtConfig()
	cfg.GossipToDeadTime = 5 * time.Second
	cfg.ReconnectTimeout = time.Hour
	h := newMT(t, cfg)
	const n = 60
	h.joinPeers(n, 1)
	inc := uint64(1)
	for round := range 3 {
		inc += 3
		for i := 1; i <= n; i += 2 {
			h.feed(mtPeerAddr(i), &wire.Dead{Name: mtPeer(i), Incarnation: inc, From: mtPeer(i), Left: i%6 == 1})
			h.confirmLeaves(h.ready())
		}
		h.requireReconnectCandidates()
		h.run(h.now.Add(2*cfg.GossipToDeadTime), nil)
		h.requireReconnectCandidates()
		require.NotZero(t, h.m.deadTombs, "round %d", round)
		// Half come back (their tombstones superseded); a few of those
		// fail again at once.
		for i := 1; i <= n; i += 4 {
			h.feedAnswered(mtPeerAddr(i), mtAlive(i, inc+1))
			h.requireReconnectCandidates()
			if i%12 == 1 {
				h.feedConfirmed(mtPeerAddr(i), &wire.Dead{Name: mtPeer(i), Incarnation: inc + 1, From: mtPeer(i)})
				h.requireReconnectCandidates()
			}
		}
		// The rest come back too, for the next round.
		h.run(h.now.Add(2*cfg.GossipToDeadTime), nil)
		for i := 1; i <= n; i += 2 {
			h.feedAnswered(mtPeerAddr(i), mtAlive(i, inc+2))
		}
		h.requireReconnectCandidates()
		require.Equal(t, n+1, h.m.NumMembers(), "round %d", round)
	}
}
