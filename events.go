package swim

import (
	"reflect"
	"runtime"
	"sync"

	"go.uber.org/zap"
)

// eventQueue holds the events waiting for the Events handler. It is a fifo
// under a mutex rather than a buffered channel: a channel allocates all
// EventBuffer slots up front (about 100 KiB per member at the default
// 1,024), while the queue is nearly always empty. The goroutine that feeds
// the Machine an input pushes its events (under Memberlist.mu, so they keep
// the Machine's order), the dispatcher pops; wake (capacity 1) tells the
// dispatcher there is work.
type eventQueue struct {
	mu    sync.Mutex
	queue fifo[Event]
	wake  chan struct{}
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1)}
}

// queueEvent hands an event to the dispatcher without blocking: a slow
// Events handler must not stall probing. The caller holds ml.mu. With EventBuffer events
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
			ml.inCallback.Store(true)
			callHandler(h, e)
			ml.inCallback.Store(false)
		}
	}
}

// callHandler calls h for e, on the dispatcher. Its frame on a goroutine's
// stack is what tells Shutdown that it was called from an event callback
// (calledFromCallback), so it must stay a frame of its own.
//
//go:noinline
func callHandler(h EventHandler, e Event) { h.HandleEvent(e) }

// callHandlerEntry is callHandler's entry address, as stack frames report
// it.
var callHandlerEntry = reflect.ValueOf(callHandler).Pointer()

// calledFromCallback reports whether the calling goroutine is this
// Memberlist's dispatcher, inside the Events handler: Shutdown must not wait
// for the dispatcher then, which would wait for itself. Go gives goroutines
// no identity, so the answer comes from the call stack: a callHandler frame
// on it while this Memberlist's dispatcher is in the handler. It can be
// wrong one way only: a goroutine running the callback of another
// Memberlist of the process, calling this one's Shutdown while this one's
// handler runs too, is taken for this dispatcher, and that Shutdown returns
// before the handler does (the dispatcher ends as soon as it has). The
// other way would deadlock.
func (ml *Memberlist) calledFromCallback() bool {
	if !ml.inCallback.Load() {
		return false
	}
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs)) // a deep stack: take it whole
	}
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Entry == callHandlerEntry {
			return true
		}
		if !more {
			return false
		}
	}
}
