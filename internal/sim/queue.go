package sim

// eventKind says what a queued event delivers.
type eventKind uint8

const (
	// evTimer: node's timer armed for at; stale unless it is still the
	// node's armed timer in the same generation.
	evTimer eventKind = iota
	// evPacket: data from peer arrives at node.
	evPacket
	// evStreamRequest: stream id from peer (generation peerGen) arrives at
	// node, the server.
	evStreamRequest
	// evStreamResponse: the reply (data, err) of stream id reaches node,
	// the client, in generation gen.
	evStreamResponse
	// evStreamTimeout: stream id of node (generation gen) times out unless
	// its reply came first.
	evStreamTimeout
	// evResume: node's pause, ending at at, is over.
	evResume
	// evStarveHold: node's starvation number id (generation gen) stalls
	// its inputs until its next slice (faults.go).
	evStarveHold
	// evStarveRelease: node's starvation stall is over; its waiting inputs
	// are processed.
	evStarveRelease
	// evChurnJoin, evChurnCrash: Churn number id adds a member, or crashes
	// one (churn.go); node is unused.
	evChurnJoin
	evChurnCrash
)

// event is one entry of the queue. Events are stored by value in the heap so
// that scheduling one allocates nothing once the heap has grown.
type event struct {
	at   int64  // virtual nanoseconds since Epoch
	seq  uint64 // insertion order: ties on at are FIFO
	data []byte
	err  error
	id   uint64 // the simulator's stream id
	kind eventKind
	node int32  // index of the node that handles the event
	peer int32  // index of the other end, for packets and stream requests
	gen  uint32 // generation of node the event belongs to (timers, streams, resume)
	// peerGen is the generation of the client that sent a stream request,
	// carried so the reply can be matched to it.
	peerGen uint32
}

// eventQueue is a binary min-heap ordered by (at, seq). It is hand-written
// rather than container/heap to avoid boxing each event in an interface.
type eventQueue struct {
	items []event
	seq   uint64
}

func (q *eventQueue) len() int { return len(q.items) }

// peekAt is the time of the earliest event; the queue must not be empty.
func (q *eventQueue) peekAt() int64 { return q.items[0].at }

func less(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push adds ev, stamping it with the next sequence number.
func (q *eventQueue) push(ev event) {
	ev.seq = q.seq
	q.seq++
	q.items = append(q.items, ev)
	// Sift up by moving parents down into the hole, then place ev once.
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&ev, &q.items[p]) {
			break
		}
		q.items[i] = q.items[p]
		i = p
	}
	q.items[i] = ev
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	top := q.items[0]
	n := len(q.items) - 1
	last := q.items[n]
	q.items[n] = event{} // drop references to data and err
	q.items = q.items[:n]
	if n > 0 {
		// Sift last down from the root, moving smaller children up.
		i := 0
		for {
			c := 2*i + 1
			if c >= n {
				break
			}
			if r := c + 1; r < n && less(&q.items[r], &q.items[c]) {
				c = r
			}
			if !less(&q.items[c], &last) {
				break
			}
			q.items[i] = q.items[c]
			i = c
		}
		q.items[i] = last
	}
	return top
}
