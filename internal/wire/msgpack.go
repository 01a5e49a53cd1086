package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file holds the few msgpack primitives the messages need, written
// against []byte rather than through msgpack/v5's Encoder and Decoder. The
// library remains the reference: the tests check that these bytes equal
// msgpack/v5's own encoding (as_array structs, compact ints) and that each
// side decodes the other's output. Doing it here instead of through the
// library's Decoder is a matter of robustness, not taste: its DecodeBytes
// allocates the declared length before reading (five bytes of input, c6 7f ff
// ff ff, make it allocate 2 GiB), its DecodeUint64 silently turns nil into 0
// and -1 into 2^64-1, and its Skip recurses once per nesting level. Working on
// a slice, every length is checked against both its limit and the bytes that
// remain before anything is allocated, and encoding appends to the caller's
// buffer with no interface calls and no allocation.

// msgpack format codes (https://github.com/msgpack/msgpack/blob/master/spec.md).
// They mirror msgpcode's variables as constants so that switches compile to
// jump tables; a test checks that the two agree.
const (
	mpPosFixIntMax = 0x7f
	mpFixMap       = 0x80
	mpFixArray     = 0x90
	mpFixStr       = 0xa0
	mpNil          = 0xc0
	mpNeverUsed    = 0xc1
	mpFalse        = 0xc2
	mpTrue         = 0xc3
	mpBin8         = 0xc4
	mpBin16        = 0xc5
	mpBin32        = 0xc6
	mpExt8         = 0xc7
	mpExt16        = 0xc8
	mpExt32        = 0xc9
	mpFloat32      = 0xca
	mpFloat64      = 0xcb
	mpUint8        = 0xcc
	mpUint16       = 0xcd
	mpUint32       = 0xce
	mpUint64       = 0xcf
	mpInt8         = 0xd0
	mpInt16        = 0xd1
	mpInt32        = 0xd2
	mpInt64        = 0xd3
	mpFixExt1      = 0xd4
	mpFixExt2      = 0xd5
	mpFixExt4      = 0xd6
	mpFixExt8      = 0xd7
	mpFixExt16     = 0xd8
	mpStr8         = 0xd9
	mpStr16        = 0xda
	mpStr32        = 0xdb
	mpArray16      = 0xdc
	mpArray32      = 0xdd
	mpMap16        = 0xde
	mpMap32        = 0xdf
	mpNegFixIntMin = 0xe0
)

// ---- encoding ----

// appendUint appends v in the smallest msgpack integer encoding, so that the
// small sequence numbers and incarnations that dominate traffic cost 1 byte.
func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= mpPosFixIntMax:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, mpUint8, byte(v))
	case v <= math.MaxUint16:
		return append(b, mpUint16, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, mpUint32, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, mpUint64), v)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, mpTrue)
	}
	return append(b, mpFalse)
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, mpFixArray|byte(n))
	case n <= math.MaxUint16:
		return append(b, mpArray16, byte(n>>8), byte(n))
	}
	return append(b, mpArray32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendString(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, mpFixStr|byte(n))
	case n <= math.MaxUint8:
		b = append(b, mpStr8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, mpStr16, byte(n>>8), byte(n))
	default:
		b = append(b, mpStr32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

func appendBinLen(b []byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(b, mpBin8, byte(n))
	case n <= math.MaxUint16:
		return append(b, mpBin16, byte(n>>8), byte(n))
	}
	return append(b, mpBin32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// appendBin appends p as bin. Empty (or nil) p is written as msgpack nil, one
// byte instead of two: empty metadata is the common case in deltas.
func appendBin(b []byte, p []byte) []byte {
	if len(p) == 0 {
		return append(b, mpNil)
	}
	return append(appendBinLen(b, len(p)), p...)
}

// ---- decoding ----

// decoder reads msgpack values from a slice. Its error is sticky: after the
// first failure every read returns a zero value, so message decoders read all
// their fields unconditionally and check once at the end. err is a sentinel
// (or wraps one) and field names where it happened.
type decoder struct {
	b     []byte // input not yet consumed
	err   error
	field string
	// skipped counts the skip calls that consumed fields: the messages (or
	// push-pull entries) that carried fields this version does not know.
	skipped int
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = err
		d.field = field
	}
}

// failf records a sentinel with detail; the detail is formatted only on this
// error path.
func (d *decoder) failf(field string, sentinel error, format string, args ...any) {
	if d.err == nil {
		d.fail(field, fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...))
	}
}

// be reads a size-byte big-endian integer at d.b[off:]; the caller has checked
// that the bytes exist.
func (d *decoder) be(off, size int) uint64 {
	switch size {
	case 1:
		return uint64(d.b[off])
	case 2:
		return uint64(binary.BigEndian.Uint16(d.b[off:]))
	case 4:
		return uint64(binary.BigEndian.Uint32(d.b[off:]))
	}
	return binary.BigEndian.Uint64(d.b[off:])
}

// arrayLen reads an array header for a value with min to max elements.
// Because every msgpack value takes at least one byte, a count larger than the
// remaining input is rejected here too, before anyone allocates for it.
func (d *decoder) arrayLen(field string, min, max int) int {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail(field, ErrTruncated)
		return 0
	}
	c := d.b[0]
	var n uint64
	var size int
	switch {
	case c&0xf0 == mpFixArray:
		n, size = uint64(c&0x0f), 1
	case c == mpArray16:
		size = 3
	case c == mpArray32:
		size = 5
	default:
		d.failf(field, ErrMalformed, "msgpack code %#x, want array", c)
		return 0
	}
	if len(d.b) < size {
		d.fail(field, ErrTruncated)
		return 0
	}
	if size > 1 {
		n = d.be(1, size-1)
	}
	d.b = d.b[size:]
	if n < uint64(min) {
		d.failf(field, ErrMalformed, "%d elements, want at least %d", n, min)
		return 0
	}
	if n > uint64(max) {
		d.failf(field, ErrTooLarge, "%d elements, limit %d", n, max)
		return 0
	}
	if n > uint64(len(d.b)) {
		d.fail(field, ErrTruncated)
		return 0
	}
	return int(n)
}

