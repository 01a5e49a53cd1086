package swim

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"

	"go.uber.org/zap"
)

// eventQueue holds the events waiting for the Events handler. It is a fifo
// under a mutex rather than a buffered channel: a channel allocates all
// EventBuffer slots up front (about 100 KiB per member at the default
// 1,024), while the queue is nearly always empty. The loop pushes, the
// dispatcher pops; wake (capacity 1) tells the dispatcher there is work.
type eventQueue struct {
	mu    sync.Mutex
	queue fifo[Event]
	wake  chan struct{}
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1)}
}

// queueEvent hands an event to the dispatcher without blocking the loop: a
// slow Events handler must not stall probing. With EventBuffer events
// already waiting the event is dropped and counted; the first drop of a run
// is logged as a warning (one line per overflow, not one per event).
func (ml *Memberlist) queueEvent(e Event) {
	q := ml.events
	if q == nil {
		return // no handler: nothing to deliver to
	}
	q.mu.Lock()
	full := q.queue.len() >= ml.cfg.EventBuffer
	if !full {
		q.queue.push(e)
	}
	q.mu.Unlock()
	if full {
		ml.eventsDropped.Add(1)
		if !ml.dropping {
			ml.dropping = true
			ml.logger.Warn("event buffer full, dropping events; the Events handler is too slow",
				zap.Int("buffer", ml.cfg.EventBuffer), zap.Stringer("kind", e.Kind), zap.String("about", e.Member.Name))
		}
		return
	}
	ml.dropping = false
	// A token already waiting covers this event too: the dispatcher
	// empties the queue on every wake.
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// dispatch is the event goroutine: it calls h for each queued event, one at a
// time and in order, holding no lock, so h may call any Memberlist method.
// It ends at Shutdown, dropping the events still queued.
func (ml *Memberlist) dispatch(h EventHandler) {
	defer close(ml.dispatcherDone)
	ml.dispatcherID.Store(goroutineID())
	q := ml.events
	for {
		select {
		case <-ml.stop:
			return
		case <-q.wake:
		}
		for {
			// Checked before every event, not only when waiting: nothing
			// is delivered once Shutdown began.
			select {
			case <-ml.stop:
				return
			default:
			}
			q.mu.Lock()
			e, ok := q.queue.pop()
			q.mu.Unlock()
			if !ok {
				break
			}
			h.HandleEvent(e)
		}
	}
}

// goroutineID returns the id of the calling goroutine, parsed from the header
// of its stack trace ("goroutine 42 [running]:"). Shutdown uses it for one
// thing: to recognise that it was called from an event callback, where
// waiting for the dispatcher would wait for itself. Go exposes no other way.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
