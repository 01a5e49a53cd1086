package swim

import (
	"bytes"
	"runtime"
	"strconv"

	"go.uber.org/zap"
)

// queueEvent hands an event to the dispatcher without blocking the loop: a
// slow Events handler must not stall probing. With EventBuffer events
// already waiting the event is dropped and counted; the first drop of a run
// is logged as a warning (one line per overflow, not one per event).
func (ml *Memberlist) queueEvent(e Event) {
	if ml.dispatcherDone == nil {
		return // no handler: nothing to deliver to
	}
	select {
	case ml.events <- e:
		ml.dropping = false
	default:
		ml.eventsDropped.Add(1)
		if !ml.dropping {
			ml.dropping = true
			ml.logger.Warn("event buffer full, dropping events; the Events handler is too slow",
				zap.Int("buffer", ml.cfg.EventBuffer), zap.Stringer("kind", e.Kind), zap.String("about", e.Member.Name))
		}
	}
}

// dispatch is the event goroutine: it calls h for each queued event, one at a
// time and in order, holding no lock, so h may call any Memberlist method.
// It ends at Shutdown, dropping the events still queued.
func (ml *Memberlist) dispatch(h EventHandler) {
	defer close(ml.dispatcherDone)
	ml.dispatcherID.Store(goroutineID())
	for {
		select {
		case <-ml.stop:
			return
		case e := <-ml.events:
			// Both cases may be ready at once; stop wins so that nothing is
			// delivered once Shutdown began.
			select {
			case <-ml.stop:
				return
			default:
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
