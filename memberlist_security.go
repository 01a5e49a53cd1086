package swim

import (
	"context"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim/internal/ratelog"
	"github.com/swim-go/swim/internal/wire"
)

// The security envelope in the runtime. Every packet the Machine emits is
// labelled (Config.Label) and sealed under the primary key before it is
// written; every packet received is checked, in this order, against
// Config.Security.AllowedCIDRs, the label and the keyring before the Machine sees
// it, and refused (counted, logged at most once per kind per 10 s)
// otherwise. Stream messages, requests and replies alike, carry the same
// envelope in its stream variant, optionally inside TLS (Config.Security.StreamTLS).
// The envelope's format is in internal/wire/envelope.go.

// security is the runtime's envelope state: what does not change while
// the member runs (the keyring, which does, is ml.keys) and the refusal
// counters.
type security struct {
	label   string
	allowed []netip.Prefix // normalized: IPv4-mapped prefixes as IPv4
	tls     *tls.Config    // a copy of Config.Security.StreamTLS; nil without
	log     *ratelog.Log

	// Buffers that sealed packets are opened into, one per goroutine that
	// opens packets: rxBuf on the transport's reader (receive, which the
	// transport calls one packet at a time), loopBuf on the loop
	// (handlePacket, under ml.mu). The Machine copies what it keeps out of
	// a packet, so each buffer is free again once the packet is handled.
	rxBuf, loopBuf []byte

	refusedSource    atomic.Uint64
	refusedLabel     atomic.Uint64
	refusedPlaintext atomic.Uint64
	refusedKey       atomic.Uint64
	refusedTLS       atomic.Uint64
}

func newSecurity(c *Config, log *ratelog.Log) *security {
	s := &security{label: c.Label, log: log}
	for _, p := range c.Security.AllowedCIDRs {
		// Sources are unmapped (IPv4 as IPv4), so a prefix written as
		// IPv4-mapped IPv6 must be too, or it would match nothing.
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		s.allowed = append(s.allowed, p.Masked())
	}
	if c.Security.StreamTLS != nil {
		s.tls = c.Security.StreamTLS.Clone()
	}
	return s
}

