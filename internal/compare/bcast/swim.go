package main

import (
	"context"
	"errors"
	"reflect"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/compare/harness"
)

// swimLib runs swim members at swim.DefaultLANConfig (so with
// Broadcasts.Trees on), each over a counting wrapper of swim's NetTransport.
type swimLib struct{}

func (swimLib) name() string { return "swim" }

func (swimLib) start(i int, env *cluster) (member, error) {
	cfg := swim.DefaultLANConfig()
	t, err := harness.NewSwimTransport(env.bytes, cfg.MaxConcurrentStreams)
	if err != nil {
		return nil, err
	}
	cfg.Name = memberName(i)
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Transport = t
	tr := env.track
	// The handler runs on the member's event goroutine: it only records,
	// so that it never makes swim's message buffer overflow.
	cfg.Messages = swim.MessageFunc(func(msg swim.Message) {
		if msg.Kind == swim.MessageBroadcast {
			tr.receive(i, msg.Payload, false)
		}
	})
	ml, err := swim.New(cfg)
	if err != nil {
		_ = t.Close()
		return nil, err
	}
	return &swimMember{ml: ml, addr: t.LocalAddr().String()}, nil
}

type swimMember struct {
	ml   *swim.Memberlist
	addr string
}

func (m *swimMember) address() string { return m.addr }
func (m *swimMember) numMembers() int { return m.ml.NumMembers() }
func (m *swimMember) shutdown() error { return m.ml.Shutdown() }
func (m *swimMember) join(ctx context.Context, seed string) error {
	_, err := m.ml.Join(ctx, seed)
	return err
}

func (m *swimMember) broadcast(payload []byte) (<-chan error, error) {
	return m.ml.Broadcast(payload, "") // no key: every broadcast is its own
}

// queueFull reports whether err is swim's refusal for backed-up tree links.
func (swimLib) queueFull(err error) bool { return errors.Is(err, swim.ErrBroadcastQueueFull) }

// counters returns the member's swim counters by name (the uint64 fields of
// MemberlistStats): Broadcasts.Delivered + Broadcasts.Duplicate are the
// copies of broadcasts it received, Trees.Redundant those that came again
// over a tree link.
func (m *swimMember) counters() map[string]uint64 {
	sum := map[string]uint64{}
	sumUintFields(sum, reflect.ValueOf(m.ml.Stats()))
	return sum
}

// outcomeKind names what swim reported through the channel Broadcast
// returned, for the notes.
func outcomeKind(err error) string {
	switch {
	case err == nil:
		return "sent"
	case errors.Is(err, swim.ErrBroadcastDropped):
		return "dropped"
	case errors.Is(err, swim.ErrBroadcastReplaced):
		return "replaced"
	}
	return "other"
}
