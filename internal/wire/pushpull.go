package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
)

// A push-pull carries a member's whole view: at 10,000 members it is 10,000
// entries each way, every PushPullInterval, for every member. Building a
// []MemberState to encode it, and decoding one with a string and a slice per
// entry, cost more than the exchange itself; the functions here encode from
// the caller's table and decode into views of the input, allocating nothing
// per member. They produce and accept exactly the bytes AppendPacket and
// DecodeStreamPacket do for a *PushPull.

// PushPullWriter encodes a push-pull packet member by member.
type PushPullWriter struct {
	b    []byte
	want int
	n    int
	err  error
}

// NewPushPullWriter starts a push-pull packet in dst (appending to it) for
// exactly count members.
func NewPushPullWriter(dst []byte, from string, join bool, count int) *PushPullWriter {
	w := &PushPullWriter{want: count}
	if err := checkLen(TypePushPull, "From", len(from), MaxNameLen); err != nil {
		w.err = err
	} else if err := checkLen(TypePushPull, "Members", count, MaxPushPullMembers); err != nil {
		w.err = err
	}
	b := append(dst, Version, byte(TypePushPull))
	b = appendArrayLen(b, 3)
	b = appendString(b, from)
	b = appendBool(b, join)
	w.b = appendArrayLen(b, count)
	return w
}

// Add appends one member whose life is not known; v is what it speaks,
// zero if not known.
func (w *PushPullWriter) Add(name string, addr netip.AddrPort, incarnation uint64, state uint8, meta []byte, v Versions) {
	w.AddLife(name, addr, incarnation, state, meta, v, 0)
}

// AddLife is Add for a member whose life is known.
func (w *PushPullWriter) AddLife(name string, addr netip.AddrPort, incarnation uint64, state uint8, meta []byte, v Versions, life uint64) {
	w.AddSigned(name, addr, incarnation, state, meta, v, life, nil, nil, nil)
}

// AddSigned is AddLife with the entry's key, signature and certificate
// (see MemberState), each empty when not held.
func (w *PushPullWriter) AddSigned(name string, addr netip.AddrPort, incarnation uint64, state uint8, meta []byte, v Versions, life uint64, key, sig, cert []byte) {
	if w.err != nil {
		return
	}
	if len(name) > MaxNameLen || len(meta) > MaxMetaLen {
		w.err = checkMember(TypePushPull, "Members.", name, nil, meta)
		return
	}
	if err := checkProof(TypePushPull, key, sig, cert); err != nil {
		w.err = err
		return
	}
	b := appendArrayLen(w.b, 7+proofFields(key, sig, cert))
	b = appendString(b, name)
	b = appendAddr(b, addr)
	b = appendUint(b, incarnation)
	b = appendUint(b, uint64(state))
	b = appendBin(b, meta)
	b = appendUint(b, v.pack())
	b = appendUint(b, life)
	w.b = appendProof(b, key, sig, cert)
	w.n++
}

// Bytes returns the packet; it fails if a member broke a limit or the count
// given to NewPushPullWriter was not met.
func (w *PushPullWriter) Bytes() ([]byte, error) {
	if w.err == nil && w.n != w.want {
		w.err = fmt.Errorf("wire: encode push-pull: %d members written, %d announced: %w", w.n, w.want, ErrMalformed)
	}
	return w.b, w.err
}

// appendAddr appends EncodeAddr(ap) as a bin without allocating.
func appendAddr(b []byte, ap netip.AddrPort) []byte {
	a := ap.Addr().Unmap()
	switch {
	case a.Is4():
		a4 := a.As4()
		b = append(b, mpBin8, 6)
		b = append(b, a4[:]...)
	case a.Is6():
		a16 := a.As16()
		b = append(b, mpBin8, 18)
		b = append(b, a16[:]...)
	default:
		return append(b, mpNil)
	}
	return binary.BigEndian.AppendUint16(b, ap.Port())
}

