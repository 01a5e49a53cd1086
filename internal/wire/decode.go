package wire

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// DecodePacket decodes a packet, flattening a compound into its messages.
// A message of a kind this version does not know (a newer peer's) is
// returned as an *Unknown in its place, and trailing fields a newer peer
// appended to a known message are skipped; neither fails the packet.
//
// b may hold at most MaxPacketSize bytes (use DecodeStreamPacket for what
// ReadStreamMessage returns). The messages never alias b, so the caller may
// reuse it at once. Every failure is a *DecodeError wrapping one of
// ErrTruncated, ErrTooLarge, ErrVersion, ErrMalformed or ErrTrailingBytes; a
// packet is accepted or rejected whole.
func DecodePacket(b []byte) ([]Message, error) {
	msgs, _, err := decodePacket(b, MaxPacketSize)
	return msgs, err
}

// DecodePacketCounted is DecodePacket that also counts the messages that
// carried trailing fields this version does not know (and skipped).
func DecodePacketCounted(b []byte) (msgs []Message, unknownFields int, err error) {
	return decodePacket(b, MaxPacketSize)
}

// DecodeStreamPacket decodes a packet read with ReadStreamMessage. It is
// DecodePacket with MaxStreamMessageSize as the size limit instead of
// MaxPacketSize: a push-pull of a large cluster outgrows a UDP packet.
func DecodeStreamPacket(b []byte) ([]Message, error) {
	msgs, _, err := decodePacket(b, MaxStreamMessageSize)
	return msgs, err
}

// PacketDecoder is DecodePacketCounted for a caller that handles one packet
// at a time: it decodes into arrays it keeps from one packet to the next,
// so a packet costs no allocation beyond its strings and byte fields. The
// messages Decode returns are valid until the next Decode, which reuses
// their memory; what they hold (strings, byte slices) stays valid. The zero
// value is ready to use; it is not safe for concurrent use.
type PacketDecoder struct {
	msgs []Message
	keep slabs
}

// Decode is DecodePacketCounted(b), into the decoder's memory.
func (pd *PacketDecoder) Decode(b []byte) (msgs []Message, unknownFields int, err error) {
	clear(pd.msgs)
	pd.msgs = pd.msgs[:0]
	return decodePacketInto(b, MaxPacketSize, pd)
}

func decodePacket(b []byte, limit int) (msgs []Message, unknownFields int, err error) {
	return decodePacketInto(b, limit, nil)
}

// decodePacketInto decodes into pd's memory, or into new memory when pd is
// nil.
func decodePacketInto(b []byte, limit int, pd *PacketDecoder) (msgs []Message, unknownFields int, err error) {
	if len(b) > limit {
		return nil, 0, &DecodeError{Err: fmt.Errorf("%w: packet of %d bytes, limit %d", ErrTooLarge, len(b), limit)}
	}
	if len(b) == 0 {
		return nil, 0, &DecodeError{Err: ErrTruncated}
	}
	if b[0] != Version {
		return nil, 0, &DecodeError{Err: fmt.Errorf("%w %d (want %d)", ErrVersion, b[0], Version)}
	}
	if len(b) == 1 {
		return nil, 0, &DecodeError{Err: ErrTruncated}
	}
	if t := Type(b[1]); t != TypeCompound {
		var msgs []Message
		if pd == nil {
			msgs = newSingle(t)
		} else if m := pd.one(t); m != nil {
			msgs = append(pd.msgs, m)
			pd.msgs = msgs
		}
		if msgs == nil {
			// A kind from a newer protocol: its body is not ours to read.
			return []Message{&Unknown{Kind: t}}, 0, nil
		}
		if err := decodeFrameInto(b[1:], msgs[0], &unknownFields); err != nil {
			return nil, 0, err
		}
		return msgs, unknownFields, nil
	}

	d := decoder{b: b[2:]}
	n := d.arrayLen("Frames", 0, MaxCompoundParts)
	if d.err != nil {
		return nil, 0, &DecodeError{Type: TypeCompound, Field: d.field, Err: d.err}
	}
	var s slabs
	if pd == nil {
		msgs = make([]Message, n)
		s = newSlabs(d, n, &slabs{})
	} else {
		msgs = slices.Grow(pd.msgs, n)[:n]
		pd.msgs = msgs
		s = newSlabs(d, n, &pd.keep)
	}
	for i := range msgs {
		f := compoundItem(&d)
		if d.err != nil {
			return nil, 0, &DecodeError{Type: TypeCompound, Field: d.field, Err: d.err}
		}
		t := Type(f[0])
		m := s.next(t)
		if m == nil {
			// A kind from a newer protocol, skipped whole: the compound's
			// framing says where it ends.
			msgs[i] = &Unknown{Kind: t}
			continue
		}
		if err := decodeFrameInto(f, m, &unknownFields); err != nil {
			return nil, 0, err
		}
		msgs[i] = m
	}
	if len(d.b) != 0 {
		return nil, 0, &DecodeError{Type: TypeCompound, Err: ErrTrailingBytes}
	}
	return msgs, unknownFields, nil
}

