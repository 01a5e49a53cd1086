// Package fifo is a first-in, first-out queue that holds only the memory
// its items need.
package fifo

// MinCap is the smallest backing array a Queue allocates, and the one it
// keeps once drained: a member's queues hold a handful of items most of the
// time, so this is all they cost at rest.
const MinCap = 8

// Queue is a first-in, first-out queue on a ring buffer that grows on demand
// and gives its memory back as it drains. The runtime's queues (received
// packets, events for the handler) are bounded by a configured limit in the
// thousands but almost always nearly empty; allocating the limit up front,
// as a buffered channel must, would cost every member over 170 KiB for
// nothing.
// The limit stays the caller's to enforce (len before push).
//
// It is not safe for concurrent use; its owner guards it.
type Queue[T any] struct {
	buf  []T // the ring; len(buf) is the capacity, nil until the first push
	head int // index of the oldest item
	n    int // items queued
}

// Len returns how many items are queued.
func (q *Queue[T]) Len() int { return q.n }

// Push appends v, doubling the ring when it is full.
func (q *Queue[T]) Push(v T) {
	if q.n == len(q.buf) {
		q.resize(max(MinCap, 2*len(q.buf)))
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

// Peek returns the oldest item without removing it.
func (q *Queue[T]) Peek() (T, bool) {
	if q.n == 0 {
		var zero T
		return zero, false
	}
	return q.buf[q.head], true
}

// Pop removes and returns the oldest item. Once the queue is down to a
// quarter of its ring the ring is halved, down to MinCap, so a burst
// does not pin its high-water mark for the member's lifetime; halving at a
// quarter, not at a half, keeps a queue hovering at one size from
// reallocating on every push and pop.
func (q *Queue[T]) Pop() (T, bool) {
	var zero T
	if q.n == 0 {
		return zero, false
	}
	v := q.buf[q.head]
	q.buf[q.head] = zero // the ring must not keep the item's memory alive
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	if len(q.buf) > MinCap && q.n <= len(q.buf)/4 {
		q.resize(len(q.buf) / 2)
	}
	return v, true
}

// resize moves the items, oldest first, into a new ring of capacity c >= n.
func (q *Queue[T]) resize(c int) {
	buf := make([]T, c)
	if q.n > 0 {
		end := q.head + q.n
		if end <= len(q.buf) {
			copy(buf, q.buf[q.head:end])
		} else {
			k := copy(buf, q.buf[q.head:])
			copy(buf[k:], q.buf[:end-len(q.buf)])
		}
	}
	q.buf, q.head = buf, 0
}

// Cap returns the capacity of the ring: what the queue holds on to.
func (q *Queue[T]) Cap() int { return len(q.buf) }
