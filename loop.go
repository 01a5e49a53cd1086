package swim

import (
	"math"
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// maxPacketBatch bounds how many queued packets the loop feeds the machine
// before acting on its output, so a burst costs one pass over Ready, not one
// per packet, while timers and API calls still get their turn.
const maxPacketBatch = 64

// joinWaiter routes the outcome of one outbound exchange back to Join.
type joinWaiter struct {
	results chan<- joinResult // buffered for every exchange of that Join
	to      string            // the seed, filled in when the exchange starts
}

// joinResult is what Join learns about one seed.
type joinResult struct {
	to  string
	err error // nil when the seed answered and its state was merged
}

// alwaysReady is a closed channel: a select case on it is always ready. The
// loop enables it while refused exchanges wait to be reported.
var alwaysReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// run is the loop goroutine. It waits for the next input (a packet, the
// outcome of an outbound exchange, an inbound request, an API call, an
// accepted stream, the machine's deadline, or a kick from a packet handled on
// the transport's goroutine), feeds it to the machine, fires the timers that
// are due, and acts on the machine's output. Everything between the wake-up
// and the end of the pass runs under ml.mu; the wait itself does not.
func (ml *Memberlist) run() {
	defer ml.wg.Done()
	defer close(ml.loopDone)
	m := ml.machine

	timer := time.NewTimer(math.MaxInt64)
	timer.Stop()
	defer timer.Stop()
	packets := ml.transport.Packets()
	streams := ml.transport.Streams()

	for {
		ml.mu.Lock()
		// Arm the timer only when the deadline moved: Reset is cheap, but
		// most inputs leave the deadline alone.
		if d := m.NextDeadline(); !d.Equal(ml.armed) {
			if d.IsZero() {
				timer.Stop()
			} else {
				timer.Reset(time.Until(d))
			}
			ml.armed = d
		}
		var reportRefused <-chan struct{}
		if len(ml.refused) > 0 {
			reportRefused = alwaysReady
		}
		ml.mu.Unlock()
		var finished chan struct{} // the API call of this pass, if any

		select {
		case <-ml.stop:
			ml.mu.Lock()
			ml.finalStats = m.Stats()
			ml.closed = true
			ml.mu.Unlock()
			return

		case p, ok := <-packets:
			if !ok {
				ml.logger.Warn("transport closed its packet channel")
				packets = nil
				continue
			}
			ml.mu.Lock()
			ml.handlePacket(p)
		batch:
			for range maxPacketBatch - 1 {
				select {
				case p, ok := <-packets:
					if !ok {
						break batch
					}
					ml.handlePacket(p)
				default:
					break batch
				}
			}

		case <-ml.kick:
			// A packet handled on the transport's goroutine moved the
			// deadline earlier or left refused exchanges to report.
			ml.mu.Lock()

		case r := <-ml.streamResults:
			ml.mu.Lock()
			ml.handleStreamResult(r)

		case <-reportRefused:
			ml.mu.Lock()
			refused := ml.refused
			ml.refused = nil
			for _, r := range refused {
				ml.handleStreamResult(r)
			}

		case req := <-ml.inbound:
			ml.mu.Lock()
			reply, err := m.HandleStream(time.Now(), req.from, req.data)
			req.reply <- inboundReply{data: reply, err: err} // buffered

		case call := <-ml.calls:
			ml.mu.Lock()
			call.f(time.Now())
			finished = call.done

		case conn, ok := <-streams:
			if !ok {
				ml.logger.Warn("transport closed its stream channel")
				streams = nil
				continue
			}
			ml.serveStream(conn) // takes no lock: it only starts a goroutine
			ml.mu.Lock()

		case <-timer.C:
			ml.mu.Lock()
			ml.armed = time.Time{}
			// Packets that arrived while this process could not run (a GC
			// pause, CPU starvation) go first: an ack waiting in the
			// queue must end its probe before the probe's deadline fires,
			// or a slow member would accuse a peer that did answer.
		drain:
			for range maxPacketBatch {
				select {
				case p, ok := <-packets:
					if !ok {
						break drain
					}
					ml.handlePacket(p)
				default:
					break drain
				}
			}
		}

		ml.tickIfDue(time.Now())
		ml.flush()
		ml.mu.Unlock()
		if finished != nil {
			// Only now: the call's packets and events are on their way.
			close(finished)
		}
	}
}

// tickIfDue fires the machine's timers if its deadline has come. The caller
// holds ml.mu.
func (ml *Memberlist) tickIfDue(now time.Time) {
	if d := ml.machine.NextDeadline(); !d.IsZero() && !now.Before(d) {
		ml.machine.Tick(now)
	}
}

// receive handles one packet on the transport's reader goroutine, for a
// transport that offers it (PacketHandlerTransport): the packet is fed to the
// machine and the answer sent from here, without waking the loop, which a
// hand-off through the Packets channel costs for every packet. The loop is
// kicked only when it must re-arm its timer earlier or report refused
// exchanges.
func (ml *Memberlist) receive(p IncomingPacket) {
	// Opened before the lock: refused traffic costs the protocol nothing.
	data, ok := ml.openPacket(p.From, p.Data, &ml.sec.rxBuf)
	if !ok {
		return
	}
	ml.mu.Lock()
	if ml.closed {
		ml.mu.Unlock()
		return
	}
	ml.feedPacket(p.From, data)
	if len(ml.machine.merges) == 0 {
		// The slices of a large merge are the loop's to apply: here they
		// would delay every ack by one, and a steady stream of packets
		// would leave the reader ever further behind.
		ml.tickIfDue(time.Now())
	}
	ml.flush()
	d := ml.machine.NextDeadline()
	kick := len(ml.refused) > 0 || !d.IsZero() && (ml.armed.IsZero() || d.Before(ml.armed))
	ml.mu.Unlock()
	if kick {
		select {
		case ml.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
}

// apiCall is a method call run on the loop goroutine against the machine.
type apiCall struct {
	f    func(now time.Time)
	done chan struct{} // closed once f ran and its output was acted on
}

// handlePacket opens one received packet's envelope (security.go) and feeds
// the packet to the machine.
func (ml *Memberlist) handlePacket(p IncomingPacket) {
	if data, ok := ml.openPacket(p.From, p.Data, &ml.sec.loopBuf); ok {
		ml.feedPacket(p.From, data)
	}
}

// feedPacket feeds one opened packet to the machine. The machine counts
// what it drops (Stats.PacketsDropped); the reason is only worth a debug line
// since anyone can send garbage to a UDP port.
func (ml *Memberlist) feedPacket(from netip.AddrPort, data []byte) {
	if err := ml.machine.HandlePacket(time.Now(), from, data); err != nil {
		ml.logger.Debug("packet dropped", zap.Stringer("from", from), zap.Error(err))
	}
}

// handleStreamResult feeds the outcome of an outbound exchange to the machine
// and, when a Join waits for it, to that Join.
func (ml *Memberlist) handleStreamResult(r streamResult) {
	err := ml.machine.HandleStreamResponse(time.Now(), r.id, r.data, r.err)
	if err != nil {
		ml.logger.Debug("stream exchange failed", zap.Uint64("stream", r.id), zap.Error(err))
	}
	if w, ok := ml.joins[r.id]; ok {
		delete(ml.joins, r.id)
		if err == nil && r.err != nil {
			err = r.err // a core that shrugs off a failed exchange must not count it as an answer
		}
		w.results <- joinResult{to: w.to, err: err}
	}
}

// flush acts on the machine's output: sends packets, starts exchanges,
// queues events and wakes a waiting Leave. The caller holds ml.mu, which
// keeps events in order whichever goroutine produced them.
func (ml *Memberlist) flush() {
	m := ml.machine
	rd := m.Ready()
	for _, p := range rd.Packets {
		data, ok := ml.sealPacket(p.Data)
		if !ok {
			continue
		}
		if err := ml.transport.WriteTo(data, p.To); err != nil {
			ml.logger.Debug("packet not sent", zap.Stringer("to", p.To), zap.Error(err))
		}
	}
	for _, req := range rd.Streams {
		if w, ok := ml.joins[req.ID]; ok {
			w.to = req.To.String()
		}
		ml.startStream(req)
	}
	for _, e := range rd.Events {
		ml.queueEvent(e)
	}
	if ml.leaveDone != nil && m.LeaveDone() {
		select {
		case <-ml.leaveDone:
		default:
			close(ml.leaveDone)
		}
	}
}
