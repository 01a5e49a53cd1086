package main

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// fakeConfig is a Raft configuration in memory: each change applies at
// once, as a committed one would. fail, when set, refuses the change it
// returns an error for.
type fakeConfig struct {
	servers []Server
	changes []string // "add-voter n2", "remove n3", in order
	fail    func(change string) error
}

func newFakeConfig(voters ...string) *fakeConfig {
	f := &fakeConfig{}
	for _, v := range voters {
		f.servers = append(f.servers, Server{ID: v, Address: raftAddr(v), Voter: true})
	}
	return f
}

func (f *fakeConfig) Servers() ([]Server, error) { return slices.Clone(f.servers), nil }

func (f *fakeConfig) change(c string, apply func()) error {
	if f.fail != nil {
		if err := f.fail(c); err != nil {
			return err
		}
	}
	f.changes = append(f.changes, c)
	apply()
	return nil
}

func (f *fakeConfig) add(id, addr string, voter bool) {
	for i, s := range f.servers {
		if s.ID == id {
			f.servers[i].Address = addr
			f.servers[i].Voter = f.servers[i].Voter || voter
			return
		}
	}
	f.servers = append(f.servers, Server{ID: id, Address: addr, Voter: voter})
}

func (f *fakeConfig) AddVoter(id, addr string) error {
	return f.change("add-voter "+id, func() { f.add(id, addr, true) })
}

func (f *fakeConfig) AddNonvoter(id, addr string) error {
	return f.change("add-nonvoter "+id, func() { f.add(id, addr, false) })
}

func (f *fakeConfig) RemoveServer(id string) error {
	return f.change("remove "+id, func() {
		f.servers = slices.DeleteFunc(f.servers, func(s Server) bool { return s.ID == id })
	})
}

// ids lists the configuration's servers, sorted, voters as "n1" and
// non-voters as "n1(nonvoter)".
func (f *fakeConfig) ids() []string {
	var out []string
	for _, s := range f.servers {
		if s.Voter {
			out = append(out, s.ID)
		} else {
			out = append(out, s.ID+"(nonvoter)")
		}
	}
	sort.Strings(out)
	return out
}

func (f *fakeConfig) address(id string) string {
	for _, s := range f.servers {
		if s.ID == id {
			return s.Address
		}
	}
	return ""
}

// fakeClock is the time the test says it is.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock               { return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }
func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }
func raftAddr(name string) string            { return "10.0.0." + name[1:] + ":8300" }
func metaFor(t *testing.T, name string, voter bool) []byte {
	t.Helper()
	b, err := Meta{Raft: raftAddr(name), HTTP: "10.0.0." + name[1:] + ":8000", Voter: voter}.Encode()
	require.NoError(t, err)
	return b
}

func member(t *testing.T, name string, state swim.State) swim.Member {
	return swim.Member{Name: name, State: state, Meta: metaFor(t, name, true)}
}

// stream hands out events numbered as a Memberlist numbers them.
type stream struct {
	t   *testing.T
	seq uint64
}

func (s *stream) next(kind swim.EventKind, m swim.Member) swim.Event {
	s.seq++
	return swim.Event{Kind: kind, Member: m, Seq: s.seq}
}

func (s *stream) join(name string) swim.Event {
	return s.next(swim.EventJoin, member(s.t, name, swim.StateAlive))
}
func (s *stream) dead(name string) swim.Event {
	return s.next(swim.EventLeave, member(s.t, name, swim.StateDead))
}
func (s *stream) left(name string) swim.Event {
	return s.next(swim.EventLeave, member(s.t, name, swim.StateLeft))
}
func (s *stream) suspect(name string) swim.Event {
	return s.next(swim.EventSuspect, member(s.t, name, swim.StateSuspect))
}

const grace = 10 * time.Second

// start makes n1's reconciler over cfg, synced with alive as the snapshot
// (n1 and the names given, all alive), at seq 0.
func start(t *testing.T, cfg *fakeConfig, clock *fakeClock, alive ...string) *Reconciler {
	t.Helper()
	r := NewReconciler("n1", grace, cfg, nil)
	members := []swim.Member{member(t, "n1", swim.StateAlive)}
	for _, n := range alive {
		members = append(members, member(t, n, swim.StateAlive))
	}
	r.Resync(members, 0, clock.Now())
	return r
}

