package swim

import (
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// maxPacketBatch bounds how many queued packets the loop feeds the machine
// before acting on its output, so a burst costs one pass over Ready, not one
// per packet, while the deadline still gets its turn.
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

// run is the loop goroutine: it waits for the machine's deadline, and for
// the packets and streams of a transport that delivers them on channels.
// At the deadline it feeds the packets already waiting, reports the
// exchanges refused for want of a slot and fires the machine's timers; a
// packet it feeds with the packets queued behind it, up to maxPacketBatch;
// a stream it hands to a goroutine of its own (serveStream). The packets of
// a PacketHandlerTransport, the outcomes of exchanges and the API calls are
// fed where they arrive, not here (see Memberlist).
func (ml *Memberlist) run() {
	defer ml.wg.Done()
	defer close(ml.loopDone)
	packets := ml.transport.Packets()
	streams := ml.transport.Streams()
	for {
		select {
		case <-ml.stop:
			return

		case p, ok := <-packets:
			if !ok {
				ml.logger.Warn("transport closed its packet channel")
				packets = nil
				continue
			}
			if !ml.begin() {
				return
			}
			ml.handlePacket(p)
			ml.takePackets(packets, maxPacketBatch-1)
			ml.end(true)

		case conn, ok := <-streams:
			if !ok {
				ml.logger.Warn("transport closed its stream channel")
				streams = nil
				continue
			}
			ml.serveStream(conn)

		case <-ml.timer.C:
			if !ml.begin() {
				return
			}
			ml.armed = time.Time{}
			// Packets that arrived while this process could not run (a GC
			// pause, CPU starvation) go first: an ack waiting in the
			// queue must end its probe before the probe's deadline fires,
			// or a slow member would accuse a peer that did answer.
			ml.takePackets(packets, maxPacketBatch)
			refused := ml.refused
			ml.refused = nil
			for _, r := range refused {
				ml.handleStreamResult(r)
			}
			start := time.Now()
			ml.tickIfDue(start)
			ml.paceMerge(start)
			ml.end(false)
		}
	}
}

// mergeRestDivisor sets the time the loop leaves the lock free after a
// slice of a large merge while packets arrive: the slice's own time
// divided by it (paceMerge). At 4, a member pinged every millisecond
// during a 100,000-member merge (BenchmarkLargeMergeLockHold) answered
// every ping within 26-40 ms, against 40-71 ms without pacing, and the
// merge took 10-20% longer; 2 and 1 answered no faster and made the merge
// take up to twice as long.
const mergeRestDivisor = 4

// paceMerge spaces the slices of a large merge (pushpull.go), each of them
// due at once, while packets are arriving: the next slice then waits for a
// time proportional to this one's (mergeRestDivisor), leaving the lock free
// meanwhile, so that the packets that arrived during a slice are all
// handled before the next one rather than one per slice, which under a
// steady stream of packets leaves the reader ever further behind. Without
// packets the slices follow each other at once. start is when this pass
// began its slice. The caller holds ml.mu.
func (ml *Memberlist) paceMerge(start time.Time) {
	if !ml.machine.Status().Merging {
		return
	}
	if ml.fed != ml.fedAtSlice {
		now := time.Now()
		ml.mergeRest = now.Add(now.Sub(start) / mergeRestDivisor)
	}
	ml.fedAtSlice = ml.fed
}

// takePackets feeds the machine up to n packets already waiting in
// packets, without waiting for more. The caller holds ml.mu.
func (ml *Memberlist) takePackets(packets <-chan IncomingPacket, n int) {
	for range n {
		select {
		case p, ok := <-packets:
			if !ok {
				return
			}
			ml.handlePacket(p)
		default:
			return
		}
	}
}

// receive handles one packet on the transport's reader goroutine, for a
// transport that offers it (PacketHandlerTransport): the packet is fed to the
// machine and the answer sent from here, without waking the loop, which a
// hand-off through the Packets channel costs for every packet.
func (ml *Memberlist) receive(p IncomingPacket) {
	// Opened before the lock: refused traffic costs the protocol nothing.
	data, ok := ml.openPacket(p.From, p.Data, &ml.sec.rxBuf)
	if !ok || !ml.begin() {
		return
	}
	ml.feedPacket(p.From, data)
	// The slices of a large merge are the loop's to apply: here they would
	// delay every ack by one, and a steady stream of packets would leave
	// the reader ever further behind.
	ml.end(!ml.machine.Status().Merging)
}

// input feeds the machine one input, f, on the calling goroutine, and
// returns once the input's output has been acted on: its events queued,
// its exchanges started and its packets handed to the transport. It
// returns ErrShutdown, without calling f, once Shutdown has begun.
func (ml *Memberlist) input(f func(now time.Time)) error {
	if !ml.begin() {
		return ErrShutdown
	}
	f(time.Now())
	ml.end(true)
	return nil
}

// begin takes ml.mu to feed the machine an input. It reports false, not
// holding it, once Shutdown has begun.
func (ml *Memberlist) begin() bool {
	ml.mu.Lock()
	if ml.closed {
		ml.mu.Unlock()
		return false
	}
	return true
}

// end finishes an input begun with begin: it fires the machine's timers if
// they are due (and tick is set), takes the machine's output, releases
// ml.mu and then sends the output's packets.
func (ml *Memberlist) end(tick bool) {
	if tick {
		ml.tickIfDue(time.Now())
	}
	out := ml.output()
	ml.logTableRefusals()
	ml.mu.Unlock()
	ml.send(out)
}

// Kinds of the Machine's refusals, as the refusal log names them.
const (
	refusalMember   = "new member not added: the table holds MaxMembers (or a shared Registry its most versions)"
	refusalPushPull = "push-pull refused: over MaxMembers, or too many merges in progress"
)

// logTableRefusals logs the Machine's refusals of members and push-pulls
// since the last input, at most once per kind per 10 s: the Machine only
// counts them, and an operator should learn that a peer floods the table.
// Two counters compared per input. The caller holds ml.mu.
func (ml *Memberlist) logTableRefusals() {
	st := ml.machine.Status()
	ml.logRefusalsSince(refusalMember, st.MembersRefused, &ml.membersRefusedSeen)
	ml.logRefusalsSince(refusalPushPull, st.PushPullsRefused, &ml.pushPullsRefusedSeen)
}

// logRefusalsSince logs the refusals of kind that the counter n holds
// beyond *seen, and marks them seen.
func (ml *Memberlist) logRefusalsSince(kind string, n uint64, seen *uint64) {
	if n == *seen {
		return
	}
	ml.refusals.Warn(kind, zap.Uint64("refused", n-*seen), zap.Int("max", ml.cfg.MaxMembers))
	*seen = n
}

// tickIfDue fires the machine's timers if its deadline has come. The caller
// holds ml.mu.
func (ml *Memberlist) tickIfDue(now time.Time) {
	if d := ml.machine.NextDeadline(); !d.IsZero() && !now.Before(d) {
		ml.machine.Tick(now)
	}
}

// rearm sets the loop's timer for the machine's deadline, but no earlier
// than mergeRest while a large merge is in progress (which delays the
// other timers due meanwhile by at most one merge slice's time), or to
// fire at once while refused exchanges wait to be reported. Reset is
// cheap, but most inputs leave the deadline alone, so the timer is touched
// only when it moved. The caller holds ml.mu.
func (ml *Memberlist) rearm() {
	d := ml.machine.NextDeadline()
	if ml.machine.Status().Merging && d.Before(ml.mergeRest) {
		d = ml.mergeRest
	}
	if len(ml.refused) > 0 {
		if now := time.Now(); d.IsZero() || d.After(now) {
			d = now
		}
	}
	if d.Equal(ml.armed) {
		return
	}
	if d.IsZero() {
		ml.timer.Stop()
	} else {
		ml.timer.Reset(time.Until(d))
	}
	ml.armed = d
}

// handlePacket opens one received packet's envelope (memberlist_security.go) and feeds
// the packet to the machine. The caller holds ml.mu, which guards the
// buffer it opens into.
func (ml *Memberlist) handlePacket(p IncomingPacket) {
	if data, ok := ml.openPacket(p.From, p.Data, &ml.sec.loopBuf); ok {
		ml.feedPacket(p.From, data)
	}
}

// feedPacket feeds one opened packet to the machine. The machine counts
// what it drops (Stats.PacketsDropped); the reason is only worth a debug line
// since anyone can send garbage to a UDP port.
func (ml *Memberlist) feedPacket(from netip.AddrPort, data []byte) {
	ml.fed++
	if err := ml.machine.HandlePacket(time.Now(), from, data); err != nil {
		ml.logger.Debug("packet dropped", zap.Stringer("from", from), zap.Error(err))
	}
}

// handleStreamResult feeds the outcome of an outbound exchange to the machine
// and, when a Join waits for it, to that Join. The caller holds ml.mu.
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

// output is what is left of an input's output once ml.mu is released.
type output struct {
	packets   []Packet
	states    []RemoteState // for Config.State, outside the lock
	acks      []AckInfo     // for Config.Pings, outside the lock
	leaveDone chan struct{} // to close once the packets are sent: Leave may return
	counted   bool          // in ml.sending
}

// output takes the machine's output: it starts the exchanges, queues the
// events (under ml.mu, which keeps them in the machine's order whichever
// goroutine fed the input), notes a leave that has been sent enough times,
// and re-arms the loop's timer. The packets are left for send. The caller
// holds ml.mu.
func (ml *Memberlist) output() output {
	m := ml.machine
	rd := m.Ready()
	for _, req := range rd.Streams {
		if w, ok := ml.joins[req.ID]; ok {
			w.to = req.To.String()
		}
		ml.startStream(req)
	}
	var at time.Time
	if len(rd.Events) > 0 { // most inputs have none: no clock read for them
		at = time.Now()
	}
	for _, e := range rd.Events {
		e.Time = at
		if e.Kind == EventConflict {
			ml.logger.Warn("another live process uses this member's name; rename or stop one of them",
				zap.Stringer("other_addr", e.Member.Addr))
		}
		ml.queueEvent(e)
	}
	for _, msg := range rd.Messages {
		ml.queueMessage(msg)
	}
	if ml.room != nil && !m.Status().BroadcastBackedUp {
		close(ml.room)
		ml.room = nil
	}
	for _, o := range rd.Outcomes {
		// Both channels are buffered: the caller may have stopped waiting.
		if ch, ok := ml.outcomes[o.ID]; ok {
			delete(ml.outcomes, o.ID)
			ch <- o.Err
		} else if ch, ok := ml.pings[o.ID]; ok {
			delete(ml.pings, o.ID)
			ch <- o
		}
	}
	out := output{packets: rd.Packets}
	if ml.cfg.State != nil {
		out.states = rd.States
	}
	if ml.cfg.Pings != nil {
		out.acks = rd.Acks
	}
	if ml.leaveDone != nil && !ml.leaveShown && m.Status().LeaveDone {
		ml.leaveShown = true
		out.leaveDone = ml.leaveDone
	}
	ml.rearm()
	if len(out.packets) > 0 || out.leaveDone != nil {
		ml.sending.Add(1)
		out.counted = true
	}
	return out
}

// send hands an input's packets to the transport, without holding ml.mu,
// then wakes a Leave waiting for them.
func (ml *Memberlist) send(out output) {
	if len(out.states) > 0 {
		ml.mergeStates(out.states)
	}
	for _, a := range out.acks {
		ml.cfg.Pings.NotifyPingComplete(a.From, a.RTT, a.Payload)
	}
	if !out.counted {
		return
	}
	defer ml.sending.Done()
	for _, p := range out.packets {
		data, ok := ml.sealPacket(p.Data)
		if !ok {
			continue
		}
		if err := ml.transport.WriteTo(data, p.To); err != nil {
			ml.logger.Debug("packet not sent", zap.Stringer("to", p.To), zap.Error(err))
		}
	}
	if out.leaveDone != nil {
		close(out.leaveDone)
	}
}
