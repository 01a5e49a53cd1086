package wire

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
)

// The security envelope wraps a packet (or one stream message) on its way
// to the network:
//
//	[label header] packet
//	[label header] sealed-marker nonce ciphertext+tag
//
// The label header is present iff the sender has a cluster label:
// LabelMarker, one length byte (1..MaxLabelLen), the label's bytes.
//
// A sealed envelope is SealedPacketMarker (SealedStreamMarker on a stream),
// a NonceSize-byte nonce and the AES-GCM ciphertext of the plain packet
// followed by its TagSize-byte tag. The associated data is every byte
// before the nonce: the label header, if any, and the marker. So the label
// cannot be stripped, added or changed without the tag failing, and a
// sealed packet cannot be replayed as a stream message or the reverse (the
// two markers differ, and each is authenticated).
//
// Every marker differs from Version, so a decoder that knows no envelope
// rejects labelled and sealed traffic with ErrVersion instead of misreading
// it; and a plain packet, which starts with Version, is never mistaken for
// an envelope.
//
// Nonces are 12 random bytes from crypto/rand per envelope, not a
// per-process prefix and a counter. A counter repeats whenever its state
// does: a process restored twice from one VM snapshot, or a crash between
// using a value and saving it, reuses nonces under the same key, which in
// GCM gives away the authentication key. Random nonces have no state to
// repeat; their risk is a birthday collision, about n²/2⁹⁷ after n
// envelopes under one key (NIST SP 800-38D §8.3 keeps n below 2³², a
// collision chance under 2⁻³²; a thousand members sending 3 packets a second
// each take 16 days to get there, and rotating the key starts the count
// again). The cost is about 90 ns per envelope, a tenth of sealing a
// 1,400-byte packet.

// Envelope markers: the first byte of a label header and of a sealed
// envelope. None is Version.
const (
	LabelMarker        byte = 0x6c // 'l'
	SealedPacketMarker byte = 0x70 // 'p'
	SealedStreamMarker byte = 0x73 // 's'
)

// Sizes of the sealed envelope's parts (AES-GCM's standard nonce and tag).
const (
	NonceSize = 12
	TagSize   = 16
	// sealOverhead is what sealing adds: the marker, the nonce, the tag.
	sealOverhead = 1 + NonceSize + TagSize
)

// EnvelopeKind says what an envelope carries; it picks the sealed marker.
type EnvelopeKind uint8

// Envelope kinds.
const (
	// PacketEnvelope wraps a UDP packet.
	PacketEnvelope EnvelopeKind = iota + 1
	// StreamEnvelope wraps one message of a stream (inside the stream's
	// length prefix).
	StreamEnvelope
)

func (k EnvelopeKind) String() string {
	switch k {
	case PacketEnvelope:
		return "packet"
	case StreamEnvelope:
		return "stream"
	}
	return fmt.Sprintf("EnvelopeKind(%d)", uint8(k))
}

// marker returns the sealed marker of kind, 0 for no valid kind.
func (k EnvelopeKind) marker() byte {
	switch k {
	case PacketEnvelope:
		return SealedPacketMarker
	case StreamEnvelope:
		return SealedStreamMarker
	}
	return 0
}

// Sentinel errors of OpenEnvelope, besides ErrTruncated and ErrMalformed.
var (
	// ErrLabelMissing: the receiver has a label, the envelope has none.
	ErrLabelMissing = errors.New("no cluster label")
	// ErrLabelMismatch: the envelope carries another label.
	ErrLabelMismatch = errors.New("another cluster label")
	// ErrLabelUnexpected: the envelope carries a label, the receiver has
	// none.
	ErrLabelUnexpected = errors.New("cluster label where none is expected")
	// ErrPlaintext: the envelope is not sealed and the receiver accepts
	// only sealed ones.
	ErrPlaintext = errors.New("plaintext refused")
	// ErrNoKey: the envelope is sealed but no key given opens it (another
	// key, a tampered envelope, one sealed for the other kind, or no key
	// at all).
	ErrNoKey = errors.New("no installed key opens it")
)