func observe(t *testing.T, r *Reconciler, clock *fakeClock, events ...swim.Event) {
	t.Helper()
	for _, e := range events {
		require.True(t, r.Observe(e, clock.Now()), "event %d (%s %s) refused", e.Seq, e.Kind, e.Member.Name)
	}
}

func reconcile(t *testing.T, r *Reconciler, clock *fakeClock) Plan {
	t.Helper()
	plan, err := r.Reconcile(clock.Now())
	require.NoError(t, err)
	return plan
}

func TestReconcilerAddsJoiningMembers(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1")
	r := start(t, cfg, clock)
	s := &stream{t: t}

	nonvoter := swim.Member{Name: "n3", State: swim.StateAlive, Meta: metaFor(t, "n3", false)}
	foreign := swim.Member{Name: "n4", State: swim.StateAlive, Meta: []byte("not ours")}
	observe(t, r, clock, s.join("n2"), s.next(swim.EventJoin, nonvoter), s.next(swim.EventJoin, foreign))
	plan := reconcile(t, r, clock)

	assert.Equal(t, []string{"n1", "n2", "n3(nonvoter)"}, cfg.ids(), "n4's metadata names no Raft address")
	assert.Equal(t, raftAddr("n2"), cfg.address("n2"))
	assert.Equal(t, []string{"add-voter n2", "add-nonvoter n3"}, cfg.changes)
	assert.True(t, plan.Next.IsZero(), "nothing pending")

	// Reconciling again changes nothing: the configuration matches.
	reconcile(t, r, clock)
	assert.Len(t, cfg.changes, 2)
}

func TestReconcilerRemovesLeftMemberAtOnce(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1", "n2", "n3")
	r := start(t, cfg, clock, "n2", "n3")
	s := &stream{t: t}

	observe(t, r, clock, s.left("n3"))
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n2"}, cfg.ids())
	assert.Equal(t, []string{"remove n3"}, cfg.changes)
}

func TestReconcilerRemovesDeadMemberAfterGrace(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1", "n2", "n3")
	r := start(t, cfg, clock, "n2", "n3")
	s := &stream{t: t}

	// Suspicion alone changes nothing.
	observe(t, r, clock, s.suspect("n3"))
	assert.Empty(t, reconcile(t, r, clock).Actions)

	clock.Advance(time.Second)
	died := clock.Now()
	observe(t, r, clock, s.dead("n3"))
	plan := reconcile(t, r, clock)
	assert.Empty(t, plan.Actions)
	assert.Equal(t, died.Add(grace), plan.Next, "the driver is told when the grace ends")

	clock.Advance(grace - time.Millisecond)
	assert.Empty(t, reconcile(t, r, clock).Actions, "still within the grace")
	assert.Equal(t, []string{"n1", "n2", "n3"}, cfg.ids())

	clock.Advance(time.Millisecond)
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n2"}, cfg.ids())
	assert.Equal(t, []string{"remove n3"}, cfg.changes)
}

func TestReconcilerKeepsMemberBackWithinGrace(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1", "n2", "n3")
	r := start(t, cfg, clock, "n2", "n3")
	s := &stream{t: t}

	observe(t, r, clock, s.dead("n3"))
	reconcile(t, r, clock)
	clock.Advance(grace / 2)
	// Restarted on another Raft port: back alive, with new metadata.
	back := swim.Member{Name: "n3", State: swim.StateAlive}
	back.Meta, _ = Meta{Raft: "10.0.0.3:9999", Voter: true}.Encode()
	observe(t, r, clock, s.next(swim.EventJoin, back))
	plan := reconcile(t, r, clock)
	assert.True(t, plan.Next.IsZero(), "no removal pending any more")

	clock.Advance(grace)
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n2", "n3"}, cfg.ids(), "it kept its vote")
	assert.Equal(t, []string{"add-voter n3"}, cfg.changes, "only its address was updated")
	assert.Equal(t, "10.0.0.3:9999", cfg.address("n3"))
}

func TestReconcilerReaddsMemberThatComesBack(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1", "n2", "n3")
	r := start(t, cfg, clock, "n2", "n3")
	s := &stream{t: t}

	observe(t, r, clock, s.dead("n3"))
	clock.Advance(grace)
	reconcile(t, r, clock)
	require.Equal(t, []string{"n1", "n2"}, cfg.ids())

	clock.Advance(time.Minute)
	observe(t, r, clock, s.join("n3"))
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n2", "n3"}, cfg.ids())
	assert.Equal(t, []string{"remove n3", "add-voter n3"}, cfg.changes)
}

