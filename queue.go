package swim

// fifoMinCap is the smallest backing array a fifo allocates, and the one it
// keeps once drained: a member's queues hold a handful of items most of the
// time, so this is all they cost at rest.
const fifoMinCap = 8

// fifo is a first-in, first-out queue on a ring buffer that grows on demand
// and gives its memory back as it drains. The runtime's queues (received
// packets, events for the handler) are bounded by a configured limit in the
// thousands but almost always nearly empty; allocating the limit up front,
// as a buffered channel must, would cost every member over 170 KiB for
// nothing.
// The limit stays the caller's to enforce (len before push).
//
// It is not safe for concurrent use; its owner guards it.
type fifo[T any] struct {
	buf  []T // the ring; len(buf) is the capacity, nil until the first push
	head int // index of the oldest item
	n    int // items queued
}

// len returns how many items are queued.
func (q *fifo[T]) len() int { return q.n }

// push appends v, doubling the ring when it is full.
func (q *fifo[T]) push(v T) {
	if q.n == len(q.buf) {
		q.resize(max(fifoMinCap, 2*len(q.buf)))
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

// peek returns the oldest item without removing it.
func (q *fifo[T]) peek() (T, bool) {
	if q.n == 0 {
		var zero T
		return zero, false
	}
	return q.buf[q.head], true
}

// pop removes and returns the oldest item. Once the queue is down to a
// quarter of its ring the ring is halved, down to fifoMinCap, so a burst
// does not pin its high-water mark for the member's lifetime; halving at a
// quarter, not at a half, keeps a queue hovering at one size from
// reallocating on every push and pop.
func (q *fifo[T]) pop() (T, bool) {
	var zero T
	if q.n == 0 {
		return zero, false
	}
	v := q.buf[q.head]
	q.buf[q.head] = zero // the ring must not keep the item's memory alive
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	if len(q.buf) > fifoMinCap && q.n <= len(q.buf)/4 {
		q.resize(len(q.buf) / 2)
	}
	return v, true
}

// resize moves the items, oldest first, into a new ring of capacity c >= n.
func (q *fifo[T]) resize(c int) {
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