// EnvelopeError says why an envelope was refused. It wraps one of
// ErrLabelMissing, ErrLabelMismatch, ErrLabelUnexpected, ErrPlaintext,
// ErrNoKey, ErrTruncated or ErrMalformed (match with errors.Is).
type EnvelopeError struct {
	// Kind is what the receiver expected.
	Kind EnvelopeKind
	// Label is true when the fault is in the label header (missing,
	// another label, unexpected, truncated or malformed), false when it is
	// in what follows (plaintext refused, no key, sealed part truncated).
	Label bool
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *EnvelopeError) Error() string {
	return "wire: open " + e.Kind.String() + " envelope: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *EnvelopeError) Unwrap() error { return e.Err }

// EnvelopeOverhead is the most bytes AppendEnvelope adds to a packet for a
// label of labelLen bytes: the label header, if any, and the seal (marker,
// nonce, tag), whether or not the packet is then sealed.
func EnvelopeOverhead(labelLen int) int {
	n := sealOverhead
	if labelLen > 0 {
		n += 2 + labelLen
	}
	return n
}

// AppendLabel appends the label header for label to dst; an empty label
// appends nothing. A label over MaxLabelLen is an error.
func AppendLabel(dst []byte, label string) ([]byte, error) {
	if len(label) > MaxLabelLen {
		return dst, fmt.Errorf("wire: label of %d bytes, limit %d: %w", len(label), MaxLabelLen, ErrTooLarge)
	}
	if label == "" {
		return dst, nil
	}
	dst = append(dst, LabelMarker, byte(len(label)))
	return append(dst, label...), nil
}

// CutLabel splits b into its label header's label and what follows. When b
// does not start with a label header, label is nil and rest is b. A header
// that is cut short or announces an empty label is an *EnvelopeError
// (Label set) wrapping ErrTruncated or ErrMalformed. label and rest alias b.
func CutLabel(b []byte) (label, rest []byte, err error) {
	label, rest, e := cutLabel(b)
	if e != nil {
		return nil, nil, e
	}
	return label, rest, nil
}

func cutLabel(b []byte) (label, rest []byte, err *EnvelopeError) {
	if len(b) == 0 || b[0] != LabelMarker {
		return nil, b, nil
	}
	if len(b) < 2 {
		return nil, nil, &EnvelopeError{Label: true, Err: fmt.Errorf("%w: label header of %d bytes", ErrTruncated, len(b))}
	}
	n := int(b[1])
	if n == 0 {
		return nil, nil, &EnvelopeError{Label: true, Err: fmt.Errorf("%w: empty label", ErrMalformed)}
	}
	if len(b) < 2+n {
		return nil, nil, &EnvelopeError{Label: true, Err: fmt.Errorf("%w: label of %d bytes, %d present", ErrTruncated, n, len(b)-2)}
	}
	return b[2 : 2+n], b[2+n:], nil
}

// AppendEnvelope appends packet in its envelope to dst: the label header
// for label (none when empty), then packet sealed with aead under a fresh
// random nonce, or packet as it is when aead is nil. aead must be AES-GCM
// with the standard nonce and tag sizes (cipher.NewGCM). dst grows at most
// once, by exactly what is needed; packet must not overlap dst's spare
// capacity. The errors (a label over MaxLabelLen, an invalid kind, another
// AEAD) are the caller's mistakes, never the network's.
func AppendEnvelope(dst []byte, kind EnvelopeKind, label string, aead cipher.AEAD, packet []byte) ([]byte, error) {
	marker := kind.marker()
	if marker == 0 {
		return dst, fmt.Errorf("wire: seal: invalid %v", kind)
	}
	if aead != nil && (aead.NonceSize() != NonceSize || aead.Overhead() != TagSize) {
		return dst, fmt.Errorf("wire: seal: AEAD with a %d-byte nonce and a %d-byte tag, want %d and %d", aead.NonceSize(), aead.Overhead(), NonceSize, TagSize)
	}
	if len(label) > MaxLabelLen {
		return dst, fmt.Errorf("wire: seal: label of %d bytes, limit %d: %w", len(label), MaxLabelLen, ErrTooLarge)
	}
	start := len(dst)
	dst = slices.Grow(dst, EnvelopeOverhead(len(label))+len(packet))
	dst, _ = AppendLabel(dst, label)
	if aead == nil {
		return append(dst, packet...), nil
	}
	dst = append(dst, marker)
	aadEnd := len(dst)
	dst = dst[:aadEnd+NonceSize]
	nonce := dst[aadEnd:]
	_, _ = rand.Read(nonce) // never fails since Go 1.24 (it crashes instead)
	return aead.Seal(dst, nonce, packet, dst[start:aadEnd]), nil
}

// OpenEnvelope checks b's envelope and returns the packet inside.
//
// Checks run in this order. The label: with a non-empty label, b must carry
// that label (ErrLabelMissing, ErrLabelMismatch); with none, b must carry
// none (ErrLabelUnexpected). Then the seal: a sealed envelope of kind is
// opened with keys in order, the first that authenticates it winning
// (ErrNoKey when none does, or when there are none); one sealed for the
// other kind is ErrNoKey as well. Anything else is plaintext: returned as
// it is when acceptPlaintext, else ErrPlaintext. The plain packet itself
// is not decoded here: DecodePacket does that.
//
// A sealed packet is decrypted and appended to dst, whose spare capacity
// must not overlap b; or, when dst is nil and exactly one key is given, in
// place over b's ciphertext, allocating nothing (b is then clobbered). A
// plaintext packet is returned as a subslice of b. Every failure is an
// *EnvelopeError; no input makes it panic. keys must be AES-GCM AEADs as
// for AppendEnvelope; others are skipped.
func OpenEnvelope(dst, b []byte, kind EnvelopeKind, label string, keys []cipher.AEAD, acceptPlaintext bool) ([]byte, error) {
	marker := kind.marker()
	if marker == 0 {
		return nil, &EnvelopeError{Kind: kind, Err: fmt.Errorf("%w: invalid envelope kind", ErrMalformed)}
	}
	got, rest, lerr := cutLabel(b)
	if lerr != nil {
		lerr.Kind = kind
		return nil, lerr
	}
	switch {
	case got == nil && label != "":
		return nil, &EnvelopeError{Kind: kind, Label: true, Err: ErrLabelMissing}
	case got != nil && label == "":
		return nil, &EnvelopeError{Kind: kind, Label: true, Err: fmt.Errorf("%w: %q", ErrLabelUnexpected, got)}
	case string(got) != label:
		return nil, &EnvelopeError{Kind: kind, Label: true, Err: fmt.Errorf("%w: %q", ErrLabelMismatch, got)}
	}
	if len(rest) == 0 {
		return nil, &EnvelopeError{Kind: kind, Err: fmt.Errorf("%w: nothing after the label", ErrTruncated)}
	}
	switch rest[0] {
	case marker:
	case SealedPacketMarker, SealedStreamMarker:
		return nil, &EnvelopeError{Kind: kind, Err: fmt.Errorf("%w: sealed for the other kind", ErrNoKey)}
	default:
		if !acceptPlaintext {
			return nil, &EnvelopeError{Kind: kind, Err: ErrPlaintext}
		}
		return rest, nil
	}
	if len(rest) < sealOverhead {
		return nil, &EnvelopeError{Kind: kind, Err: fmt.Errorf("%w: sealed part of %d bytes, at least %d", ErrTruncated, len(rest), sealOverhead)}
	}
	if len(keys) == 0 {
		return nil, &EnvelopeError{Kind: kind, Err: fmt.Errorf("%w: sealed, and no key is installed", ErrNoKey)}
	}
	aad := b[:len(b)-len(rest)+1]
	nonce := rest[1 : 1+NonceSize]
	ciphertext := rest[1+NonceSize:]
	if dst == nil && len(keys) == 1 {
		// Go's AEADs allow exactly this overlap. With several keys it
		// would not do: a failed Open clears its output, which here is
		// the ciphertext the next key needs.
		dst = ciphertext[:0]
	}
	for _, k := range keys {
		if k == nil || k.NonceSize() != NonceSize || k.Overhead() != TagSize {
			continue
		}
		if out, err := k.Open(dst, nonce, ciphertext, aad); err == nil {
			return out, nil
		}
	}
	return nil, &EnvelopeError{Kind: kind, Err: ErrNoKey}
}
