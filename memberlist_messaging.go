package swim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim/internal/wire"
)

// The application's data through a Memberlist: the runtime side of
// usermsg.go. Messages others send arrive at Config.Messages.

// SendBestEffort sends msg to the member named to in one UDP packet: no
// acknowledgement, no retry, delivered at most once (memberlist's
// SendBestEffort). It fails at once, sending nothing, when to is not a
// live member (ErrNoSuchMember), runs a release that reads no application
// messages (ErrPeerTooOld), or when msg does not fit one packet
// (ErrMessageTooLarge: about PacketBudget less 40 bytes and this member's
// name); use SendReliable for more.
func (ml *Memberlist) SendBestEffort(to string, msg []byte) error {
	if ml.isShutdown() {
		return ErrShutdown
	}
	var sendErr error
	if err := ml.input(func(now time.Time) { sendErr = ml.machine.SendBestEffort(now, to, msg) }); err != nil {
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("swim: send to %q: %w", to, sendErr)
	}
	return nil
}

// SendReliable sends msg to the member named to over a TCP stream (TLS
// and sealed as configured, like every stream) and returns once the
// member acknowledged it, which it does when the message is handed to its
// Messages handler's queue, or with the error that ended the exchange.
// msg may hold up to MaxMessageSize bytes (1 MiB by default). ctx bounds
// the wait; StreamTimeout bounds the exchange when ctx has no earlier
// deadline. A message whose exchange failed may still have been
// delivered: the acknowledgement may be what was lost.
func (ml *Memberlist) SendReliable(ctx context.Context, to string, msg []byte) error {
	if ml.isShutdown() {
		return ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	timeout := ml.cfg.StreamTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	msg = bytes.Clone(msg) // the exchange runs after this returns on ctx's end
	done := make(chan error, 1)
	var sendErr error
	if err := ml.input(func(now time.Time) {
		var id uint64
		if id, sendErr = ml.machine.SendReliable(now, to, msg, timeout); sendErr == nil {
			ml.outcomes[id] = done
		}
	}); err != nil {
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("swim: send to %q: %w", to, sendErr)
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("swim: send to %q: %w", to, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-ml.stop:
		return ErrShutdown
	}
}

// Broadcast sends msg to every other member, delivered once to each one's
// Messages handler. Between members of this release it travels on
// epidemic broadcast trees (Config.Broadcasts.Trees, on by default): each
// member pushes it at once to a few neighbors and announces it to the
// others, which ask for it if their push does not come, so it reaches
// every live member about once, in a few hops. To and from members of an
// older release it rides on probes and gossip next to membership news, as
// often as any delta is passed on. It never travels to members whose
// release reads no application messages.
//
// A non-empty key makes this broadcast replace this member's earlier one
// with the same key wherever it is still queued, here and at the members
// relaying it (memberlist's named broadcasts): only the newest value of a
// key keeps spreading, and no member delivers an older value of a key
// after a newer one.
//
// The channel returned receives one value once the broadcast's fate here
// is known: nil once this member has sent it (to its tree neighbors, or
// as often as any delta while gossip carries it; the relays carry on after
// that); ErrBroadcastReplaced or ErrBroadcastDropped otherwise. Nobody has
// to read it.
//
// msg is limited to one packet with its framing on the trees, about 1,300
// bytes at the default PacketBudget, and to half of one while a member of
// an older release is live (membership news keeps the other half: the
// fair budget); larger, it returns an error matching ErrMessageTooLarge.
// Larger data goes through SendReliable or a state exchange. While this
// member's tree links are backed up (its neighbors cannot take what it
// sends as fast), Broadcast returns an error matching
// ErrBroadcastQueueFull at once; BroadcastWait waits for room instead.
func (ml *Memberlist) Broadcast(msg []byte, key string) (<-chan error, error) {
	if ml.isShutdown() {
		return nil, ErrShutdown
	}
	done := make(chan error, 1)
	var bErr error
	if err := ml.input(func(now time.Time) {
		var id uint64
		if id, bErr = ml.machine.Broadcast(now, key, msg); bErr == nil {
			ml.outcomes[id] = done
		}
	}); err != nil {
		return nil, err
	}
	if bErr != nil {
		return nil, fmt.Errorf("swim: broadcast: %w", bErr)
	}
	return done, nil
}

// BroadcastWait is Broadcast, waiting for room while this member's tree
// links are backed up, until ctx is done (its error is returned) or the
// member shuts down. Every other error returns at once, as Broadcast's.
func (ml *Memberlist) BroadcastWait(ctx context.Context, msg []byte, key string) (<-chan error, error) {
	for {
		done, err := ml.Broadcast(msg, key)
		if !errors.Is(err, ErrBroadcastQueueFull) {
			return done, err
		}
		ml.mu.Lock()
		if ml.room == nil {
			ml.room = make(chan struct{})
		}
		room := ml.room
		ml.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ml.stop:
			return nil, ErrShutdown
		}
	}
}

// withLocalState adds the application's state (Config.State) to an
// outbound push-pull; other requests pass unchanged. It runs on the
// exchange's goroutine, outside every lock.
func (ml *Memberlist) withLocalState(data []byte) []byte {
	if ml.cfg.State == nil || !wire.IsPushPull(data) {
		return data
	}
	_, join, err := wire.PushPullHead(data)
	if err != nil {
		return data
	}
	return ml.appendLocalState(data, join)
}

// appendLocalState appends LocalState(join) to the push-pull data, unless
// it is over MaxStateSize (counted and logged, and the push-pull goes
// without it).
func (ml *Memberlist) appendLocalState(data []byte, join bool) []byte {
	state := ml.cfg.State.LocalState(join)
	if len(state) == 0 {
		return data
	}
	if limit := ml.cfg.maxStateSize(); len(state) > limit {
		ml.statesTooLarge.Add(1)
		ml.refusals.Warn("local state over MaxStateSize, not sent", zap.Int("bytes", len(state)), zap.Int("max", limit))
		return data
	}
	// A copy: the Machine may reuse data's buffer.
	out := append(make([]byte, 0, len(data)+len(state)+8), data...)
	out, err := wire.AppendPushPullState(out, state)
	if err != nil {
		ml.logger.Debug("local state not added", zap.Error(err))
		return data
	}
	return out
}

// mergeStates hands peers' states to the application, outside every lock.
func (ml *Memberlist) mergeStates(states []RemoteState) {
	for _, st := range states {
		if err := ml.cfg.State.MergeRemoteState(st.State, st.Join); err != nil {
			ml.stateMergeErrors.Add(1)
			ml.refusals.Warn("peer's state not merged", zap.String("from", st.From), zap.Error(err))
		}
	}
}

// Ping sends the named member a UDP ping, the one probes use, and returns
// its round trip once it answers (memberlist's Ping). ctx bounds the wait;
// without a deadline, ProbeInterval does. An unanswered ping returns
// ErrPingTimeout.
func (ml *Memberlist) Ping(ctx context.Context, name string) (time.Duration, error) {
	if ml.isShutdown() {
		return 0, ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	timeout := ml.cfg.ProbeInterval
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	done := make(chan Outcome, 1)
	var pingErr error
	if err := ml.input(func(now time.Time) {
		var id uint64
		if id, pingErr = ml.machine.Ping(now, name, timeout); pingErr == nil {
			ml.pings[id] = done
		}
	}); err != nil {
		return 0, err
	}
	if pingErr != nil {
		return 0, fmt.Errorf("swim: ping %q: %w", name, pingErr)
	}
	select {
	case o := <-done:
		if o.Err != nil {
			return 0, fmt.Errorf("swim: ping %q: %w", name, o.Err)
		}
		return o.RTT, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-ml.stop:
		return 0, ErrShutdown
	}
}

// RTT returns the smoothed round trip to the named member, from the direct
// probes this member sent it and the answered Pings; false before the
// first answer. It waits as Members does.
func (ml *Memberlist) RTT(name string) (time.Duration, bool) {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.RTT(name)
}

// Member returns the named member as this one sees it, in any state (dead
// and left ones included while they are in the table, GossipToDeadTime),
// this member included. It waits as Members does.
func (ml *Memberlist) Member(name string) (Member, bool) {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	mb, ok := ml.machine.Member(name)
	if ok {
		mb.Meta = bytes.Clone(mb.Meta)
	}
	return mb, ok
}

// Snapshot returns every member in the table (alive, suspect, and dead or
// left ones not yet forgotten, this one included), sorted by name, and the
// Seq of the last event it reflects: apply the events with a greater Seq
// to it and nothing is missed or applied twice (see Event). It waits as
// Members does.
func (ml *Memberlist) Snapshot() ([]Member, uint64) {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.Snapshot()
}