// compoundItem reads one item of a compound: a bin holding a frame that is
// not itself a compound.
func compoundItem(d *decoder) []byte {
	f := d.raw("Frames", math.MaxInt, false)
	switch {
	case d.err != nil:
		return nil
	case len(f) == 0:
		d.fail("Frames", fmt.Errorf("%w: empty frame", ErrTruncated))
		return nil
	case Type(f[0]) == TypeCompound:
		d.fail("Frames", fmt.Errorf("%w: compound nested in a compound", ErrMalformed))
		return nil
	}
	return f
}

// DecodeFrame decodes one frame (type byte + body).
//
// b may hold at most MaxStreamMessageSize bytes, and the body must fill it
// exactly. A compound frame decodes to a *Compound whose frames are checked
// for shape (non-empty, not compounds, at most MaxCompoundParts) but not
// decoded; DecodePacket is what flattens compounds. The message never aliases
// b. Failures are *DecodeError, as for DecodePacket.
func DecodeFrame(b []byte) (Message, error) {
	if len(b) > MaxStreamMessageSize {
		return nil, &DecodeError{Err: fmt.Errorf("%w: frame of %d bytes, limit %d", ErrTooLarge, len(b), MaxStreamMessageSize)}
	}
	if len(b) == 0 {
		return nil, &DecodeError{Err: ErrTruncated}
	}
	m := newMessage(Type(b[0]))
	if m == nil {
		return nil, &DecodeError{Type: Type(b[0]), Err: ErrUnknownType}
	}
	if err := decodeFrameInto(b, m, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeFrameInto decodes the non-empty frame b into m, a zero message of
// b's type, and checks that the body fills the frame exactly. If skipped is
// not nil, it is raised by one when the body carried fields this version
// does not know.
func decodeFrameInto(b []byte, m Message, skipped *int) error {
	d := decoder{b: b[1:]}
	switch m := m.(type) {
	case *Ping:
		decodePing(&d, m)
	case *PingReq:
		decodePingReq(&d, m)
	case *Ack:
		m.Seq = decodeSeqOnly(&d)
	case *Nack:
		m.Seq = decodeSeqOnly(&d)
	case *Alive:
		decodeAlive(&d, m)
	case *Suspect:
		decodeSuspect(&d, m)
	case *Dead:
		decodeDead(&d, m)
	case *PushPull:
		decodePushPull(&d, m)
	case *Compound:
		decodeCompound(&d, m)
	case *User:
		decodeUser(&d, m)
	case *Broadcast:
		decodeBroadcast(&d, m)
	case *AckPayload:
		n := d.arrayLen("", 2, math.MaxInt)
		m.Seq = uint32(d.uint("Seq", math.MaxUint32))
		m.Payload = d.bin("Payload", MaxPacketSize)
		d.skip("", n-2)
	case *Heartbeat:
		n := d.arrayLen("", 1, math.MaxInt)
		from := d.raw("From", MaxNameLen, true)
		d.skip("", n-1)
		if d.err == nil {
			m.From, _, _ = pack(from, nil, nil)
		}
	case *ViewDigest:
		n := d.arrayLen("", 2, math.MaxInt)
		m.Live = uint32(d.uint("Live", math.MaxUint32))
		m.Digest = uint32(d.uint("Digest", math.MaxUint32))
		d.skip("", n-2)
	case *IHave:
		m.IDs = decodeIDs(&d)
	case *Graft:
		decodeGraft(&d, m)
	case *Prune:
		n := d.arrayLen("", 1, math.MaxInt)
		origin := d.raw("Origin", MaxNameLen, true)
		d.skip("", n-1)
		if d.err == nil {
			m.Origin, _, _ = pack(origin, nil, nil)
		}
	case *Refusal:
		n := d.arrayLen("", 1, math.MaxInt)
		m.Reason = d.str("Reason", MaxRefusalLen)
		d.skip("", n-1)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("", ErrTrailingBytes)
	}
	if d.err != nil {
		return &DecodeError{Type: Type(b[0]), Field: d.field, Err: d.err}
	}
	if skipped != nil && d.skipped > 0 {
		*skipped++
	}
	return nil
}

// ---- allocation ----
//
// Decoding is dominated by allocation, not parsing, so messages are allocated
// in batches: a plain packet's slice and message in one object, a compound's
// messages in one array per type, and each message's short strings and
// address in one buffer. The groupings only ever tie together memory of the
// same packet that is small and lives about as long (a retained *Alive keeps
// its packet's other Alive structs, a retained name its 18-byte address), never
// metadata or a whole packet.

// newMessage returns a new zero message of type t, or nil if t is unknown.
func newMessage(t Type) Message {
	switch t {
	case TypePing:
		return new(Ping)
	case TypePingReq:
		return new(PingReq)
	case TypeAck:
		return new(Ack)
	case TypeNack:
		return new(Nack)
	case TypeAlive:
		return new(Alive)
	case TypeSuspect:
		return new(Suspect)
	case TypeDead:
		return new(Dead)
	case TypePushPull:
		return new(PushPull)
	case TypeCompound:
		return new(Compound)
	case TypeUser:
		return new(User)
	case TypeBroadcast:
		return new(Broadcast)
	case TypeAckPayload:
		return new(AckPayload)
	case TypeHeartbeat:
		return new(Heartbeat)
	case TypeViewDigest:
		return new(ViewDigest)
	case TypeIHave:
		return new(IHave)
	case TypeGraft:
		return new(Graft)
	case TypePrune:
		return new(Prune)
	case TypeRefusal:
		return new(Refusal)
	}
	return nil
}

// newSingle returns a one-element slice holding a new zero message of type t,
// both in a single allocation, or nil if t is unknown or a compound.
func newSingle(t Type) []Message {
	switch t {
	case TypePing:
		return single[Ping]()
	case TypePingReq:
		return single[PingReq]()
	case TypeAck:
		return single[Ack]()
	case TypeNack:
		return single[Nack]()
	case TypeAlive:
		return single[Alive]()
	case TypeSuspect:
		return single[Suspect]()
	case TypeDead:
		return single[Dead]()
	case TypePushPull:
		return single[PushPull]()
	case TypeUser:
		return single[User]()
	case TypeBroadcast:
		return single[Broadcast]()
	case TypeAckPayload:
		return single[AckPayload]()
	case TypeHeartbeat:
		return single[Heartbeat]()
	case TypeViewDigest:
		return single[ViewDigest]()
	case TypeIHave:
		return single[IHave]()
	case TypeGraft:
		return single[Graft]()
	case TypePrune:
		return single[Prune]()
	case TypeRefusal:
		return single[Refusal]()
	}
	return nil
}

func single[T any, P interface {
	*T
	Message
}]() []Message {
	p := new(struct {
		msgs [1]Message
		m    T
	})
	p.msgs[0] = P(&p.m)
	return p.msgs[:]
}

// slabs hands out the messages of one compound packet from per-type arrays
// sized by a pre-scan of the frames' type bytes.
type slabs struct {
	ping     []Ping
	pingReq  []PingReq
	ack      []Ack
	nack     []Nack
	alive    []Alive
	suspect  []Suspect
	dead     []Dead
	pushPull []PushPull
	user     []User
	bcast    []Broadcast
	ackData  []AckPayload
	beat     []Heartbeat
	digest   []ViewDigest
	ihave    []IHave
	graft    []Graft
	prune    []Prune
	refusal  []Refusal
}

// newSlabs counts the types of the n frames ahead of d (a copy: the real
// pass reports any error) and takes an array for each type present from
// keep, which it grows as needed (an empty keep: new arrays).
func newSlabs(d decoder, n int, keep *slabs) slabs {
	var counts [typeLast + 1]int
	for range n {
		f := d.raw("", math.MaxInt, false)
		if d.err != nil || len(f) == 0 {
			break
		}
		if t := Type(f[0]); t > 0 && int(t) < len(counts) {
			counts[t]++
		}
	}
	return newSlabsCounted(counts, keep)
}

// newSlabsCounted takes from keep an array of counts[t] messages of each
// type t.
func newSlabsCounted(counts [typeLast + 1]int, keep *slabs) slabs {
	return slabs{
		ping:     slabOf(&keep.ping, counts[TypePing]),
		pingReq:  slabOf(&keep.pingReq, counts[TypePingReq]),
		ack:      slabOf(&keep.ack, counts[TypeAck]),
		nack:     slabOf(&keep.nack, counts[TypeNack]),
		alive:    slabOf(&keep.alive, counts[TypeAlive]),
		suspect:  slabOf(&keep.suspect, counts[TypeSuspect]),
		dead:     slabOf(&keep.dead, counts[TypeDead]),
		pushPull: slabOf(&keep.pushPull, counts[TypePushPull]),
		user:     slabOf(&keep.user, counts[TypeUser]),
		bcast:    slabOf(&keep.bcast, counts[TypeBroadcast]),
		ackData:  slabOf(&keep.ackData, counts[TypeAckPayload]),
		beat:     slabOf(&keep.beat, counts[TypeHeartbeat]),
		digest:   slabOf(&keep.digest, counts[TypeViewDigest]),
		ihave:    slabOf(&keep.ihave, counts[TypeIHave]),
		graft:    slabOf(&keep.graft, counts[TypeGraft]),
		prune:    slabOf(&keep.prune, counts[TypePrune]),
		refusal:  slabOf(&keep.refusal, counts[TypeRefusal]),
	}
}

// slabOf returns keep's array, cleared of the messages of its last use and
// grown to n if need be, as an array of n zero messages (nil for none).
func slabOf[T any](keep *[]T, n int) []T {
	clear(*keep)
	if n == 0 {
		*keep = (*keep)[:0]
		return nil
	}
	if cap(*keep) < n {
		*keep = make([]T, n)
	} else {
		*keep = (*keep)[:n]
	}
	return *keep
}

// one returns the zero message of type t a packet of that one message
// decodes into, or nil for a type this version does not know.
func (pd *PacketDecoder) one(t Type) Message {
	var counts [typeLast + 1]int
	if t > 0 && int(t) < len(counts) {
		counts[t] = 1
	}
	s := newSlabsCounted(counts, &pd.keep)
	return s.next(t)
}

// next returns the next zero message of type t, or nil if t is unknown or a
// compound.
func (s *slabs) next(t Type) Message {
	switch t {
	case TypePing:
		return take(&s.ping)
	case TypePingReq:
		return take(&s.pingReq)
	case TypeAck:
		return take(&s.ack)
	case TypeNack:
		return take(&s.nack)
	case TypeAlive:
		return take(&s.alive)
	case TypeSuspect:
		return take(&s.suspect)
	case TypeDead:
		return take(&s.dead)
	case TypePushPull:
		return take(&s.pushPull)
	case TypeUser:
		return take(&s.user)
	case TypeBroadcast:
		return take(&s.bcast)
	case TypeAckPayload:
		return take(&s.ackData)
	case TypeHeartbeat:
		return take(&s.beat)
	case TypeViewDigest:
		return take(&s.digest)
	case TypeIHave:
		return take(&s.ihave)
	case TypeGraft:
		return take(&s.graft)
	case TypePrune:
		return take(&s.prune)
	case TypeRefusal:
		return take(&s.refusal)
	}
	return nil
}

func take[T any](s *[]T) *T {
	if len(*s) == 0 {
		return new(T) // not reached when the pre-scan counted right
	}
	p := &(*s)[0]
	*s = (*s)[1:]
	return p
}

// pack copies up to two strings and one byte field, each aliasing the input,
// into a single new allocation. The string bytes are never written again, so
// viewing them as strings is safe; the byte field's capacity ends at its
// length, so appending to it reallocates instead of overwriting its
// neighbours.
func pack(s1, s2, p []byte) (string, string, []byte) {
	n := len(s1) + len(s2) + len(p)
	if n == 0 {
		return "", "", nil
	}
	buf := make([]byte, n)
	copy(buf, s1)
	copy(buf[len(s1):], s2)
	copy(buf[len(s1)+len(s2):], p)
	var str string
	if ns := len(s1) + len(s2); ns > 0 {
		str = unsafe.String(&buf[0], ns)
	}
	var bin []byte
	if len(p) > 0 {
		bin = buf[n-len(p) : n : n]
	}
	return str[:len(s1)], str[len(s1):], bin
}

// ---- message bodies ----
//
// Each decodeX reads an array of at least the known field count, then skips
// any further elements: a newer version may append fields, and an older
// decoder keeps working. Fewer elements than known are an error. Strings and
// addresses are read as views of the input and copied once, by pack, after
// the whole body decoded.

func decodePing(d *decoder, m *Ping) {
	n := d.arrayLen("", 3, math.MaxInt)
	m.Seq = uint32(d.uint("Seq", math.MaxUint32))
	target := d.raw("Target", MaxNameLen, true)
	from := d.raw("From", MaxNameLen, true)
	m.TargetLife = 0
	known := 3
	if n >= 4 {
		m.TargetLife, known = d.uint("TargetLife", math.MaxUint64), 4
	}
	d.skip("", n-known)
	if d.err == nil {
		m.Target, m.From, _ = pack(target, from, nil)
	}
}

func decodePingReq(d *decoder, m *PingReq) {
	n := d.arrayLen("", 4, math.MaxInt)
	m.Seq = uint32(d.uint("Seq", math.MaxUint32))
	target := d.raw("Target", MaxNameLen, true)
	addr := d.raw("TargetAddr", MaxAddrLen, false)
	from := d.raw("From", MaxNameLen, true)
	d.skip("", n-4)
	if d.err == nil {
		m.Target, m.From, m.TargetAddr = pack(target, from, addr)
	}
}

// decodeSeqOnly decodes the body of Ack and Nack.
func decodeSeqOnly(d *decoder) uint32 {
	n := d.arrayLen("", 1, math.MaxInt)
	seq := uint32(d.uint("Seq", math.MaxUint32))
	d.skip("", n-1)
	return seq
}

func decodeAlive(d *decoder, m *Alive) {
	n := d.arrayLen("", 4, math.MaxInt)
	name := d.raw("Name", MaxNameLen, true)
	addr := d.raw("Addr", MaxAddrLen, false)
	m.Incarnation = d.uint("Incarnation", math.MaxUint64)
	m.Meta = d.bin("Meta", MaxMetaLen)
	m.Versions, m.Life = Versions{}, 0
	m.Key, m.Sig, m.Cert = nil, nil, nil
	known := 4
	if n >= 5 {
		m.Versions, known = unpackVersions(d.uint("Versions", math.MaxUint32)), 5
	}
	if n >= 6 {
		m.Life, known = d.uint("Life", math.MaxUint64), 6
	}
	if n >= 8 {
		m.Key, m.Sig, known = d.bin("Key", KeyLen), d.bin("Sig", SigLen), 8
		d.checkProof(m.Key, m.Sig)
	}
	if n >= 9 {
		m.Cert, known = d.bin("Cert", MaxCertLen), 9
	}
	d.skip("", n-known)
	if d.err == nil {
		m.Name, _, m.Addr = pack(name, nil, addr)
	}
}

func decodeSuspect(d *decoder, m *Suspect) {
	n := d.arrayLen("", 3, math.MaxInt)
	name := d.raw("Name", MaxNameLen, true)
	m.Incarnation = d.uint("Incarnation", math.MaxUint64)
	from := d.raw("From", MaxNameLen, true)
	m.Silence, m.Life, m.Sig = 0, 0, nil
	known := 3
	if n >= 4 {
		m.Silence, known = uint32(d.uint("Silence", math.MaxUint32)), 4
	}
	if n >= 5 {
		m.Life, known = d.uint("Life", math.MaxUint64), 5
	}
	if n >= 6 {
		m.Sig, known = d.bin("Sig", SigLen), 6
		d.checkProof(nil, m.Sig)
	}
	d.skip("", n-known)
	if d.err == nil {
		m.Name, m.From, _ = pack(name, from, nil)
	}
}

func decodeDead(d *decoder, m *Dead) {
	n := d.arrayLen("", 4, math.MaxInt)
	name := d.raw("Name", MaxNameLen, true)
	m.Incarnation = d.uint("Incarnation", math.MaxUint64)
	from := d.raw("From", MaxNameLen, true)
	m.Left = d.bool("Left")
	m.Life, m.Sig = 0, nil
	known := 4
	if n >= 5 {
		m.Life, known = d.uint("Life", math.MaxUint64), 5
	}
	if n >= 6 {
		m.Sig, known = d.bin("Sig", SigLen), 6
		d.checkProof(nil, m.Sig)
	}
	d.skip("", n-known)
	if d.err == nil {
		m.Name, m.From, _ = pack(name, from, nil)
	}
}

// decodeUser copies the payload apart from the name: the application may
// keep it long after the packet is gone.
func decodeUser(d *decoder, m *User) {
	n := d.arrayLen("", 2, math.MaxInt)
	from := d.raw("From", MaxNameLen, true)
	m.Payload = d.bin("Payload", MaxStreamMessageSize)
	d.skip("", n-2)
	if d.err == nil {
		m.From, _, _ = pack(from, nil, nil)
	}
}

func decodeBroadcast(d *decoder, m *Broadcast) {
	n := d.arrayLen("", 5, math.MaxInt)
	origin := d.raw("Origin", MaxNameLen, true)
	m.Epoch = d.uint("Epoch", math.MaxUint64)
	m.Seq = uint32(d.uint("Seq", math.MaxUint32))
	key := d.raw("Key", MaxKeyLen, true)
	m.Payload = d.bin("Payload", MaxPacketSize)
	if n > 5 {
		m.Sent = d.uint("Sent", math.MaxUint64)
	}
	d.skip("", n-6)
	if d.err == nil {
		m.Origin, m.Key, _ = pack(origin, key, nil)
	}
}

// decodeIDs reads the body of an IHave.
func decodeIDs(d *decoder) []uint64 {
	n := d.arrayLen("", 1, math.MaxInt)
	ids := decodeIDList(d)
	d.skip("", n-1)
	if d.err != nil {
		return nil
	}
	return ids
}

// decodeGraft reads a Graft: its identifiers and, from the second form on,
// the origins it names (nil or an array).
func decodeGraft(d *decoder, m *Graft) {
	n := d.arrayLen("", 1, math.MaxInt)
	m.IDs = decodeIDList(d)
	if n > 1 {
		m.Origins = decodeOrigins(d)
	}
	d.skip("", n-2)
	if d.err != nil {
		m.IDs, m.Origins = nil, nil
	}
}

// decodeOrigins reads the origins of a Graft (or nil).
func decodeOrigins(d *decoder) []string {
	if d.err == nil && len(d.b) > 0 && d.b[0] == mpNil {
		d.b = d.b[1:]
		return nil
	}
	count := d.arrayLen("Origins", 0, MaxGraftOrigins)
	if d.err != nil || count == 0 {
		return nil
	}
	origins := make([]string, count)
	for i := range origins {
		origins[i] = string(d.raw("Origins", MaxNameLen, true))
	}
	return origins
}

// decodeIDList reads an array of identifiers (or nil), allocated only for
// a count the input can hold (one byte each at least).
func decodeIDList(d *decoder) []uint64 {
	if d.err == nil && len(d.b) > 0 && d.b[0] == mpNil {
		d.b = d.b[1:]
		return nil
	}
	count := d.arrayLen("IDs", 0, MaxTreeIDs)
	if d.err == nil && count > len(d.b) {
		d.fail("IDs", ErrTruncated)
	}
	if d.err != nil {
		return nil
	}
	var ids []uint64
	if count > 0 {
		ids = make([]uint64, count)
		for i := range ids {
			ids[i] = d.uint("IDs", math.MaxUint64)
		}
	}
	return ids
}

func decodePushPull(d *decoder, m *PushPull) {
	from, join, extra := decodePushPullHead(d)
	m.From = string(from)
	m.Join = join
	count := d.arrayLen("Members", 0, MaxPushPullMembers)
	// arrayLen allowed one byte per element; a member needs more, and the
	// slice is allocated only for a count the input can really hold.
	if d.err == nil && count > len(d.b)/minMemberStateLen {
		d.fail("Members", ErrTruncated)
	}
	if d.err != nil {
		return
	}
	if count > 0 {
		m.Members = make([]MemberState, count)
	}
	var v MemberView
	for i := range m.Members {
		decodeMemberView(d, &v)
		if d.err != nil {
			return
		}
		ms := &m.Members[i]
		ms.Name, _, ms.Addr = pack(v.Name, nil, v.Addr)
		ms.Incarnation, ms.State, ms.Versions, ms.Life = v.Incarnation, v.State, v.Versions, v.Life
		if len(v.Meta) > 0 {
			ms.Meta = append([]byte(nil), v.Meta...)
		}
		ms.Key, ms.Sig, ms.Cert = cloneNonEmpty(v.Key), cloneNonEmpty(v.Sig), cloneNonEmpty(v.Cert)
	}
	d.skip("", extra)
}

func cloneNonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// decodeCompound decodes a compound body into m (DecodeFrame only). The body
// is copied once and the frames alias that copy: one allocation for all
// frame bytes rather than one per frame.
func decodeCompound(d *decoder, m *Compound) {
	body := make([]byte, len(d.b))
	copy(body, d.b)
	d.b = body
	n := d.arrayLen("Frames", 0, MaxCompoundParts)
	if d.err != nil || n == 0 {
		return
	}
	m.Frames = make([][]byte, n)
	for i := range m.Frames {
		m.Frames[i] = compoundItem(d)
		if d.err != nil {
			return
		}
	}
}
