package swim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// inbox records the messages a member receives.
type inbox struct {
	mu   sync.Mutex
	msgs []Message
}

func (b *inbox) HandleMessage(m Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs = append(b.msgs, m)
}

func (b *inbox) all() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.msgs)
}

func (b *inbox) has(kind MessageKind, from, payload string) bool {
	for _, m := range b.all() {
		if m.Kind == kind && m.From == from && string(m.Payload) == payload {
			return true
		}
	}
	return false
}

// startClusterWith starts n members configured by tweak, joined through the
// first, and waits until every one sees all n (formCluster).
func startClusterWith(t *testing.T, n int, tweak func(i int, c *Config)) []*testMember {
	t.Helper()
	cfgs := make([]*Config, n)
	for i := range cfgs {
		cfgs[i] = testConfig(fmt.Sprintf("node-%d", i))
		tweak(i, cfgs[i])
	}
	return formCluster(t, cfgs...)
}

func TestSendBestEffortAndReliableOverSockets(t *testing.T) {
	boxes := make([]*inbox, 3)
	ms := startClusterWith(t, 3, func(i int, c *Config) {
		boxes[i] = &inbox{}
		c.Messages = boxes[i]
	})
	require.NoError(t, ms[0].SendBestEffort("node-1", []byte("ping me")))
	require.Eventually(t, func() bool { return boxes[1].has(MessageBestEffort, "node-0", "ping me") }, formTimeout, pollEvery)

	big := bytes.Repeat([]byte("r"), 300_000)
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	require.NoError(t, ms[2].SendReliable(ctx, "node-0", big))
	// Acknowledged means handed to the receiver's handler queue.
	require.Eventually(t, func() bool { return boxes[0].has(MessageReliable, "node-2", string(big)) }, formTimeout, pollEvery)

	require.ErrorIs(t, ms[0].SendBestEffort("nobody", []byte("x")), ErrNoSuchMember)
	require.ErrorIs(t, ms[0].SendBestEffort("node-1", make([]byte, 2000)), ErrMessageTooLarge)
	require.ErrorIs(t, ms[0].SendReliable(ctx, "node-1", make([]byte, (1<<20)+1)), ErrMessageTooLarge)
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	require.ErrorIs(t, ms[0].SendReliable(done, "node-1", []byte("x")), context.Canceled)

	st := ms[1].Stats()
	require.Equal(t, uint64(1), st.Messages.Received)
	require.Zero(t, st.MessagesDropped)
}

// Without a Messages handler, messages are dropped and counted; a SendReliable
// is still acknowledged (the member received it).
func TestMessagesWithoutHandlerAreCounted(t *testing.T) {
	ms := startClusterWith(t, 2, func(int, *Config) {})
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	require.NoError(t, ms[0].SendReliable(ctx, "node-1", []byte("x")))
	require.Eventually(t, func() bool { return ms[1].Stats().MessagesUnhandled == 1 }, formTimeout, pollEvery)
}

func TestBroadcastOverSockets(t *testing.T) {
	const n = 5
	boxes := make([]*inbox, n)
	ms := startClusterWith(t, n, func(i int, c *Config) {
		boxes[i] = &inbox{}
		c.Messages = boxes[i]
	})
	done, err := ms[1].Broadcast([]byte("to all"), "")
	require.NoError(t, err)
	for i, b := range boxes {
		if i == 1 {
			continue
		}
		require.Eventually(t, func() bool { return b.has(MessageBroadcast, "node-1", "to all") }, formTimeout, pollEvery, "node-%d", i)
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(formTimeout):
		t.Fatal("the broadcast's outcome never came")
	}
	require.Empty(t, boxes[1].all(), "delivered to its own origin")
	for i, b := range boxes {
		count := 0
		for _, m := range b.all() {
			if string(m.Payload) == "to all" {
				count++
			}
		}
		require.LessOrEqual(t, count, 1, "node-%d got it %d times", i, count)
	}
	_, err = ms[0].Broadcast(make([]byte, 1500), "")
	require.ErrorIs(t, err, ErrMessageTooLarge)
}

