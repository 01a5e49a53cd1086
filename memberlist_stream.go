package swim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim/internal/wire"
)

// errStreamsBusy is the outcome reported for an outbound exchange that found
// MaxConcurrentStreams exchanges already in flight.
var errStreamsBusy = errors.New("swim: too many stream exchanges in flight (MaxConcurrentStreams)")

// streamResult is the outcome of one outbound exchange.
type streamResult struct {
	id   uint64
	data []byte
	err  error
}

// startStream runs one outbound exchange on a goroutine of its own, which
// feeds the outcome to the machine. It runs under ml.mu, as the output of an
// input is taken. With every slot taken, the exchange is not started and
// fails at once; the loop reports that on its next pass (the machine may
// not be re-entered from its own output).
func (ml *Memberlist) startStream(req StreamRequest) {
	select {
	case ml.outSem <- struct{}{}:
	default:
		ml.streamsRefused.Add(1)
		ml.refusals.Warn(refusalOutboundSlots, zap.Stringer("to", req.To), zap.Int("max", ml.cfg.MaxConcurrentStreams))
		ml.refused = append(ml.refused, streamResult{id: req.ID, err: errStreamsBusy})
		return
	}
	ml.wg.Add(1)
	go func() {
		defer ml.wg.Done()
		defer func() { <-ml.outSem }()
		data, err := ml.exchange(req)
		r := streamResult{id: req.ID, data: data, err: err}
		// After Shutdown the outcome is dropped: nobody waits for it.
		_ = ml.input(func(time.Time) { ml.handleStreamResult(r) })
	}()
}

// exchange dials req.To, writes the request and reads one reply, all within
// req.Timeout; Shutdown cuts it short.
func (ml *Memberlist) exchange(req StreamRequest) ([]byte, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = ml.cfg.StreamTimeout
	}
	ctx, cancel := context.WithTimeout(ml.ctx, timeout)
	defer cancel()
	conn, err := ml.transport.DialStream(ctx, req.To)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Closing the connection is what unblocks a read or write when the
	// context ends before the deadline (Shutdown).
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	sc, err := ml.dialTLS(ctx, conn, req.To)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	msg, err := ml.sealStream(ml.withLocalState(req.Data))
	if err != nil {
		return nil, err
	}
	if err := wire.WriteStreamMessage(sc, msg); err != nil {
		return nil, fmt.Errorf("write request: %w", ctxErr(ctx, err))
	}
	resp, err := ml.readStreamMessage(sc, conn.RemoteAddr())
	if err != nil {
		return nil, fmt.Errorf("read reply: %w", ctxErr(ctx, err))
	}
	return ml.openStream(req.To, resp)
}

// ctxErr prefers the context's error (shutdown, timeout) to the I/O error it
// caused by closing the connection.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// serveStream answers one accepted stream on a goroutine of its own: it reads
// one request, feeds it to the machine, writes the machine's reply and
// closes. It runs on the loop goroutine; a stream that gets no slot
// (admitStream) is closed at once (the peer sees a failed exchange and
// retries later).
func (ml *Memberlist) serveStream(conn net.Conn) {
	if !ml.sourceAdmitted(conn) { // Security.AllowedCIDRs, before a slot is taken or a byte read
		_ = conn.Close()
		return
	}
	st, ok := ml.admitStream(conn)
	if !ok {
		_ = conn.Close()
		return
	}
	ml.wg.Add(1)
	go func() {
		defer ml.wg.Done()
		defer ml.inStreams.release(st)
		defer conn.Close()
		if err := ml.answer(conn, st); err != nil {
			ml.logger.Debug("inbound stream failed", zap.Stringer("from", conn.RemoteAddr()), zap.Error(err))
		}
	}()
}

func (ml *Memberlist) answer(conn net.Conn, st *inboundStream) error {
	stop := context.AfterFunc(ml.ctx, func() { _ = conn.Close() })
	defer stop()
	deadline := time.Now().Add(ml.cfg.StreamTimeout)
	_ = conn.SetDeadline(deadline)
	from := addrPortOf(conn.RemoteAddr())
	if ml.sec.tls != nil {
		// The handshake, like the request's first bytes, must come soon:
		// an idle connection must not hold a slot for StreamTimeout.
		_ = conn.SetDeadline(time.Now().Add(min(ml.cfg.firstBytesTimeout(), ml.cfg.StreamTimeout)))
	}
	sc, err := ml.acceptTLS(conn)
	if err != nil {
		return ctxErr(ml.ctx, err)
	}
	_ = conn.SetDeadline(deadline)
	data, release, err := ml.readRequest(sc, deadline)
	if err != nil {
		return fmt.Errorf("read request: %w", ctxErr(ml.ctx, err))
	}
	defer release()
	if data, err = ml.openStream(from, data); err != nil {
		return err
	}
	ml.inStreams.authenticate(st)
	var reply []byte
	var handleErr error
	if err := ml.input(func(now time.Time) {
		if wire.IsUser(data) && !ml.roomForReliable(len(data)) {
			handleErr = errMessageBufferFull
			return
		}
		reply, handleErr = ml.machine.HandleStream(now, from, data)
	}); err != nil {
		return err
	}
	if handleErr != nil {
		return fmt.Errorf("handle request: %w", handleErr)
	}
	if ml.cfg.State != nil && wire.IsPushPull(reply) {
		// The request's state was merged by now (input's output): the
		// reply carries this member's state with the peer's in it.
		_, join, _ := wire.PushPullHead(data)
		reply = ml.appendLocalState(reply, join)
	}
	msg, err := ml.sealStream(reply)
	if err != nil {
		return err
	}
	if err := wire.WriteStreamMessage(sc, msg); err != nil {
		return fmt.Errorf("write reply: %w", ctxErr(ml.ctx, err))
	}
	return nil
}

// errMessageBufferFull refuses a reliable message while the messages
// waiting for the Messages handler fill MessageBuffer or
// MessageBufferBytes: refused before it is acknowledged, it fails the
// sender's SendReliable instead of being lost after it.
var errMessageBufferFull = errors.New("swim: message buffer full, reliable message refused")

// roomForReliable reports whether a reliable message whose request is n
// bytes (its payload and a few more) would be queued for the Messages
// handler; without a handler the Machine's delivery counts it as
// unhandled, as any message. A refusal is counted as a dropped message.
// The caller holds ml.mu.
func (ml *Memberlist) roomForReliable(n int) bool {
	if ml.cfg.Messages == nil || ml.events.roomForMessage(n, ml.cfg.MessageBuffer, ml.cfg.messageBufferBytes()) {
		return true
	}
	ml.messagesDropped.Add(1)
	return false
}

// addrPortOf converts a net.Addr to netip.AddrPort; the zero value when it
// has none (a custom transport's conn may use another address type).
func addrPortOf(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		return unmapAddrPort(a.AddrPort())
	case *net.UDPAddr:
		return unmapAddrPort(a.AddrPort())
	case nil:
		return netip.AddrPort{}
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}