func TestReconcilerResyncsOnGap(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1", "n2", "n3", "n4", "n6", "n7")
	r := start(t, cfg, clock, "n2", "n3", "n4", "n6", "n7")
	s := &stream{t: t}

	died := clock.Now()
	observe(t, r, clock, s.dead("n4")) // 1
	reconcile(t, r, clock)

	// Events 2 and 3 are lost: n2 leaves, n5 joins.
	s.left("n2")
	s.join("n5")
	clock.Advance(3 * time.Second)
	gapped := s.dead("n3") // 4
	assert.False(t, r.Observe(gapped, clock.Now()), "a gap in Seq asks for a resync")
	assert.Equal(t, uint64(1), r.Seq(), "the event after the gap is not applied")

	// The driver takes a snapshot; it reflects events up to 4.
	snap := []swim.Member{
		member(t, "n1", swim.StateAlive),
		member(t, "n2", swim.StateLeft),
		member(t, "n3", swim.StateDead),
		member(t, "n4", swim.StateDead),
		member(t, "n5", swim.StateAlive),
		member(t, "n6", swim.StateAlive),
		member(t, "n7", swim.StateAlive),
	}
	r.Resync(snap, s.seq, clock.Now())
	// Event 4 still queued behind the snapshot: already reflected, skipped.
	assert.True(t, r.Observe(gapped, clock.Now()))
	assert.Equal(t, uint64(4), r.Seq())

	plan := reconcile(t, r, clock)
	assert.Equal(t, []string{"remove n2", "add-voter n5"}, cfg.changes,
		"the left member goes at once, the joined one is added, the dead wait")
	assert.Equal(t, died.Add(grace), plan.Next, "the resync did not restart n4's grace")

	clock.Advance(grace - 3*time.Second)
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n3", "n5", "n6", "n7"}, cfg.ids(), "n4 removed when its grace ended, n3 not yet")
	clock.Advance(3 * time.Second)
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n5", "n6", "n7"}, cfg.ids())

	// The stream goes on after the snapshot.
	observe(t, r, clock, s.join("n8"))
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n5", "n6", "n7", "n8"}, cfg.ids())
}

func TestReconcilerNeedsSnapshotFirst(t *testing.T) {
	clock := newFakeClock()
	r := NewReconciler("n1", grace, newFakeConfig("n1"), nil)
	s := &stream{t: t}
	assert.False(t, r.Observe(s.join("n2"), clock.Now()))
}

// A new leader reconciles the whole configuration: the servers swim does
// not know count as dead from the moment it takes over, the members Raft
// lacks are added, and the old leader, dead, goes after the grace.
func TestReconcilerNewLeaderReconcilesWholeConfiguration(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n0", "n1", "n2", "n3", "n9")
	// n1 takes over from n0; swim holds n0 dead, has never heard of n9,
	// and knows n4, which n0 never added.
	r := NewReconciler("n1", grace, cfg, nil)
	r.Resync([]swim.Member{
		member(t, "n0", swim.StateDead),
		member(t, "n1", swim.StateAlive),
		member(t, "n2", swim.StateAlive),
		member(t, "n3", swim.StateAlive),
		member(t, "n4", swim.StateAlive),
	}, 42, clock.Now())
	takeover := clock.Now()

	plan := reconcile(t, r, clock)
	assert.Equal(t, []string{"add-voter n4"}, cfg.changes)
	assert.Equal(t, takeover.Add(grace), plan.Next)

	clock.Advance(grace)
	plan = reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n2", "n3", "n4"}, cfg.ids())
	assert.Equal(t, []string{"add-voter n4", "remove n0", "remove n9"}, cfg.changes)
	assert.Empty(t, plan.Held)

	// The event stream goes on from the snapshot's Seq.
	assert.False(t, r.Observe(swim.Event{Kind: swim.EventJoin, Member: member(t, "n5", swim.StateAlive), Seq: 44}, clock.Now()))
	assert.True(t, r.Observe(swim.Event{Kind: swim.EventJoin, Member: member(t, "n5", swim.StateAlive), Seq: 43}, clock.Now()))
}