// uint reads a non-negative integer no larger than max. Signed encodings of
// non-negative values are accepted (other msgpack implementations write
// them); negative values, nil and floats are not.
func (d *decoder) uint(field string, max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail(field, ErrTruncated)
		return 0
	}
	c := d.b[0]
	if c <= mpPosFixIntMax {
		d.b = d.b[1:]
		return uint64(c)
	}
	var size int
	signed := false
	switch c {
	case mpUint8, mpUint16, mpUint32, mpUint64:
		size = 1 << (c - mpUint8)
	case mpInt8, mpInt16, mpInt32, mpInt64:
		size = 1 << (c - mpInt8)
		signed = true
	default:
		d.failf(field, ErrMalformed, "msgpack code %#x, want unsigned integer", c)
		return 0
	}
	if len(d.b) < 1+size {
		d.fail(field, ErrTruncated)
		return 0
	}
	v := d.be(1, size)
	// A signed value is negative when its top bit is set.
	if signed && v>>(8*size-1) != 0 {
		d.failf(field, ErrMalformed, "negative integer")
		return 0
	}
	if v > max {
		d.failf(field, ErrMalformed, "integer %d out of range (max %d)", v, max)
		return 0
	}
	d.b = d.b[1+size:]
	return v
}

func (d *decoder) bool(field string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.fail(field, ErrTruncated)
		return false
	}
	switch d.b[0] {
	case mpFalse:
		d.b = d.b[1:]
		return false
	case mpTrue:
		d.b = d.b[1:]
		return true
	}
	d.failf(field, ErrMalformed, "msgpack code %#x, want bool", d.b[0])
	return false
}

// raw reads a str (str=true) or bin/nil (str=false) value of at most max
// bytes and returns its payload aliasing the input. The limit is checked
// before the remaining length, so that an oversized claim is reported as
// such even when the input is also short.
func (d *decoder) raw(field string, max int, str bool) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) == 0 {
		d.fail(field, ErrTruncated)
		return nil
	}
	c := d.b[0]
	var n uint64
	var size int
	switch {
	case str && c&0xe0 == mpFixStr:
		n, size = uint64(c&0x1f), 1
	case str && c >= mpStr8 && c <= mpStr32:
		size = 1 + 1<<(c-mpStr8)
	case !str && c >= mpBin8 && c <= mpBin32:
		size = 1 + 1<<(c-mpBin8)
	case !str && c == mpNil:
		d.b = d.b[1:]
		return nil
	default:
		want := "bin"
		if str {
			want = "str"
		}
		d.failf(field, ErrMalformed, "msgpack code %#x, want %s", c, want)
		return nil
	}
	if len(d.b) < size {
		d.fail(field, ErrTruncated)
		return nil
	}
	if size > 1 {
		n = d.be(1, size-1)
	}
	if n > uint64(max) {
		d.failf(field, ErrTooLarge, "%d bytes, limit %d", n, max)
		return nil
	}
	if n > uint64(len(d.b)-size) {
		d.fail(field, ErrTruncated)
		return nil
	}
	p := d.b[size : size+int(n) : size+int(n)]
	d.b = d.b[size+int(n):]
	return p
}