// sourceAllowed reports whether traffic from ip may be read: always when
// Security.AllowedCIDRs is empty, else when a listed network holds ip.
func (s *security) sourceAllowed(ip netip.Addr) bool {
	if len(s.allowed) == 0 {
		return true
	}
	ip = ip.Unmap().WithZone("")
	for _, p := range s.allowed {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Refusal classes, in the order the checks run.
const (
	refusedSource = iota
	refusedLabel
	refusedPlaintext
	refusedKey
	refusedTLS // streams only
)

// refusalKinds are the refusal log's kinds, by envelope kind and class.
var refusalKinds = [2][5]string{
	{"packet from outside Security.AllowedCIDRs", "packet whose label is not this cluster's", "plaintext packet", "packet no installed key opens", ""},
	{"stream from outside Security.AllowedCIDRs", "stream whose label is not this cluster's", "plaintext stream", "stream message no installed key opens", "stream whose TLS handshake failed"},
}

// refuse counts and logs traffic refused for class (refusedSource, ...).
func (s *security) refuse(kind wire.EnvelopeKind, class int, from netip.AddrPort, err error) {
	switch class {
	case refusedSource:
		s.refusedSource.Add(1)
	case refusedLabel:
		s.refusedLabel.Add(1)
	case refusedPlaintext:
		s.refusedPlaintext.Add(1)
	case refusedTLS:
		s.refusedTLS.Add(1)
	default:
		s.refusedKey.Add(1)
	}
	fields := []zap.Field{zap.Stringer("from", from)}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	s.log.Warn(refusalKinds[kind-wire.PacketEnvelope][class], fields...)
}

// refuseEnvelope counts and logs an envelope OpenEnvelope refused.
func (s *security) refuseEnvelope(kind wire.EnvelopeKind, from netip.AddrPort, err error) {
	var ee *wire.EnvelopeError
	switch {
	case errors.As(err, &ee) && ee.Label:
		s.refuse(kind, refusedLabel, from, err)
	case errors.Is(err, wire.ErrPlaintext):
		s.refuse(kind, refusedPlaintext, from, err)
	default:
		s.refuse(kind, refusedKey, from, err)
	}
}

// open checks b's source and envelope and returns the plain packet inside,
// or the refusal (already counted and logged). dst is as for
// wire.OpenEnvelope.
func (ml *Memberlist) open(kind wire.EnvelopeKind, dst []byte, from netip.AddrPort, b []byte) ([]byte, error) {
	s := ml.sec
	if !s.sourceAllowed(from.Addr()) {
		s.refuse(kind, refusedSource, from, nil)
		return nil, fmt.Errorf("swim: %v from %s: source outside Security.AllowedCIDRs", kind, from)
	}
	kr := ml.keys.load()
	data, err := wire.OpenEnvelope(dst, b, kind, s.label, kr.aeads, kr.acceptsPlaintext())
	if err != nil {
		s.refuseEnvelope(kind, from, err)
		return nil, err
	}
	return data, nil
}

// openPacket returns the plain packet in a received datagram, opening it
// into *buf (grown as needed and kept for the next packet), or reports
// false when it was refused.
func (ml *Memberlist) openPacket(from netip.AddrPort, b []byte, buf *[]byte) ([]byte, bool) {
	if cap(*buf) < len(b) {
		*buf = make([]byte, 0, len(b))
	}
	data, err := ml.open(wire.PacketEnvelope, (*buf)[:0], from, b)
	return data, err == nil
}

// sealPacket returns packet in its envelope, ready for the transport: as
// it is when there is neither label nor encryption, else in a new buffer
// (a Transport may keep what it is given). It reports false when the
// packet cannot be sealed, which only a bug can cause; it is then not sent.
func (ml *Memberlist) sealPacket(packet []byte) ([]byte, bool) {
	aead := ml.sealingKey()
	if aead == nil && ml.sec.label == "" {
		return packet, true
	}
	out, err := wire.AppendEnvelope(nil, wire.PacketEnvelope, ml.sec.label, aead, packet)
	if err != nil {
		ml.logger.Error("packet not sealed", zap.Error(err))
		return nil, false
	}
	return out, true
}

// sealingKey is the AEAD outgoing traffic is sealed with, nil when it is
// sent in plaintext.
func (ml *Memberlist) sealingKey() cipher.AEAD {
	if kr := ml.keys.load(); kr.encrypting() {
		return kr.aeads[0]
	}
	return nil
}

// sealStream returns a stream message in its envelope.
func (ml *Memberlist) sealStream(msg []byte) ([]byte, error) {
	aead := ml.sealingKey()
	if aead == nil && ml.sec.label == "" {
		return msg, nil
	}
	out, err := wire.AppendEnvelope(nil, wire.StreamEnvelope, ml.sec.label, aead, msg)
	if err != nil {
		return nil, fmt.Errorf("swim: seal stream message: %w", err)
	}
	return out, nil
}

// openStream checks a stream message's source and envelope and returns the
// plain message inside (decrypted in place when one key is installed).
func (ml *Memberlist) openStream(from netip.AddrPort, msg []byte) ([]byte, error) {
	data, err := ml.open(wire.StreamEnvelope, nil, from, msg)
	if err != nil {
		return nil, fmt.Errorf("swim: stream message from %s refused: %w", from, err)
	}
	return data, nil
}

// sourceAdmitted reports whether an accepted stream's source may be served;
// a refused one is counted and logged, and the caller closes it before
// reading anything.
func (ml *Memberlist) sourceAdmitted(conn net.Conn) bool {
	from := addrPortOf(conn.RemoteAddr())
	if ml.sec.sourceAllowed(from.Addr()) {
		return true
	}
	ml.sec.refuse(wire.StreamEnvelope, refusedSource, from, nil)
	return false
}

// acceptTLS runs the server side of the TLS handshake on an accepted
// stream when Config.Security.StreamTLS is set, bounded by the deadline the caller
// set on conn, and returns the stream to read and write; conn itself
// otherwise. Closing conn also ends the TLS stream.
func (ml *Memberlist) acceptTLS(conn net.Conn) (net.Conn, error) {
	if ml.sec.tls == nil {
		return conn, nil
	}
	tc := tls.Server(conn, ml.sec.tls)
	if err := tc.HandshakeContext(ml.ctx); err != nil {
		if ml.ctx.Err() == nil { // not Shutdown
			ml.sec.refuse(wire.StreamEnvelope, refusedTLS, addrPortOf(conn.RemoteAddr()), err)
		}
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// dialTLS runs the client side of the TLS handshake on a dialled stream
// when Config.Security.StreamTLS is set, verifying the peer against ServerName, or
// when that is empty against to's IP address; conn itself otherwise.
func (ml *Memberlist) dialTLS(ctx context.Context, conn net.Conn, to netip.AddrPort) (net.Conn, error) {
	if ml.sec.tls == nil {
		return conn, nil
	}
	cfg := ml.sec.tls
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = to.Addr().Unmap().WithZone("").String()
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// SetSignatures changes whether this member signs its claims and requires
// others' (see SignatureMode), at once: the steps of switching a running
// cluster to signed claims one member at a time.
func (ml *Memberlist) SetSignatures(mode SignatureMode) error {
	var setErr error
	if err := ml.input(func(now time.Time) { setErr = ml.machine.SetSignatures(now, mode) }); err != nil {
		return err
	}
	return setErr
}

// Signatures returns the current signature mode.
func (ml *Memberlist) Signatures() SignatureMode {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.Signatures()
}

// SetCertificate installs a renewed certificate for this member (see
// Config.Claims.Certificate) and announces it at once.
func (ml *Memberlist) SetCertificate(cert []byte) error {
	var setErr error
	if err := ml.input(func(now time.Time) { setErr = ml.machine.SetCertificate(now, cert) }); err != nil {
		return err
	}
	return setErr
}

// Rebind forgets the key the member called name is bound to here, so that
// the next key seen with it is taken: the operator's answer to a member
// that lost its key under trust on first use (see Machine.Rebind). It
// reports whether a binding was held.
func (ml *Memberlist) Rebind(name string) bool {
	var held bool
	if err := ml.input(func(time.Time) { held = ml.machine.Rebind(name) }); err != nil {
		return false
	}
	return held
}

// IdentityKey returns this member's public identity key.
func (ml *Memberlist) IdentityKey() ed25519.PublicKey {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.IdentityKey()
}

// AccusationsBy returns how many accusations by the member called name
// this member took, and how many it dropped past that accuser's bound,
// with signatures on.
func (ml *Memberlist) AccusationsBy(name string) (taken, limited uint64) {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.AccusationsBy(name)
}
