package swim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

func frameOf(n int, tag byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = tag
	}
	return b
}

func TestBroadcastQueueFewestSentFirstNewestFirst(t *testing.T) {
	q := newPiggybackQueue(100, 0)
	q.queue("a", frameOf(10, 'a'))
	q.queue("b", frameOf(10, 'b'))
	// Room for one delta: the newest unsent one goes first.
	frames, _ := q.take(nil, 10+wire.FrameOverheadMax, 5, wire.MaxProtocol)
	require.Equal(t, [][]byte{frameOf(10, 'b')}, frames)
	// b has been sent once, a never: a goes next.
	frames, _ = q.take(nil, 10+wire.FrameOverheadMax, 5, wire.MaxProtocol)
	require.Equal(t, [][]byte{frameOf(10, 'a')}, frames)
	q.queue("c", frameOf(10, 'c'))
	frames, _ = q.take(nil, 3*(10+wire.FrameOverheadMax), 5, wire.MaxProtocol)
	require.Equal(t, [][]byte{frameOf(10, 'c'), frameOf(10, 'a'), frameOf(10, 'b')}, frames)
}

func TestBroadcastQueueRetiresAfterLimit(t *testing.T) {
	q := newPiggybackQueue(100, 0)
	b := q.queue("a", frameOf(10, 'a'))
	for i := 0; i < 3; i++ {
		frames, _ := q.take(nil, 1000, 3, wire.MaxProtocol)
		require.Len(t, frames, 1, "take %d", i)
	}
	require.Equal(t, 0, q.Len())
	require.True(t, b.removed)
	frames, _ := q.take(nil, 1000, 3, wire.MaxProtocol)
	require.Empty(t, frames)
}

func TestBroadcastQueueInvalidatesOlderDelta(t *testing.T) {
	q := newPiggybackQueue(100, 0)
	old := q.queue("a", frameOf(10, '1'))
	q.queue("a", frameOf(10, '2'))
	require.Equal(t, 1, q.Len())
	require.True(t, old.removed)
	frames, _ := q.take(nil, 1000, 3, wire.MaxProtocol)
	require.Equal(t, [][]byte{frameOf(10, '2')}, frames)
}

func TestBroadcastQueueNeverSendsOneDeltaTwiceInAPacket(t *testing.T) {
	q := newPiggybackQueue(100, 0)
	for i := 0; i < 5; i++ {
		q.queue(fmt.Sprint(i), frameOf(5, byte('0'+i)))
	}
	frames, _ := q.take(nil, 10000, 10, wire.MaxProtocol)
	require.Len(t, frames, 5)
	seen := map[string]bool{}
	for _, f := range frames {
		require.False(t, seen[string(f)])
		seen[string(f)] = true
	}
}

func TestBroadcastQueueRespectsBudgetAndSkipsLargeDeltas(t *testing.T) {
	q := newPiggybackQueue(100, 0)
	q.queue("small", frameOf(10, 's'))
	q.queue("big", frameOf(100, 'b'))
	frames, used := q.take(nil, 50, 5, wire.MaxProtocol)
	require.Equal(t, [][]byte{frameOf(10, 's')}, frames)
	require.Equal(t, 10+wire.FrameOverheadMax, used)
	require.Equal(t, 2, q.Len())
}

func TestBroadcastQueueDropsMostSentWhenFull(t *testing.T) {
	q := newPiggybackQueue(2, 0)
	q.queue("a", frameOf(10, 'a'))
	q.take(nil, 10+wire.FrameOverheadMax, 5, wire.MaxProtocol) // a sent once
	q.queue("b", frameOf(10, 'b'))
	q.queue("c", frameOf(10, 'c'))
	require.Equal(t, 2, q.Len())
	require.Equal(t, uint64(1), q.dropped)
	_, hasA := q.byKey["a"]
	require.False(t, hasA, "the most-sent delta is dropped first")
}
