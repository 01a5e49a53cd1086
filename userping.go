package swim

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// The application's pings and the round trips the probes measure.

// ErrPingTimeout: the member did not answer a Ping in time.
var ErrPingTimeout = errors.New("swim: no answer to the ping in time")

// userPing is a Ping an application asked for, waiting for its ack.
type userPing struct {
	id    uint64
	addr  netip.AddrPort
	start time.Time
}

// Ping sends the named member a ping and returns the ID under which its
// Outcome is reported: with the round trip (Outcome.RTT) when the member
// answers, ErrPingTimeout when it did not within timeout. It is a plain
// UDP ping, the one probes use, so every release answers it.
func (m *Machine) Ping(now time.Time, name string, timeout time.Duration) (uint64, error) {
	s := m.lookup(name)
	if s == nil || s == m.self || !s.live() {
		return 0, fmt.Errorf("%w: %q", ErrNoSuchMember, name)
	}
	seq := m.nextSeq()
	m.streamID++ // one counter for the IDs of streams, broadcasts and pings
	up := &userPing{id: m.streamID, addr: m.addrOf(s), start: now}
	m.userPings[seq] = up
	m.after(now.Add(timeout), timerUserPing, uint64(seq), 0, "")
	m.send(up.addr, &wire.Ping{Seq: seq, Target: name, From: m.selfName})
	return up.id, nil
}

// pingAnswered reports whether the ack answers an application's ping, and
// reports the ping's round trip if so.
func (m *Machine) pingAnswered(now time.Time, from netip.AddrPort, seq uint32) bool {
	up := m.userPings[seq]
	if up == nil {
		return false
	}
	if from != up.addr {
		m.stats.AcksRefused++
		return true
	}
	delete(m.userPings, seq)
	rtt := now.Sub(up.start)
	m.observeRTT(rtt)
	if s := m.byAddr(from); s != nil {
		m.sampleRTT(m.nameOf(s), rtt)
		m.ackHeard(s, seq, rtt)
	}
	m.out.Outcomes = append(m.out.Outcomes, Outcome{ID: up.id, RTT: rtt})
	return true
}

// expirePing ends an application's ping that got no answer.
func (m *Machine) expirePing(seq uint32) {
	up := m.userPings[seq]
	delete(m.userPings, seq)
	m.out.Outcomes = append(m.out.Outcomes, Outcome{ID: up.id, Err: ErrPingTimeout})
}

// sampleRTT folds one round trip into the member's smoothed round trip,
// as TCP does (RFC 6298: a gain of 1/8).
func (m *Machine) sampleRTT(name string, rtt time.Duration) {
	if cur, ok := m.rtts[name]; ok {
		m.rtts[name] = cur + (rtt-cur)/8
		return
	}
	if len(m.rtts) >= m.cfg.MaxMembers {
		return // bounded like the table; reap makes room
	}
	m.rtts[name] = rtt
}

// RTT returns the smoothed round trip to the named member, measured by the
// direct probes this member sent it and the answered Pings; false before
// the first answer.
func (m *Machine) RTT(name string) (time.Duration, bool) {
	rtt, ok := m.rtts[name]
	return rtt, ok
}

// PingDelegate lets an application attach a payload to this member's acks
// and read what peers attach to theirs (Config.Pings; memberlist's
// PingDelegate), as network coordinates need: each direct probe and Ping
// is a round-trip sample with the peer's payload.
type PingDelegate interface {
	// AckPayload returns what this member's acks carry, at most
	// MaxAckPayload bytes (a longer one is not sent, and counted). It is
	// called inside the protocol, with the member's state locked, for
	// each ack to a member that reads it (protocol 3): it must be quick,
	// must not block and must not call Memberlist methods.
	AckPayload() []byte
	// NotifyPingComplete is called with each answer to a direct probe or
	// Ping from a member that attached a payload: the member, the round
	// trip and the payload. Memberlist calls it outside every lock, on
	// the goroutine that received the ack (the transport's reader, or the
	// loop for a transport without one), so it must be safe for
	// concurrent use with the rest of the application.
	NotifyPingComplete(from Member, rtt time.Duration, payload []byte)
}

// MaxAckPayload bounds what an application attaches to an ack.
const MaxAckPayload = 256

// AckInfo is an answer to a direct probe or a Ping that carried the
// peer's payload (Ready.Acks).
type AckInfo struct {
	From    Member
	RTT     time.Duration
	Payload []byte
}

// ackPayloadFor is the payload for the ack to a ping from sender, with this member's payload when
// the application attaches one and the sender reads it.
func (m *Machine) ackPayloadFor(sender *memberState, seq uint32) *wire.AckPayload {
	if m.cfg.Pings == nil || sender == nil || m.versionsOf(sender).Effective().ProtocolMax < wire.ProtocolUser {
		return nil
	}
	p := m.cfg.Pings.AckPayload()
	if len(p) == 0 {
		return nil
	}
	if len(p) > MaxAckPayload {
		m.stats.AckPayloadsTooLarge++
		return nil
	}
	return &wire.AckPayload{Seq: seq, Payload: cloneBytes(p)}
}

// ackHeard hands the payload that came with the ack of seq from s, if any,
// to the driver (Ready.Acks).
func (m *Machine) ackHeard(s *memberState, seq uint32, rtt time.Duration) {
	for _, ap := range m.ackPayloads {
		if ap.Seq == seq && len(ap.Payload) > 0 && len(ap.Payload) <= MaxAckPayload {
			m.out.Acks = append(m.out.Acks, AckInfo{From: m.export(s), RTT: rtt, Payload: ap.Payload})
			return
		}
	}
}
