package swim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/swim-go/swim/internal/fifo"
	"go.uber.org/zap"
)

// TestEventQueueBoundOrderAndMemory drives the loop's side (queueEvent) and
// the dispatcher directly: EventBuffer events wait while the handler is
// busy, later ones are dropped and counted, the waiting ones arrive in
// order, and the queue's memory follows the backlog, not EventBuffer.
func TestEventQueueBoundOrderAndMemory(t *testing.T) {
	const buffer = 100
	busy := make(chan struct{})
	release := make(chan struct{})
	got := make(chan uint64, 2*buffer)
	ml := &Memberlist{
		cfg: Config{EventBuffer: buffer, Events: EventFunc(func(e Event) {
			if e.Member.Incarnation == 0 {
				close(busy)
				<-release
			}
			got <- e.Member.Incarnation
		})},
		logger:         zap.NewNop(),
		events:         newEventQueue(),
		stop:           make(chan struct{}),
		dispatcherDone: make(chan struct{}),
	}
	require.Zero(t, ml.events.queue.Cap(), "nothing is allocated before the first event")
	go ml.dispatch()
	defer func() {
		close(ml.stop)
		<-ml.dispatcherDone
	}()
	event := func(i int) Event { return Event{Kind: EventJoin, Member: Member{Name: "m", Incarnation: uint64(i)}} }

	ml.queueEvent(event(0))
	select {
	case <-busy:
	case <-time.After(transportTestWait):
		t.Fatal("the dispatcher did not deliver the first event")
	}
	// The handler is busy with event 0: 1..buffer wait, the rest drop.
	const queued = buffer + 50
	for i := 1; i <= queued; i++ {
		ml.queueEvent(event(i))
	}
	require.Equal(t, uint64(queued-buffer), ml.eventsDropped.Load())
	require.True(t, ml.dropping)
	ml.events.mu.Lock()
	require.Equal(t, buffer, ml.events.queue.Len())
	require.Less(t, ml.events.queue.Cap(), 2*buffer, "the queue grows by doubling to the backlog")
	ml.events.mu.Unlock()

	close(release)
	for want := range uint64(buffer + 1) {
		select {
		case i := <-got:
			require.Equal(t, want, i)
		case <-time.After(transportTestWait):
			t.Fatalf("event %d not delivered", want)
		}
	}
	ml.events.mu.Lock()
	require.LessOrEqual(t, ml.events.queue.Cap(), fifo.MinCap, "drained, the queue gives its memory back")
	ml.events.mu.Unlock()

	// A queued event after the overflow ends the dropping streak.
	ml.queueEvent(event(queued + 1))
	require.False(t, ml.dropping)
	select {
	case i := <-got:
		require.Equal(t, uint64(queued+1), i)
	case <-time.After(transportTestWait):
		t.Fatal("event after the overflow not delivered")
	}
}

// TestMessageQueueBoundedInBytes: messages waiting for a busy Messages
// handler are bounded in bytes, not only in count: at the defaults, a
// stream of 1 MiB messages holds at most MessageBufferBytes' 32 MiB, not
// MessageBuffer's 1,024 of them (1 GiB); the rest are dropped and counted.
func TestMessageQueueBoundedInBytes(t *testing.T) {
	busy := make(chan struct{})
	release := make(chan struct{})
	cfg := DefaultLANConfig()
	cfg.Messages = MessageFunc(func(Message) {
		select {
		case <-busy:
		default:
			close(busy)
			<-release
		}
	})
	ml := &Memberlist{
		cfg:            *cfg,
		logger:         zap.NewNop(),
		events:         newEventQueue(),
		stop:           make(chan struct{}),
		dispatcherDone: make(chan struct{}),
	}
	go ml.dispatch()
	defer func() {
		close(release)
		close(ml.stop)
		<-ml.dispatcherDone
	}()
	payload := make([]byte, 1<<20)
	ml.queueMessage(Message{Kind: MessageReliable, From: "m", Payload: payload})
	select {
	case <-busy:
	case <-time.After(transportTestWait):
		t.Fatal("the dispatcher did not deliver the first message")
	}
	const sent = 100
	for range sent {
		ml.queueMessage(Message{Kind: MessageReliable, From: "m", Payload: payload})
	}
	ml.events.mu.Lock()
	waiting := ml.events.messages
	ml.events.mu.Unlock()
	require.LessOrEqual(t, waiting*len(payload), 32<<20, "more than 32 MiB of messages wait")
	require.Equal(t, uint64(sent-waiting), ml.messagesDropped.Load())
}