func TestReconcilerQuorumRule(t *testing.T) {
	cases := []struct {
		voters, dead int
		removed      int
	}{
		{voters: 5, dead: 1, removed: 1},
		{voters: 5, dead: 2, removed: 2}, // 3 alive: a quorum of 4, then of 3
		{voters: 5, dead: 3, removed: 0}, // 2 alive: not a quorum of 4
		{voters: 3, dead: 1, removed: 1}, // 2 alive: a quorum of 2
		{voters: 3, dead: 2, removed: 0},
		{voters: 4, dead: 2, removed: 2}, // 2 alive: a quorum of 3 (Raft commits under the new configuration)
		{voters: 7, dead: 3, removed: 3},
		{voters: 7, dead: 4, removed: 0},
		{voters: 2, dead: 1, removed: 1}, // the leader alone is a quorum of 1
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d voters %d dead", c.voters, c.dead), func(t *testing.T) {
			clock := newFakeClock()
			var names, alive []string
			for i := 1; i <= c.voters; i++ {
				names = append(names, fmt.Sprintf("n%d", i))
			}
			cfg := newFakeConfig(names...)
			alive = names[1 : c.voters-c.dead]
			r := start(t, cfg, clock, names[1:]...)
			s := &stream{t: t}
			for _, n := range names[c.voters-c.dead:] {
				observe(t, r, clock, s.dead(n))
			}
			clock.Advance(grace)
			plan := reconcile(t, r, clock)
			assert.Len(t, cfg.changes, c.removed, "changes %v", cfg.changes)
			assert.Len(t, plan.Held, c.dead-c.removed)
			assert.Len(t, cfg.ids(), c.voters-c.removed)
			// Whatever was removed, the live voters are a quorum of
			// what is left, or nothing was removed.
			if c.removed > 0 {
				assert.GreaterOrEqual(t, 1+len(alive), quorum(len(cfg.servers)))
			}
		})
	}
}

// Five voters, three declared dead at once: removing any of them would
// leave two live voters of four, no quorum, so none is removed; when one
// comes back, the live voters are three and the other two go.
func TestReconcilerQuorumProtection(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1", "n2", "n3", "n4", "n5")
	r := start(t, cfg, clock, "n2", "n3", "n4", "n5")
	s := &stream{t: t}

	observe(t, r, clock, s.dead("n3"), s.dead("n4"), s.dead("n5"))
	clock.Advance(grace)
	plan := reconcile(t, r, clock)
	assert.Empty(t, cfg.changes)
	assert.Equal(t, []string{"n3", "n4", "n5"}, plan.Held)

	// A suspect does not count as alive.
	observe(t, r, clock, s.suspect("n2"))
	assert.Empty(t, reconcile(t, r, clock).Actions)

	observe(t, r, clock, s.next(swim.EventAlive, member(t, "n2", swim.StateAlive)), s.join("n5"))
	plan = reconcile(t, r, clock)
	assert.Empty(t, plan.Held)
	assert.Equal(t, []string{"remove n3", "remove n4"}, cfg.changes)
	assert.Equal(t, []string{"n1", "n2", "n5"}, cfg.ids())
}

func TestReconcilerNeverRemovesItself(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1", "n2")
	r := NewReconciler("n1", grace, cfg, nil)
	// A snapshot without the leader, and an event claiming it left.
	r.Resync([]swim.Member{member(t, "n2", swim.StateAlive)}, 0, clock.Now())
	s := &stream{t: t}
	observe(t, r, clock, s.left("n1"))
	clock.Advance(grace)
	reconcile(t, r, clock)
	assert.Empty(t, cfg.changes)
	assert.Equal(t, []string{"n1", "n2"}, cfg.ids())
}

func TestReconcilerStopsAtRefusedChange(t *testing.T) {
	clock, cfg := newFakeClock(), newFakeConfig("n1")
	r := start(t, cfg, clock, "n2", "n3")
	refuse := errors.New("leadership lost")
	cfg.fail = func(c string) error {
		if c == "add-voter n2" {
			return refuse
		}
		return nil
	}
	_, err := r.Reconcile(clock.Now())
	require.ErrorIs(t, err, refuse)
	assert.Empty(t, cfg.changes, "n3 waits for the next pass")

	cfg.fail = nil
	reconcile(t, r, clock)
	assert.Equal(t, []string{"n1", "n2", "n3"}, cfg.ids())
}
