package fifo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFifoOrderAcrossGrowthAndWrap(t *testing.T) {
	var q Queue[int]
	_, ok := q.Pop()
	require.False(t, ok, "pop of an empty queue")
	_, ok = q.Peek()
	require.False(t, ok, "peek of an empty queue")

	// Interleave pushes and pops so that the ring wraps before it grows,
	// and growth has to unwrap it.
	next, want := 0, 0
	for round := range 200 {
		for range round%7 + 3 {
			q.Push(next)
			next++
		}
		for range round%5 + 1 {
			v, ok := q.Peek()
			require.True(t, ok)
			require.Equal(t, want, v)
			v, ok = q.Pop()
			require.True(t, ok)
			require.Equal(t, want, v, "round %d", round)
			want++
		}
		require.Equal(t, next-want, q.Len())
	}
	for q.Len() > 0 {
		v, _ := q.Pop()
		require.Equal(t, want, v)
		want++
	}
	require.Equal(t, next, want)
}

func TestFifoGivesMemoryBack(t *testing.T) {
	var q Queue[int]
	require.Nil(t, q.buf, "an unused queue allocates nothing")
	q.Push(1)
	require.Len(t, q.buf, MinCap)
	_, _ = q.Pop()
	require.Len(t, q.buf, MinCap, "the minimum ring is kept: a quiet queue does not allocate per item")

	for i := range 1000 {
		q.Push(i)
	}
	require.Len(t, q.buf, 1024)
	// Draining halves the ring at a quarter full...
	for q.Len() > 200 {
		_, _ = q.Pop()
	}
	require.Less(t, len(q.buf), 1024)
	require.GreaterOrEqual(t, len(q.buf), q.Len())
	// ...down to the minimum once empty: the burst's high-water mark is
	// not kept.
	for q.Len() > 0 {
		_, _ = q.Pop()
	}
	require.Len(t, q.buf, MinCap)
}

func TestFifoPopClearsSlot(t *testing.T) {
	var q Queue[*int]
	v := new(int)
	q.Push(v)
	q.Push(new(int))
	got, _ := q.Pop()
	require.Same(t, v, got)
	require.Nil(t, q.buf[0], "a popped slot must not keep its item reachable")
}
