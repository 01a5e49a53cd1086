package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// streamReadChunk is the most ReadStreamMessage allocates ahead of the bytes
// it has received. A peer announcing a MaxStreamMessageSize message and then
// sending nothing costs this much, not 32 MiB; honest large messages pay a
// few extra copies as the buffer doubles.
const streamReadChunk = 64 << 10

// StreamHeaderLen is the size of the length prefix before each stream
// message: 4 bytes, big-endian.
const StreamHeaderLen = 4

// WriteStreamMessage writes one length-prefixed packet to a stream.
//
// The 4-byte big-endian length and the packet go out in one writev on a
// net.Conn that supports it (net.Buffers), not as two segments. A packet that
// is empty or larger than MaxStreamMessageSize is refused, since the reader
// would refuse it.
func WriteStreamMessage(w io.Writer, packet []byte) error {
	if len(packet) == 0 {
		return fmt.Errorf("wire: write stream message: empty packet: %w", ErrTruncated)
	}
	if len(packet) > MaxStreamMessageSize {
		return fmt.Errorf("wire: write stream message: %d bytes, limit %d: %w", len(packet), MaxStreamMessageSize, ErrTooLarge)
	}
	var hdr [StreamHeaderLen]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(packet)))
	bufs := net.Buffers{hdr[:], packet}
	if _, err := bufs.WriteTo(w); err != nil {
		return fmt.Errorf("wire: write stream message: %w", err)
	}
	return nil
}

// ReadStreamMessage reads one length-prefixed packet, refusing more than max bytes.
//
// max <= 0 or above MaxStreamMessageSize means MaxStreamMessageSize. A length
// over the limit, or zero, is a *DecodeError (ErrTooLarge, ErrMalformed) returned
// before any allocation; the stream is then out of sync and should be closed.
// A stream that ends cleanly before the first length byte returns io.EOF; one
// that ends inside a message returns a *DecodeError wrapping both ErrTruncated
// and io.ErrUnexpectedEOF. Other read errors (deadlines, resets) are returned
// wrapped, so errors.Is and net.Error checks still see them.
func ReadStreamMessage(r io.Reader, max int) ([]byte, error) {
	limit := MaxStreamMessageSize
	if max > 0 && max < limit {
		limit = max
	}
	var hdr [StreamHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, streamReadError("length", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil, &DecodeError{Field: "length", Err: fmt.Errorf("%w: zero-length message", ErrMalformed)}
	}
	if uint64(n) > uint64(limit) {
		return nil, &DecodeError{Field: "length", Err: fmt.Errorf("%w: message of %d bytes, limit %d", ErrTooLarge, n, limit)}
	}
	buf := make([]byte, min(int(n), streamReadChunk))
	got := 0
	for {
		k, err := io.ReadFull(r, buf[got:])
		got += k
		if err != nil {
			return nil, streamReadError("body", err)
		}
		if got == int(n) {
			return buf, nil
		}
		grown := make([]byte, min(int(n), 2*len(buf)))
		copy(grown, buf)
		buf = grown
	}
}

// streamReadError classifies a failed read: the stream ending early is a
// truncated message, anything else is the transport's error.
func streamReadError(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &DecodeError{Field: what, Err: fmt.Errorf("%w: %w", ErrTruncated, io.ErrUnexpectedEOF)}
	}
	return fmt.Errorf("wire: read stream message %s: %w", what, err)
}
