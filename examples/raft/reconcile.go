package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim"
)

// DefaultDeadGrace is how long a voter that swim declared dead (or that
// swim does not know) keeps its place in the Raft configuration before the
// reconciler removes it. A dead verdict is one member's conclusion that it
// cannot reach another, which a partition, a long pause or a restart also
// produce: a node restarted within the grace, or reachable again, keeps its
// vote and needs no new configuration change. 10 s covers a process
// restart and a few suspicion timeouts of swim's LAN profile.
const DefaultDeadGrace = 10 * time.Second

// Server is one server of the Raft configuration as the reconciler sees it.
type Server struct {
	ID      string
	Address string
	Voter   bool
}

// Configuration is what the reconciler needs of Raft: the leader's latest
// configuration and the changes it can ask for. raftConfiguration
// implements it over *raft.Raft; the unit tests fake it. Every change
// returns once Raft committed it or refused it.
type Configuration interface {
	Servers() ([]Server, error)
	AddVoter(id, addr string) error
	AddNonvoter(id, addr string) error
	RemoveServer(id string) error
}

// ActionKind is a change the reconciler asks Raft for.
type ActionKind uint8

// The changes.
const (
	ActionAddVoter ActionKind = iota + 1
	ActionAddNonvoter
	ActionRemove
)

