package swim

// Status is what a driver reads of the Machine between inputs, besides
// Ready's outputs: the few facts that change what it does next (whether to
// rest between merge slices, whether a Leave or a Join may return, whether
// the application may broadcast) and the counters it reports as they move.
// One call returns them all, so that the Machine's API stays its inputs,
// its outputs and its view.
type Status struct {
	// Version increases whenever the member table changes, so a driver
	// can refresh a copy of the view only then.
	Version uint64
	// HealthScore is this member's local health (Lifeguard §IV-A): 0 is
	// healthy, higher means it has been failing to hear from peers it
	// should hear from, up to AwarenessMaxMultiplier-1.
	HealthScore int
	// Merging: a large push-pull is being merged a slice per Tick
	// (pushpull.go); each slice is due at once, and a driver under a
	// steady stream of packets may rest between them, as Memberlist does.
	Merging bool
	// LeaveDone: the leave is done. Its gossip has left the queue (sent
	// as often as any delta is, or dropped from a full queue) or there is
	// nobody left to tell, and every member this one knew has
	// acknowledged its leave notice, was sent it five times, or has died
	// or left since.
	LeaveDone bool
	// BroadcastBackedUp: Broadcast would return ErrBroadcastQueueFull
	// now; a driver waiting for room reads it after each input.
	BroadcastBackedUp bool
	// LifeChecksPending: this member is still finding out whether another
	// life of its name is alive; Join waits for the answer.
	LifeChecksPending bool
	// NameYielded: this member gave its name up to another live process
	// (see Config.Admission.NameConflict); Join then returns ErrNameConflict.
	NameYielded bool
	// Partitioned: the partition alarm is raised (Config.Partition.Share).
	Partitioned bool
	// MembersRefused and PushPullsRefused are Stats' counters of the same
	// names, without copying the rest, for a driver that reports
	// refusals as they happen: new members the table refused (it held
	// MaxMembers, or a shared Registry its most versions), and push-pulls
	// refused (over MaxMembers, or too many merges in progress).
	MembersRefused, PushPullsRefused uint64
}

// Status returns what a driver reads between inputs (see Status).
func (m *Machine) Status() Status {
	return Status{
		Version:           m.version,
		HealthScore:       m.health,
		Merging:           len(m.merges) > 0,
		LeaveDone:         m.leaveDone(),
		BroadcastBackedUp: m.treeBackedUp(),
		LifeChecksPending: len(m.lives.own) > 0,
		NameYielded:       m.lives.yielded,
		Partitioned:       m.partition.raised,
		MembersRefused:    m.stats.MembersRefused,
		PushPullsRefused:  m.stats.PushPullsRefused,
	}
}