// BroadcastWait waits for room where Broadcast would refuse: with room
// for one own broadcast not yet sent, a burst of them all go through and
// reach the other members.
func TestBroadcastWaitOverSockets(t *testing.T) {
	const n, burst = 3, 50
	boxes := make([]*inbox, n)
	ms := startClusterWith(t, n, func(i int, c *Config) {
		boxes[i] = &inbox{}
		c.Messages = boxes[i]
		c.Broadcasts.QueueLimit = 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	refused := 0
	for i := range burst {
		msg := []byte(fmt.Sprintf("b%03d", i))
		if _, err := ms[0].Broadcast(msg, ""); errors.Is(err, ErrBroadcastQueueFull) {
			refused++
		} else {
			require.NoError(t, err)
			continue
		}
		_, err := ms[0].BroadcastWait(ctx, msg, "")
		require.NoError(t, err)
	}
	for i := 1; i < n; i++ {
		require.Eventually(t, func() bool { return len(boxes[i].all()) == burst }, formTimeout, pollEvery, "node-%d", i)
	}
	t.Logf("%d of %d broadcasts waited for room", refused, burst)

	cancelled, stop := context.WithCancel(context.Background())
	stop()
	var err error
	for i := 0; i < 10_000 && err == nil; i++ {
		// Until the queue is full, a cancelled context does not matter;
		// once it is, BroadcastWait returns the context's error.
		_, err = ms[0].BroadcastWait(cancelled, []byte("x"), "")
	}
	require.ErrorIs(t, err, context.Canceled)
}

// kvState is a tiny state delegate: a set of strings, merged by union.
type kvState struct {
	mu     sync.Mutex
	keys   map[string]bool
	joins  int
	merges int
	fail   bool
}

func (s *kvState) LocalState(join bool) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return []byte(strings.Join(keys, ","))
}

func (s *kvState) MergeRemoteState(state []byte, join bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.merges++
	if join {
		s.joins++
	}
	if s.fail {
		return errors.New("refused")
	}
	for _, k := range strings.Split(string(state), ",") {
		if k != "" {
			s.keys[k] = true
		}
	}
	return nil
}

func (s *kvState) has(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if !s.keys[k] {
			return false
		}
	}
	return true
}

// The state delegate's state travels both ways on a join, and on the
// periodic push-pull: node-1 joins before node-2 does, so only a push-pull
// can bring it node-2's key. A merge error is counted.
func TestStateExchangeOnJoinAndPushPull(t *testing.T) {
	for _, pushPull := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(fmt.Sprintf("push-pull every %v", pushPull), func(t *testing.T) {
			states := []*kvState{
				{keys: map[string]bool{"a": true}},
				{keys: map[string]bool{"b": true}},
				{keys: map[string]bool{"c": true}, fail: true},
			}
			ms := startClusterWith(t, 3, func(i int, c *Config) {
				c.State = states[i]
				c.PushPullInterval = pushPull
			})
			// The seed got each joiner's state with its request, each
			// joiner the seed's with the reply, marked as a join.
			require.Eventually(t, func() bool { return states[0].has("a", "b", "c") && states[1].has("a", "b") }, formTimeout, pollEvery)
			require.Eventually(t, func() bool { return ms[2].Stats().StateMergeErrors > 0 }, formTimeout, pollEvery)
			states[1].mu.Lock()
			require.Positive(t, states[1].joins)
			states[1].mu.Unlock()
			if pushPull == 0 {
				return
			}
			require.Eventually(t, func() bool { return states[1].has("a", "b", "c") }, formTimeout, pollEvery, "the push-pull carried no state")
			states[1].mu.Lock()
			require.Greater(t, states[1].merges, states[1].joins)
			states[1].mu.Unlock()
		})
	}
}

// A LocalState over MaxStateSize is not sent, and counted.
func TestLocalStateOverLimitNotSent(t *testing.T) {
	big := &kvState{keys: map[string]bool{strings.Repeat("k", 5000): true}}
	small := &kvState{keys: map[string]bool{}}
	ms := startClusterWith(t, 2, func(i int, c *Config) {
		c.MaxStateSize = 4096
		c.State = []*kvState{small, big}[i]
	})
	require.Positive(t, ms[1].Stats().StatesTooLarge)
	require.False(t, small.has(strings.Repeat("k", 5000)))
}

// TestReliableRefusedWhenBufferFull: a receiver whose Messages handler is
// stuck holds at most MessageBufferBytes of messages, and refuses the
// reliable messages past it before acknowledging them, so the sender's
// SendReliable fails instead of the message being lost after it; once the
// handler catches up, the sender's next try is delivered.
func TestReliableRefusedWhenBufferFull(t *testing.T) {
	release := make(chan struct{})
	var handled atomic.Int64
	ms := startClusterWith(t, 2, func(i int, c *Config) {
		if i == 1 {
			c.Messages = MessageFunc(func(Message) {
				<-release
				handled.Add(1)
			})
		}
	})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	payload := make([]byte, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	var acked int
	var err error
	for acked = 0; acked < 48; acked++ {
		if err = ms[0].SendReliable(ctx, "node-1", payload); err != nil {
			break
		}
	}
	require.Error(t, err, "48 MiB acknowledged by a stuck handler with the default 32 MiB buffer")
	// 31 wait (the 32nd's request, its payload and header, is over the
	// 32 MiB), and one more is acknowledged when the dispatcher had taken
	// the first to the handler before the last arrived.
	require.GreaterOrEqual(t, acked, 31)
	require.LessOrEqual(t, acked, 32)
	require.Equal(t, uint64(1), ms[1].Stats().MessagesDropped)

	unblock()
	require.Eventually(t, func() bool { return handled.Load() == int64(acked) }, formTimeout, pollEvery,
		"every acknowledged message reaches the handler")
	require.NoError(t, ms[0].SendReliable(ctx, "node-1", payload), "room again once the handler caught up")
	require.Eventually(t, func() bool { return handled.Load() == int64(acked)+1 }, formTimeout, pollEvery)
}
