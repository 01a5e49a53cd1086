package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/swim-go/swim"
)

// Packet kinds of the fake protocol.
const (
	kindPing = 'p'
	kindAck  = 'a'
)

// fakePacket is [kind][sent: int64 ns since Epoch][seq: uint32]; an ack
// echoes its ping's sent and seq so the pinger can measure the round trip.
func encodeFake(kind byte, sent time.Time, seq uint32) []byte {
	b := make([]byte, 13)
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], uint64(sent.Sub(Epoch)))
	binary.BigEndian.PutUint32(b[9:], seq)
	return b
}

func decodeFake(b []byte) (kind byte, sent time.Time, seq uint32, err error) {
	if len(b) != 13 {
		return 0, time.Time{}, 0, fmt.Errorf("fake: %d-byte packet", len(b))
	}
	return b[0], Epoch.Add(time.Duration(binary.BigEndian.Uint64(b[1:]))), binary.BigEndian.Uint32(b[9:]), nil
}

// received is one input as a fake node saw it.
type received struct {
	at   time.Time
	from netip.AddrPort
	kind byte
	sent time.Time
	seq  uint32
}

// streamResult is one HandleStreamResponse call.
type streamResult struct {
	at   time.Time
	id   uint64
	resp string
	err  error
}

// fake is a Node that pings its targets every period and acks every ping.
// It emits an EventJoin the first time it hears an ack from a peer, serves
// streams by echoing "re:"+request (failing on "fail"), and records every
// input so tests can check what the simulator delivered and when.
type fake struct {
	name    string
	addr    netip.AddrPort
	rng     *rand.Rand
	born    time.Time
	period  time.Duration // 0: no timer
	jitter  bool          // add up to period/10 of random delay to each period
	targets []netip.AddrPort
	peers   []netip.AddrPort // if set, each period also pings one at random
	trace   *[]string        // shared by a harness, nil if unused

	next       time.Time
	seq        uint32
	nextStream uint64
	heard      map[netip.AddrPort]bool
	out        swim.Ready

	ticks   []time.Time
	got     []received
	served  []received
	results []streamResult
}

var _ Node = (*fake)(nil)

func (f *fake) note(format string, args ...any) {
	if f.trace != nil {
		*f.trace = append(*f.trace, f.name+" "+fmt.Sprintf(format, args...))
	}
}

func (f *fake) HandlePacket(now time.Time, from netip.AddrPort, data []byte) error {
	kind, sent, seq, err := decodeFake(data)
	if err != nil {
		return err
	}
	f.got = append(f.got, received{at: now, from: from, kind: kind, sent: sent, seq: seq})
	f.note("%v got %c#%d from %v", now.Sub(Epoch), kind, seq, from)
	switch kind {
	case kindPing:
		f.out.Packets = append(f.out.Packets, swim.Packet{To: from, Data: encodeFake(kindAck, sent, seq)})
	case kindAck:
		if !f.heard[from] {
			f.heard[from] = true
			f.out.Events = append(f.out.Events, swim.Event{
				Kind:   swim.EventJoin,
				Member: swim.Member{Name: from.String(), Addr: from},
			})
		}
	}
	return nil
}

func (f *fake) HandleStream(now time.Time, from netip.AddrPort, req []byte) ([]byte, error) {
	f.served = append(f.served, received{at: now, from: from})
	f.note("%v served %q from %v", now.Sub(Epoch), req, from)
	if string(req) == "fail" {
		return nil, errors.New("fake: refused")
	}
	return []byte("re:" + string(req)), nil
}

func (f *fake) HandleStreamResponse(now time.Time, id uint64, resp []byte, err error) error {
	f.results = append(f.results, streamResult{at: now, id: id, resp: string(resp), err: err})
	f.note("%v stream %d: %q %v", now.Sub(Epoch), id, resp, err)
	return err
}

func (f *fake) Tick(now time.Time) {
	f.ticks = append(f.ticks, now)
	f.note("%v tick", now.Sub(Epoch))
	if f.period == 0 || now.Before(f.next) {
		return
	}
	for _, to := range f.targets {
		f.ping(now, to)
	}
	if len(f.peers) > 0 {
		f.ping(now, f.peers[f.rng.IntN(len(f.peers))])
	}
	d := f.period
	if f.jitter {
		d += time.Duration(f.rng.Int64N(int64(f.period / 10)))
	}
	f.next = now.Add(d)
}

func (f *fake) NextDeadline() time.Time {
	if f.period == 0 {
		return time.Time{}
	}
	return f.next
}

func (f *fake) Ready() swim.Ready {
	r := f.out
	f.out = swim.Ready{}
	return r
}

// ping queues one ping to to.
func (f *fake) ping(now time.Time, to netip.AddrPort) {
	f.seq++
	f.out.Packets = append(f.out.Packets, swim.Packet{To: to, Data: encodeFake(kindPing, now, f.seq)})
}

// stream queues a stream request and returns its id.
func (f *fake) stream(to netip.AddrPort, data string, timeout time.Duration) uint64 {
	f.nextStream++
	f.out.Streams = append(f.out.Streams, swim.StreamRequest{ID: f.nextStream, To: to, Data: []byte(data), Timeout: timeout})
	return f.nextStream
}

// gotKind returns the received packets of one kind.
func (f *fake) gotKind(kind byte) []received {
	var out []received
	for _, r := range f.got {
		if r.kind == kind {
			out = append(out, r)
		}
	}
	return out
}