func (k ActionKind) String() string {
	switch k {
	case ActionAddVoter:
		return "add-voter"
	case ActionAddNonvoter:
		return "add-nonvoter"
	case ActionRemove:
		return "remove"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is one change of the Raft configuration, with why.
type Action struct {
	Kind    ActionKind
	ID      string
	Address string // for the adds
	Reason  string // "joined", "address changed", "left", "dead", "missing"
}

// Plan is what one reconciliation decided.
type Plan struct {
	// Actions, in the order they are made: removals first (they only lower
	// what a quorum needs), then additions.
	Actions []Action
	// Held are the voters due for removal that stay because removing them
	// would break the quorum rule (see Reconciler).
	Held []string
	// Next is when a grace period ends and the reconciler must run again;
	// zero when no removal is pending.
	Next time.Time
}

// peer is the reconciler's view of one member.
type peer struct {
	state   swim.State
	meta    Meta
	metaErr error // the member's metadata is not ours: it is never added
	// downSince is when the member was first seen dead, or found in the
	// Raft configuration with swim knowing nothing of it (missing); zero
	// otherwise. The grace runs from it.
	downSince time.Time
	missing   bool
}

// Reconciler keeps the Raft configuration in line with swim's member list.
// It runs on the Raft leader only: a new one is made each time this node
// gains leadership and dropped when it loses it. It does no I/O and reads
// no clock: the driver hands it swim's snapshot and events with the time,
// calls Reconcile, and runs it again at Plan.Next. The rules:
//
//   - A member alive in swim whose metadata names a Raft address is added
//     (AddVoter, or AddNonvoter when its metadata says it wants no vote),
//     and updated the same way when its address changes. A member that
//     was removed and comes back is added again.
//   - A member that left gracefully (swim.StateLeft) is removed at once:
//     it said it is going, nothing will bring its vote back.
//   - A member declared dead (swim.StateDead), or a server of the
//     configuration that swim does not know, is removed only once it has
//     stayed so for the grace period, measured from when this reconciler
//     first saw it so; coming back alive (EventJoin) within the grace
//     cancels the removal.
//   - The quorum rule: a voter is removed only if the voters swim holds
//     alive (this leader included, suspects not) are a majority of the
//     voters that remain after the removal: alive >= (V-1)/2 + 1 in
//     integer division, V the voters before it. Removals are planned one
//     at a time against the configuration the previous ones leave. A
//     removal that would fail it is held (Plan.Held) until enough voters
//     are alive again. Removing a voter that swim does not hold alive can
//     only raise the share of live voters, so the rule holds back exactly
//     the removals that Raft could not commit (it commits a change under
//     the new configuration) and those made while a majority of voters
//     looks failed: when that many verdicts at once are more likely a
//     partition on this side than real failures, the reconciler waits
//     instead of shrinking the cluster to the leader's side.
//   - Non-voters are removed under the same left and dead rules, without
//     the quorum rule (they have no vote).
//   - The leader itself is never removed.
//
// swim never decides quorum: the reconciler only asks Raft for changes,
// and Raft commits them, or not, with its own majority.
type Reconciler struct {
	self  string
	grace time.Duration
	cfg   Configuration
	log   *zap.Logger

	synced bool
	seq    uint64 // the Seq of the last event reflected in view
	view   map[string]*peer
}

// NewReconciler returns a reconciler for the leader named self (its Raft
// ID and swim name). grace 0 means DefaultDeadGrace; a nil logger logs
// nothing. Call Resync before anything else.
func NewReconciler(self string, grace time.Duration, cfg Configuration, log *zap.Logger) *Reconciler {
	if grace <= 0 {
		grace = DefaultDeadGrace
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Reconciler{self: self, grace: grace, cfg: cfg, log: log, view: make(map[string]*peer)}
}

// Seq is the Seq of the last swim event the reconciler's view reflects.
func (r *Reconciler) Seq() uint64 { return r.seq }

// Resync replaces the view with a swim snapshot (Memberlist.Snapshot):
// its members and the Seq of the last event it reflects. Members already
// seen dead or missing keep the time they were first seen so, so a resync
// never restarts a grace period.
func (r *Reconciler) Resync(members []swim.Member, seq uint64, now time.Time) {
	old := r.view
	r.view = make(map[string]*peer, len(members))
	for _, m := range members {
		r.view[m.Name] = newPeer(m, old[m.Name], now)
	}
	for name, p := range old {
		if _, ok := r.view[name]; !ok && !p.downSince.IsZero() {
			// Forgotten by swim but still counted down: a missing
			// server of the configuration, as far as the plan goes.
			r.view[name] = p
		}
	}
	r.seq, r.synced = seq, true
}

// Observe applies one swim event. It reports false when the event shows
// that events were lost (its Seq is past the next one expected) or when
// no snapshot was applied yet: the caller then takes a new snapshot and
// calls Resync. Events already reflected in the view (Seq not above the
// snapshot's) are skipped.
func (r *Reconciler) Observe(e swim.Event, now time.Time) bool {
	if !r.synced {
		return false
	}
	if e.Seq <= r.seq {
		return true
	}
	if e.Seq != r.seq+1 {
		r.log.Info("swim events lost, resyncing from a snapshot",
			zap.Uint64("expected", r.seq+1), zap.Uint64("got", e.Seq))
		return false
	}
	r.seq = e.Seq
	switch e.Kind {
	case swim.EventJoin, swim.EventLeave, swim.EventSuspect, swim.EventAlive, swim.EventUpdate:
		if e.Member.Name != r.self {
			r.view[e.Member.Name] = newPeer(e.Member, r.view[e.Member.Name], now)
		}
	}
	return true
}

// newPeer makes the view of m, carrying over from old when m was already
// counted down.
func newPeer(m swim.Member, old *peer, now time.Time) *peer {
	p := &peer{state: m.State}
	p.meta, p.metaErr = DecodeMeta(m.Meta)
	if m.State == swim.StateDead {
		p.downSince = now
		if old != nil && !old.downSince.IsZero() {
			p.downSince = old.downSince
		}
	}
	return p
}

// leftFirst orders removals: 0 for a leave, 1 for the rest.
func leftFirst(reason string) int {
	if reason == "left" {
		return 0
	}
	return 1
}

// quorum is the majority of n voters.
func quorum(n int) int { return n/2 + 1 }

// Plan decides the changes that bring the configuration servers in line
// with the view at now. It changes nothing in Raft; it does note the
// servers swim does not know (missing, from now on) and forgets the
// members that are neither live nor in the configuration.
func (r *Reconciler) Plan(servers []Server, now time.Time) Plan {
	var plan Plan
	inConfig := make(map[string]Server, len(servers))
	voters, alive := 0, 0
	for _, s := range servers {
		inConfig[s.ID] = s
		if !s.Voter {
			continue
		}
		voters++
		if s.ID == r.self {
			alive++
		} else if p := r.view[s.ID]; p != nil && p.state == swim.StateAlive {
			alive++
		}
	}

	type removal struct {
		server Server
		reason string
		since  time.Time
	}
	var removals []removal
	for _, s := range servers {
		if s.ID == r.self {
			continue
		}
		p := r.view[s.ID]
		if p == nil {
			p = &peer{state: swim.StateDead, missing: true, downSince: now}
			r.view[s.ID] = p
		}
		switch {
		case p.state == swim.StateLeft:
			removals = append(removals, removal{server: s, reason: "left"})
		case p.state == swim.StateDead:
			due := p.downSince.Add(r.grace)
			if now.Before(due) {
				if plan.Next.IsZero() || due.Before(plan.Next) {
					plan.Next = due
				}
				continue
			}
			reason := "dead"
			if p.missing {
				reason = "missing"
			}
			removals = append(removals, removal{server: s, reason: reason, since: p.downSince})
		}
	}
	// Left ones first (their removal is owed at once), then the longest
	// dead; by name among equals, so that plans are reproducible.
	slices.SortFunc(removals, func(a, b removal) int {
		if c := cmp.Compare(leftFirst(a.reason), leftFirst(b.reason)); c != 0 {
			return c
		}
		if c := a.since.Compare(b.since); c != 0 {
			return c
		}
		return cmp.Compare(a.server.ID, b.server.ID)
	})
	for _, rm := range removals {
		if rm.server.Voter {
			if alive < quorum(voters-1) {
				plan.Held = append(plan.Held, rm.server.ID)
				continue
			}
			voters--
		}
		plan.Actions = append(plan.Actions, Action{Kind: ActionRemove, ID: rm.server.ID, Reason: rm.reason})
	}

	var adds []Action
	for name, p := range r.view {
		if name == r.self || p.state != swim.StateAlive {
			continue
		}
		if p.metaErr != nil {
			continue
		}
		kind := ActionAddNonvoter
		if p.meta.Voter {
			kind = ActionAddVoter
		}
		s, ok := inConfig[name]
		switch {
		case !ok:
			adds = append(adds, Action{Kind: kind, ID: name, Address: p.meta.Raft, Reason: "joined"})
		case s.Address != p.meta.Raft:
			adds = append(adds, Action{Kind: kind, ID: name, Address: p.meta.Raft, Reason: "address changed"})
		case p.meta.Voter && !s.Voter:
			adds = append(adds, Action{Kind: kind, ID: name, Address: p.meta.Raft, Reason: "wants a vote"})
		}
	}
	slices.SortFunc(adds, func(a, b Action) int { return cmp.Compare(a.ID, b.ID) })
	plan.Actions = append(plan.Actions, adds...)

	// Forget what can no longer matter: members neither live nor in the
	// configuration (swim reports them again if they come back).
	for name, p := range r.view {
		if _, ok := inConfig[name]; !ok && (p.state == swim.StateDead || p.state == swim.StateLeft) {
			delete(r.view, name)
		}
	}
	return plan
}

// Reconcile reads the configuration, plans, and makes the plan's changes
// in order. It stops at the first change Raft refuses and returns the plan
// with that error; the driver retries later, with a fresh configuration.
func (r *Reconciler) Reconcile(now time.Time) (Plan, error) {
	servers, err := r.cfg.Servers()
	if err != nil {
		return Plan{}, fmt.Errorf("read the raft configuration: %w", err)
	}
	plan := r.Plan(servers, now)
	if len(plan.Held) > 0 {
		r.log.Warn("not removing failed voters: the voters alive would not be a quorum without them",
			zap.Strings("held", plan.Held))
	}
	for _, a := range plan.Actions {
		switch a.Kind {
		case ActionAddVoter:
			err = r.cfg.AddVoter(a.ID, a.Address)
		case ActionAddNonvoter:
			err = r.cfg.AddNonvoter(a.ID, a.Address)
		case ActionRemove:
			err = r.cfg.RemoveServer(a.ID)
		}
		if err != nil {
			return plan, fmt.Errorf("%s %s (%s): %w", a.Kind, a.ID, a.Reason, err)
		}
		r.log.Info("raft configuration changed", zap.Stringer("change", a.Kind),
			zap.String("server", a.ID), zap.String("address", a.Address), zap.String("reason", a.Reason))
	}
	return plan, nil
}
