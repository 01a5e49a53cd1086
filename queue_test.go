package swim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFifoOrderAcrossGrowthAndWrap(t *testing.T) {
	var q fifo[int]
	_, ok := q.pop()
	require.False(t, ok, "pop of an empty queue")
	_, ok = q.peek()
	require.False(t, ok, "peek of an empty queue")

	// Interleave pushes and pops so that the ring wraps before it grows,
	// and growth has to unwrap it.
	next, want := 0, 0
	for round := range 200 {
		for range round%7 + 3 {
			q.push(next)
			next++
		}
		for range round%5 + 1 {
			v, ok := q.peek()
			require.True(t, ok)
			require.Equal(t, want, v)
			v, ok = q.pop()
			require.True(t, ok)
			require.Equal(t, want, v, "round %d", round)
			want++
		}
		require.Equal(t, next-want, q.len())
	}
	for q.len() > 0 {
		v, _ := q.pop()
		require.Equal(t, want, v)
		want++
	}
	require.Equal(t, next, want)
}

func TestFifoGivesMemoryBack(t *testing.T) {
	var q fifo[int]
	require.Nil(t, q.buf, "an unused queue allocates nothing")
	q.push(1)
	require.Len(t, q.buf, fifoMinCap)
	_, _ = q.pop()
	require.Len(t, q.buf, fifoMinCap, "the minimum ring is kept: a quiet queue does not allocate per item")

	for i := range 1000 {
		q.push(i)
	}
	require.Len(t, q.buf, 1024)
	// Draining halves the ring at a quarter full...
	for q.len() > 200 {
		_, _ = q.pop()
	}
	require.Less(t, len(q.buf), 1024)
	require.GreaterOrEqual(t, len(q.buf), q.len())
	// ...down to the minimum once empty: the burst's high-water mark is
	// not kept.
	for q.len() > 0 {
		_, _ = q.pop()
	}
	require.Len(t, q.buf, fifoMinCap)
}

func TestFifoPopClearsSlot(t *testing.T) {
	var q fifo[*int]
	v := new(int)
	q.push(v)
	q.push(new(int))
	got, _ := q.pop()
	require.Same(t, v, got)
	require.Nil(t, q.buf[0], "a popped slot must not keep its item reachable")
}
