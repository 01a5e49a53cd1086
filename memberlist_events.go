package swim

import (
	"reflect"
	"runtime"
	"sync"

	"github.com/swim-go/swim/internal/fifo"
	"go.uber.org/zap"
)

// eventQueue holds the events waiting for the Events handler and the
// messages waiting for the Messages handler, in the order the Machine made
// them. It is a fifo under a mutex rather than a buffered channel: a
// channel allocates all its slots up front (about 100 KiB per member at the
// default 1,024 events), while the queue is nearly always empty. The
// goroutine that feeds the Machine an input pushes (under Memberlist.mu,
// so they keep the Machine's order), the dispatcher pops; wake (capacity
// 1) tells the dispatcher there is work.
type eventQueue struct {
	mu           sync.Mutex
	queue        fifo.Queue[delivery]
	events       int // events in queue
	messages     int // messages in queue
	messageBytes int // their payloads' bytes
	wake         chan struct{}
}

// delivery is one item for the dispatcher: an event, or a message when msg
// is set.
type delivery struct {
	event Event
	msg   *Message
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1)}
}

// queueEvent hands an event to the dispatcher without blocking: a slow
// Events handler must not stall probing. The caller holds ml.mu. With EventBuffer events
// already waiting the event is dropped and counted; the first drop of a run
// is logged as a warning (one line per overflow, not one per event).
func (ml *Memberlist) queueEvent(e Event) {
	if ml.cfg.Events == nil {
		return // no handler: nothing to deliver to
	}
	if !ml.events.push(delivery{event: e}, ml.cfg.EventBuffer, 0) {
		ml.eventsDropped.Add(1)
		if !ml.dropping {
			ml.dropping = true
			ml.logger.Warn("event buffer full, dropping events; the Events handler is too slow",
				zap.Int("buffer", ml.cfg.EventBuffer), zap.Stringer("kind", e.Kind), zap.String("about", e.Member.Name))
		}
		return
	}
	ml.dropping = false
}

// queueMessage hands an application message to the dispatcher, as
// queueEvent does an event, bounded by MessageBuffer. Without a Messages
// handler it is dropped and counted. The caller holds ml.mu.
func (ml *Memberlist) queueMessage(msg Message) {
	if ml.cfg.Messages == nil {
		ml.messagesUnhandled.Add(1)
		return
	}
	if !ml.events.push(delivery{msg: &msg}, ml.cfg.MessageBuffer, ml.cfg.messageBufferBytes()) {
		ml.messagesDropped.Add(1)
		if !ml.droppingMessages {
			ml.droppingMessages = true
			ml.logger.Warn("message buffer full, dropping messages; the Messages handler is too slow",
				zap.Int("buffer", ml.cfg.MessageBuffer), zap.Int("buffer_bytes", ml.cfg.messageBufferBytes()),
				zap.Stringer("kind", msg.Kind), zap.String("from", msg.From))
		}
		return
	}
	ml.droppingMessages = false
}

// push queues d unless limit items of its kind wait already or, for a
// message, its payload would take the messages' bytes past byteLimit; it
// wakes the dispatcher and reports whether d was queued. An event's bytes
// need no bound of their own: its member's name and metadata are bounded.
func (q *eventQueue) push(d delivery, limit, byteLimit int) bool {
	q.mu.Lock()
	var full bool
	if d.msg != nil {
		full = q.messages >= limit || q.messageBytes+len(d.msg.Payload) > byteLimit
		if !full {
			q.messages++
			q.messageBytes += len(d.msg.Payload)
		}
	} else {
		full = q.events >= limit
		if !full {
			q.events++
		}
	}
	if !full {
		q.queue.Push(d)
	}
	q.mu.Unlock()
	if full {
		return false
	}
	// A token already waiting covers this item too: the dispatcher
	// empties the queue on every wake.
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// roomForMessage reports whether a message of n payload bytes would be
// queued now. The caller holds Memberlist.mu, under which every message is
// pushed, so the answer holds until it lets go.
func (q *eventQueue) roomForMessage(n, limit, byteLimit int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.messages < limit && q.messageBytes+n <= byteLimit
}

func (q *eventQueue) pop() (delivery, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.queue.Pop()
	if ok {
		if d.msg != nil {
			q.messages--
			q.messageBytes -= len(d.msg.Payload)
		} else {
			q.events--
		}
	}
	return d, ok
}

// dispatch is the dispatcher goroutine: it calls the Events or Messages
// handler for each queued item, one at a time and in order, holding no
// lock, so a handler may call any Memberlist method. It ends at Shutdown,
// dropping the items still queued.
func (ml *Memberlist) dispatch() {
	defer close(ml.dispatcherDone)
	q := ml.events
	for {
		select {
		case <-ml.stop:
			return
		case <-q.wake:
		}
		for {
			// Checked before every item, not only when waiting: nothing
			// is delivered once Shutdown began.
			select {
			case <-ml.stop:
				return
			default:
			}
			d, ok := q.pop()
			if !ok {
				break
			}
			ml.inCallback.Store(true)
			callHandler(ml.cfg.Events, ml.cfg.Messages, d)
			ml.inCallback.Store(false)
		}
	}
}

// callHandler calls the handler for d, on the dispatcher. Its frame on a
// goroutine's stack is what tells Shutdown that it was called from a
// callback (calledFromCallback), so it must stay a frame of its own.
//
//go:noinline
func callHandler(events EventHandler, messages MessageHandler, d delivery) {
	if d.msg != nil {
		messages.HandleMessage(*d.msg)
	} else {
		events.HandleEvent(d.event)
	}
}

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