// MemberView is one member of a push-pull as PushPullView.Each reads it.
// Name, Addr and Meta alias the packet and are valid only during the call.
type MemberView struct {
	Name, Addr  []byte
	Incarnation uint64
	State       uint8
	Meta        []byte
	Versions    Versions
	Life        uint64
	// Key, Sig and Cert are empty when the entry is unsigned.
	Key, Sig, Cert []byte
}

// IsPushPull reports whether the stream packet b holds a single push-pull.
func IsPushPull(b []byte) bool {
	return len(b) >= 2 && b[0] == Version && Type(b[1]) == TypePushPull
}

// IsUser reports whether the packet b holds one User message alone (a
// stream's application data, bounded by the receiver's MaxMessageSize
// rather than MaxSmallStreamSize).
func IsUser(b []byte) bool {
	return len(b) >= 2 && b[0] == Version && Type(b[1]) == TypeUser
}

// AppendPushPullState adds an application's state to the push-pull packet
// p, as written by AppendPacket or PushPullWriter: a fourth field after the
// members, which a release that knows no application state skips, as it
// skips every field it does not know. It extends p in place when p has
// room. A packet that already has more than its three fields is refused
// (ErrMalformed).
func AppendPushPullState(p []byte, state []byte) ([]byte, error) {
	if !IsPushPull(p) || len(p) < 3 || p[2] != mpFixArray|3 {
		return p, fmt.Errorf("wire: push-pull state: %w: not a three-field push-pull", ErrMalformed)
	}
	if len(state) > MaxStreamMessageSize {
		return p, checkLen(TypePushPull, "State", len(state), MaxStreamMessageSize)
	}
	p[2] = mpFixArray | 4
	return appendBin(p, state), nil
}

// PushPullHead returns the From and Join fields of a push-pull packet
// without reading its members.
func PushPullHead(b []byte) (from string, join bool, err error) {
	if !IsPushPull(b) {
		return "", false, &DecodeError{Err: fmt.Errorf("%w: not a push-pull packet", ErrMalformed)}
	}
	d := decoder{b: b[2:]}
	f, join, _ := decodePushPullHead(&d)
	if d.err != nil {
		return "", false, &DecodeError{Type: TypePushPull, Field: d.field, Err: d.err}
	}
	return string(f), join, nil
}

// PushPullView is a push-pull packet checked whole by ParsePushPull, whose
// members Each or a PushPullCursor reads without copying them.
type PushPullView struct {
	From  string
	Join  bool
	Count int // members
	b     []byte
	state []byte
}

// ParsePushPull checks a stream packet holding one push-pull (see
// IsPushPull) with the limits and errors of DecodeStreamPacket, and returns
// its head. The view aliases b.
func ParsePushPull(b []byte) (*PushPullView, error) {
	return ParsePushPullLimit(b, MaxPushPullMembers)
}

// ParsePushPullLimit is ParsePushPull refusing, with an error wrapping
// ErrTooLarge (TooManyMembers tells it from other limits), a push-pull that
// announces more than maxMembers members; the count is read first, so such
// a packet costs nothing to refuse.
func ParsePushPullLimit(b []byte, maxMembers int) (*PushPullView, error) {
	if len(b) > MaxStreamMessageSize {
		return nil, &DecodeError{Err: fmt.Errorf("%w: packet of %d bytes, limit %d", ErrTooLarge, len(b), MaxStreamMessageSize)}
	}
	if !IsPushPull(b) {
		return nil, &DecodeError{Err: fmt.Errorf("%w: not a push-pull packet", ErrMalformed)}
	}
	p := &PushPullView{b: b}
	from, join, count, err := p.walk(nil, min(maxMembers, MaxPushPullMembers))
	if err != nil {
		return nil, err
	}
	p.From, p.Join, p.Count = string(from), join, count
	return p, nil
}

// TooManyMembers reports whether err is ParsePushPullLimit's refusal of a
// push-pull for the number of members it announces, or of its size: not a
// bad field, such as a name over MaxNameLen.
func TooManyMembers(err error) bool {
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrTooLarge) {
		return false
	}
	return de.Field == "Members" || de.Type == 0
}

// State returns the application state the push-pull carries
// (AppendPushPullState), aliasing the packet; nil if none.
func (p *PushPullView) State() []byte { return p.state }

