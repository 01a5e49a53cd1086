package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQueuePopsByTimeThenInsertionOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q eventQueue
	var want []event
	for i := range 5000 {
		// Few distinct times, so most events tie and FIFO order matters.
		ev := event{at: rng.Int64N(20), id: uint64(i)}
		q.push(ev)
		want = append(want, ev)
	}
	slices.SortStableFunc(want, func(a, b event) int { return int(a.at - b.at) })
	for i := range want {
		got := q.pop()
		require.Equal(t, want[i].at, got.at, "position %d", i)
		require.Equal(t, want[i].id, got.id, "position %d: equal times must pop in insertion order", i)
	}
	require.Zero(t, q.len())
}

func TestQueueInterleavedPushPop(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var q eventQueue
	var now int64
	var id uint64
	lastID := map[int64]uint64{}
	for range 20000 {
		if q.len() == 0 || rng.IntN(3) > 0 {
			// Like the simulator, never schedule into the past.
			q.push(event{at: now + rng.Int64N(10), id: id})
			id++
			continue
		}
		ev := q.pop()
		require.GreaterOrEqual(t, ev.at, now)
		if ev.at == now {
			if prev, ok := lastID[now]; ok {
				require.Greater(t, ev.id, prev, "FIFO among equal times")
			}
		}
		now = ev.at
		lastID[now] = ev.id
	}
}

func TestQueuePopClearsReferences(t *testing.T) {
	var q eventQueue
	q.push(event{at: 1, data: []byte("x")})
	q.push(event{at: 2, data: []byte("y")})
	q.pop()
	q.pop()
	require.Nil(t, q.items[:2][0].data, "popped slots must not pin packet data")
	require.Nil(t, q.items[:2][1].data)
}

func BenchmarkQueue(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	var q eventQueue
	for range 100000 {
		q.push(event{at: rng.Int64N(1e9)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ev := q.pop()
		ev.at += rng.Int64N(1e9)
		q.push(ev)
	}
}
