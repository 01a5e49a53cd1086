// Package migrate moves a running hashicorp/memberlist cluster onto swim
// one process at a time, without downtime.
//
// A process in migration mode (a Bridge) is a member of both clusters at
// once: of the old memberlist cluster, with the port, key, label and
// gossip settings it had, run by hashicorp/memberlist itself, and of the
// new swim cluster, on a port of its own. The application sees one view
// (Members, Events): each peer once, alive while either side holds it
// alive, with its metadata. What it sends through the Bridge reaches
// processes on either side: a broadcast goes out on both (keyed on both:
// a newer broadcast with the same key replaces the older one in every
// queue), a direct message on the side that holds its peer alive, and the
// state exchange of both sides calls the application's one StateDelegate,
// so that a replicated map converges across the two.
//
// Bridged processes find each other through the old cluster: a peer's
// swim port is its memberlist port plus Config.SwimPortOffset, and the
// Bridge joins it on swim when memberlist reports it.
//
// The procedure (docs/migrating.md): replace the processes one at a time
// by bridged ones; once MemberlistOnly is empty on every process (no
// process runs memberlist alone), leave the mode one process at a time
// (LeaveMemberlist). A process that left keeps its memberlist port in
// standby: a process rolled back to memberlist alone that joins through
// it wakes it, and the woken process calls the others back into
// migration mode over swim (Phase); they return to standby by themselves
// once no process has run memberlist alone for Config.StandbyGrace. A
// process restarted after it left the mode starts in standby
// (Config.StartInStandby). A restart as a plain swim member ends the
// migration for good.
//
// This package is a module of its own, so that swim itself does not
// depend on hashicorp/memberlist.
package migrate
