package migrate

import (
	"context"
	"fmt"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim"
)

// Application data across the bridge. A broadcast goes out on both sides:
// on swim as swim.Broadcast does, on memberlist through a
// TransmitLimitedQueue piggybacked on its gossip, as a memberlist
// application's own broadcasts go. A bridged process therefore gets a
// broadcast of another bridged process once per side; memberlist
// applications take repeated broadcasts already, since memberlist's gossip
// repeats them. A keyed broadcast keeps its meaning on both sides: the
// newer replaces the older of the same key in every queue.

// Broadcast sends msg to every process of both clusters. A non-empty key
// makes it replace this process's older broadcast of the same key still
// queued, on both sides.
func (b *Bridge) Broadcast(msg []byte, key string) error {
	if _, err := b.sw.Broadcast(msg, key); err != nil {
		return fmt.Errorf("migrate: swim broadcast: %w", err)
	}
	b.mu.Lock()
	on := b.ml != nil
	if on {
		b.stats.BroadcastsMemberlist++
	}
	b.mu.Unlock()
	if on {
		payload := append([]byte(nil), msg...)
		if key == "" {
			b.queue.QueueBroadcast(uniqueBroadcast{payload})
		} else {
			b.queue.QueueBroadcast(&namedBroadcast{key: key, msg: payload})
		}
	}
	return nil
}

// SendBestEffort sends msg to the process called to, on swim if swim
// holds it live, else on memberlist.
func (b *Bridge) SendBestEffort(to string, msg []byte) error {
	if mb, ok := b.sw.Member(to); ok && live(mb.State) {
		return b.sw.SendBestEffort(to, msg)
	}
	ml, node := b.mlNode(to)
	if node == nil {
		return fmt.Errorf("%w: %q", ErrNotMember, to)
	}
	return ml.SendBestEffort(node, msg)
}

// SendReliable sends msg to the process called to over a stream, on swim
// if swim holds it live (acknowledged), else on memberlist.
func (b *Bridge) SendReliable(ctx context.Context, to string, msg []byte) error {
	if mb, ok := b.sw.Member(to); ok && live(mb.State) {
		return b.sw.SendReliable(ctx, to, msg)
	}
	ml, node := b.mlNode(to)
	if node == nil {
		return fmt.Errorf("%w: %q", ErrNotMember, to)
	}
	return ml.SendReliable(node, msg)
}

// mlNode returns the memberlist side and its live node called name.
func (b *Bridge) mlNode(name string) (*memberlist.Memberlist, *memberlist.Node) {
	b.mu.Lock()
	ml := b.ml
	n, ok := b.mlNodes[name]
	b.mu.Unlock()
	if ml == nil || !ok || !mlLive(n.State) {
		return nil, nil
	}
	return ml, &n
}

// mlDelegate is the memberlist side's Delegate: the application's
// metadata, messages, broadcasts and state.
type mlDelegate Bridge

func (d *mlDelegate) NodeMeta(limit int) []byte {
	if len(d.cfg.Meta) > limit {
		return nil // refused by New; memberlist's limit is fixed
	}
	return d.cfg.Meta
}

func (d *mlDelegate) NotifyMsg(msg []byte) {
	if d.cfg.Messages == nil || len(msg) == 0 {
		return
	}
	d.cfg.Messages.HandleMessage(swim.Message{Kind: swim.MessageBestEffort, Payload: append([]byte(nil), msg...)})
}

func (d *mlDelegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.queue.GetBroadcasts(overhead, limit)
}

func (d *mlDelegate) LocalState(join bool) []byte {
	if d.cfg.State == nil {
		return nil
	}
	return d.cfg.State.LocalState(join)
}

func (d *mlDelegate) MergeRemoteState(buf []byte, join bool) {
	if d.cfg.State == nil || len(buf) == 0 {
		return
	}
	if err := d.cfg.State.MergeRemoteState(buf, join); err != nil {
		d.mu.Lock()
		d.stats.StateMergeErrors++
		d.mu.Unlock()
	}
}

// namedBroadcast is a keyed broadcast on the memberlist side: it replaces
// the queued one of the same key (memberlist.NamedBroadcast).
type namedBroadcast struct {
	key string
	msg []byte
}

func (n *namedBroadcast) Name() string { return n.key }
func (n *namedBroadcast) Invalidates(o memberlist.Broadcast) bool {
	other, ok := o.(*namedBroadcast)
	return ok && other.key == n.key
}
func (n *namedBroadcast) Message() []byte { return n.msg }
func (n *namedBroadcast) Finished()       {}

// uniqueBroadcast is an unkeyed broadcast: it replaces nothing
// (memberlist.UniqueBroadcast).
type uniqueBroadcast struct{ msg []byte }

func (uniqueBroadcast) UniqueBroadcast()                      {}
func (uniqueBroadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (u uniqueBroadcast) Message() []byte                     { return u.msg }
func (uniqueBroadcast) Finished()                             {}