// str reads a string of at most max bytes. The string is a copy: decoded
// messages never alias the packet buffer, which the transport reuses.
func (d *decoder) str(field string, max int) string {
	p := d.raw(field, max, true)
	if len(p) == 0 {
		return ""
	}
	return string(p)
}

// bin reads a byte string of at most max bytes into a fresh slice. Empty bin
// and nil both decode to nil, so that a value survives a re-encode unchanged.
func (d *decoder) bin(field string, max int) []byte {
	p := d.raw(field, max, false)
	if len(p) == 0 {
		return nil
	}
	out := make([]byte, len(p))
	copy(out, p)
	return out
}

// checkProof fails unless key and sig are each empty or of their size.
func (d *decoder) checkProof(key, sig []byte) {
	switch {
	case len(key) != 0 && len(key) != KeyLen:
		d.failf("Key", ErrMalformed, "%d bytes, want %d", len(key), KeyLen)
	case len(sig) != 0 && len(sig) != SigLen:
		d.failf("Sig", ErrMalformed, "%d bytes, want %d", len(sig), SigLen)
	}
}

// skip consumes n msgpack values of any kind: the fields a newer version
// appended to a message. It walks the values iteratively with a count of
// values still owed, so hostile nesting costs neither stack nor memory, and
// a container claiming more elements than bytes remain fails at once.
func (d *decoder) skip(field string, n int) {
	if d.err != nil || n <= 0 {
		return
	}
	d.skipped++
	pending := uint64(n)
	for pending > 0 {
		if len(d.b) == 0 {
			d.fail(field, ErrTruncated)
			return
		}
		c := d.b[0]
		var hdr int         // header bytes, including the code
		var lenSize int     // bytes of the big-endian length that follows the code
		var payload uint64  // bytes after the header
		var children uint64 // nested values owed by a container
		var childFactor = 1 // 2 for maps (keys and values)
		switch {
		case c <= mpPosFixIntMax, c >= mpNegFixIntMin, c == mpNil, c == mpFalse, c == mpTrue:
			hdr = 1
		case c&0xf0 == mpFixMap:
			hdr, children, childFactor = 1, uint64(c&0x0f), 2
		case c&0xf0 == mpFixArray:
			hdr, children = 1, uint64(c&0x0f)
		case c&0xe0 == mpFixStr:
			hdr, payload = 1, uint64(c&0x1f)
		case c == mpUint8, c == mpInt8:
			hdr, payload = 1, 1
		case c == mpUint16, c == mpInt16:
			hdr, payload = 1, 2
		case c == mpUint32, c == mpInt32, c == mpFloat32:
			hdr, payload = 1, 4
		case c == mpUint64, c == mpInt64, c == mpFloat64:
			hdr, payload = 1, 8
		case c >= mpFixExt1 && c <= mpFixExt16:
			hdr, payload = 2, 1<<(c-mpFixExt1) // type byte, then data
		case c >= mpBin8 && c <= mpBin32:
			lenSize = 1 << (c - mpBin8)
		case c >= mpStr8 && c <= mpStr32:
			lenSize = 1 << (c - mpStr8)
		case c >= mpExt8 && c <= mpExt32:
			lenSize = 1 << (c - mpExt8)
		case c == mpArray16, c == mpArray32:
			lenSize = 2 << (c - mpArray16)
		case c == mpMap16, c == mpMap32:
			lenSize, childFactor = 2<<(c-mpMap16), 2
		default: // mpNeverUsed
			d.failf(field, ErrMalformed, "msgpack code %#x", c)
			return
		}
		if lenSize > 0 {
			hdr = 1 + lenSize
			if len(d.b) < hdr {
				d.fail(field, ErrTruncated)
				return
			}
			l := d.be(1, lenSize)
			switch {
			case c >= mpExt8 && c <= mpExt32:
				hdr++ // the ext type byte
				payload = l
			case c >= mpArray16 && c <= mpMap32:
				children = l
			default:
				payload = l
			}
		}
		if uint64(len(d.b)) < uint64(hdr) || payload > uint64(len(d.b)-hdr) {
			d.fail(field, ErrTruncated)
			return
		}
		d.b = d.b[hdr+int(payload):]
		pending = pending - 1 + children*uint64(childFactor)
		// Every owed value needs at least one byte. children fits in 32 bits
		// and pending stays below len(d.b) after this check, so the sum above
		// cannot overflow.
		if pending > uint64(len(d.b)) {
			d.fail(field, ErrTruncated)
			return
		}
	}
}
