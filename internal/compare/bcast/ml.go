package main

import (
	"context"
	"io"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim/internal/compare/harness"
)

// mlLib runs hashicorp/memberlist members at memberlist.DefaultLANConfig,
// each over a counting wrapper of memberlist's NetTransport, with the
// broadcast layer applications build on memberlist (Serf, dskit): a
// Delegate whose TransmitLimitedQueue piggybacks broadcasts on memberlist's
// gossip and probes, each sent RetransmitMult·log N times, and relayed by
// every member the first time it gets one.
type mlLib struct{}

func (mlLib) name() string { return "memberlist" }

func (mlLib) start(i int, env *cluster) (member, error) {
	t, err := harness.OpenMLTransport(env.bytes)
	if err != nil {
		return nil, err
	}
	conf := memberlist.DefaultLANConfig()
	d := &mlDelegate{self: i, track: env.track}
	d.queue = &memberlist.TransmitLimitedQueue{
		// The member count, fixed: every member is live throughout,
		// and a constant spares GetBroadcasts memberlist's node lock.
		NumNodes:       func() int { return env.n },
		RetransmitMult: conf.RetransmitMult,
	}
	conf.Name = memberName(i)
	conf.BindAddr = "127.0.0.1"
	conf.BindPort = 0
	conf.AdvertiseAddr = ""
	conf.Transport = t
	conf.LogOutput = io.Discard
	conf.Delegate = d
	ml, err := memberlist.Create(conf)
	if err != nil {
		_ = t.Shutdown()
		return nil, err
	}
	return &mlMember{ml: ml, d: d, addr: t.Address()}, nil
}

// queueFull: memberlist's queue is unbounded, it never refuses.
func (mlLib) queueFull(error) bool { return false }

type mlMember struct {
	ml   *memberlist.Memberlist
	d    *mlDelegate
	addr string
}

func (m *mlMember) address() string { return m.addr }
func (m *mlMember) numMembers() int { return m.ml.NumMembers() }
func (m *mlMember) shutdown() error { return m.ml.Shutdown() } // no Leave: nothing to announce at teardown
func (m *mlMember) join(_ context.Context, seed string) error {
	_, err := m.ml.Join([]string{seed})
	return err
}

// broadcast queues the payload at its origin. Copies that come back to
// the origin are counted and never relayed (tracker.receive).
func (m *mlMember) broadcast(payload []byte) (<-chan error, error) {
	m.d.queue.QueueBroadcast(mlBroadcast(payload))
	return nil, nil
}

// counters returns the broadcasts waiting in the member's queue, the
// backlog memberlist's gossip has not worked through.
func (m *mlMember) counters() map[string]uint64 {
	return map[string]uint64{"Queued": uint64(m.d.queue.NumQueued())}
}

// mlDelegate is a member's memberlist.Delegate: its broadcast queue and the
// receiving end.
type mlDelegate struct {
	self  int
	track *tracker
	queue *memberlist.TransmitLimitedQueue
}

func (d *mlDelegate) NodeMeta(int) []byte           { return nil }
func (d *mlDelegate) LocalState(bool) []byte        { return nil }
func (d *mlDelegate) MergeRemoteState([]byte, bool) {}
func (d *mlDelegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.queue.GetBroadcasts(overhead, limit)
}

// NotifyMsg gets every copy of every broadcast (memberlist does not
// deduplicate user messages): the first is delivered and queued once for
// relaying, the rest only counted.
func (d *mlDelegate) NotifyMsg(b []byte) {
	if d.track.receive(d.self, b, true) {
		// b is memberlist's buffer, reused after the call returns.
		d.queue.QueueBroadcast(mlBroadcast(append([]byte(nil), b...)))
	}
}

// mlBroadcast is one payload in a TransmitLimitedQueue. It is a
// UniqueBroadcast: no broadcast replaces another, and the queue skips the
// search for ones it would invalidate.
type mlBroadcast []byte

func (b mlBroadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b mlBroadcast) Message() []byte                       { return b }
func (b mlBroadcast) Finished()                             {}
func (b mlBroadcast) UniqueBroadcast()                      {}