// Each calls visit with each member, in order.
func (p *PushPullView) Each(visit func(*MemberView)) {
	// ParsePushPull checked the packet: the walk cannot fail.
	_, _, _, _ = p.walk(visit, MaxPushPullMembers)
}

// walk reads the packet, calling visit (if not nil) with each member.
func (p *PushPullView) walk(visit func(*MemberView), maxMembers int) (from []byte, join bool, count int, err error) {
	d := decoder{b: p.b[2:]}
	from, join, extra := decodePushPullHead(&d)
	count = d.arrayLen("Members", 0, maxMembers)
	if d.err == nil && count > len(d.b)/minMemberStateLen {
		d.fail("Members", ErrTruncated)
	}
	var v MemberView
	for i := 0; i < count && d.err == nil; i++ {
		decodeMemberView(&d, &v)
		if visit != nil && d.err == nil {
			visit(&v)
		}
	}
	if extra > 0 {
		p.state = d.raw("State", MaxStreamMessageSize, false)
		extra--
	}
	d.skip("", extra)
	if d.err != nil {
		return nil, false, 0, &DecodeError{Type: TypePushPull, Field: d.field, Err: d.err}
	}
	if len(d.b) != 0 {
		return nil, false, 0, &DecodeError{Type: TypePushPull, Err: ErrTrailingBytes}
	}
	return from, join, count, nil
}

// PushPullCursor reads the members of a checked push-pull one at a time, so
// that a large one can be applied in slices.
type PushPullCursor struct {
	d    decoder
	left int
}

// Cursor returns a cursor at the view's first member.
func (p *PushPullView) Cursor() *PushPullCursor {
	c := &PushPullCursor{d: decoder{b: p.b[2:]}, left: p.Count}
	_, _, _ = decodePushPullHead(&c.d)
	_ = c.d.arrayLen("Members", 0, MaxPushPullMembers)
	return c
}

// Next reads the next member into v (aliasing the packet, valid until the
// next call) and reports false when there is none left.
func (c *PushPullCursor) Next(v *MemberView) bool {
	if c.left == 0 || c.d.err != nil {
		return false
	}
	c.left--
	decodeMemberView(&c.d, v)
	return c.d.err == nil
}

// Left is how many members Next has still to read.
func (c *PushPullCursor) Left() int { return c.left }

// decodePushPullHead reads the push-pull's array header, From and Join; it
// returns how many fields past the known three follow the members, for the
// caller to skip at the end.
func decodePushPullHead(d *decoder) (from []byte, join bool, extra int) {
	n := d.arrayLen("", 3, math.MaxInt)
	from = d.raw("From", MaxNameLen, true)
	join = d.bool("Join")
	return from, join, n - 3
}

// decodeMemberView reads one member state into v, aliasing d's input.
func decodeMemberView(d *decoder, v *MemberView) {
	k := d.arrayLen("Members", 5, math.MaxInt)
	v.Name = d.raw("Members.Name", MaxNameLen, true)
	v.Addr = d.raw("Members.Addr", MaxAddrLen, false)
	v.Incarnation = d.uint("Members.Incarnation", math.MaxUint64)
	v.State = uint8(d.uint("Members.State", math.MaxUint8))
	v.Meta = d.raw("Members.Meta", MaxMetaLen, false)
	if len(v.Meta) == 0 {
		v.Meta = nil
	}
	v.Versions, v.Life = Versions{}, 0
	v.Key, v.Sig, v.Cert = nil, nil, nil
	known := 5
	if k >= 6 {
		v.Versions, known = unpackVersions(d.uint("Members.Versions", math.MaxUint32)), 6
	}
	if k >= 7 {
		v.Life, known = d.uint("Members.Life", math.MaxUint64), 7
	}
	if k >= 9 {
		v.Key, v.Sig, known = d.raw("Members.Key", KeyLen, false), d.raw("Members.Sig", SigLen, false), 9
		d.checkProof(v.Key, v.Sig)
	}
	if k >= 10 {
		v.Cert, known = d.raw("Members.Cert", MaxCertLen, false), 10
	}
	d.skip("Members", k-known)
}
