package wire

import (
	"errors"
	"strconv"
)

// Sentinel errors wrapped by every error this package returns, so that callers
// can classify bad input with errors.Is without parsing messages.
var (
	// ErrTruncated means the input ended before the message did.
	ErrTruncated = errors.New("input truncated")
	// ErrTooLarge means a length or count exceeds one of the package limits
	// (MaxPacketSize, MaxNameLen, MaxMetaLen, ...).
	ErrTooLarge = errors.New("exceeds size limit")
	// ErrUnknownType means the type byte names no message this version knows.
	ErrUnknownType = errors.New("unknown message type")
	// ErrVersion means the packet's version byte is not Version.
	ErrVersion = errors.New("unsupported protocol version")
	// ErrMalformed means the bytes are not a valid encoding of the message:
	// a wrong msgpack kind, a value out of range, too few fields, a compound
	// nested in a compound.
	ErrMalformed = errors.New("malformed encoding")
	// ErrTrailingBytes means bytes follow a complete message where none may.
	ErrTrailingBytes = errors.New("trailing bytes after message")
)

// DecodeError describes input that could not be decoded. It wraps one of the
// sentinel errors above (match it with errors.Is) and says where decoding
// stopped.
type DecodeError struct {
	// Type is the message being decoded, or 0 when the failure came before
	// the type byte was known (packet length, version, stream framing).
	Type Type
	// Field names the field whose encoding was bad (a struct field name such
	// as "Name" or "Members.Meta"), or "" when the failure is not about one
	// field.
	Field string
	// Err is the cause; it wraps a sentinel such as ErrTruncated.
	Err error
}

// Error implements error.
func (e *DecodeError) Error() string {
	s := "wire: decode"
	if e.Type != 0 {
		s += " " + e.Type.String()
	}
	if e.Field != "" {
		s += " " + e.Field
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause, so errors.Is(err, ErrTruncated) works.
func (e *DecodeError) Unwrap() error { return e.Err }

// String returns the message's name as used in logs ("ping", "pingReq", ...).
func (t Type) String() string {
	switch t {
	case TypePing:
		return "ping"
	case TypePingReq:
		return "pingReq"
	case TypeAck:
		return "ack"
	case TypeNack:
		return "nack"
	case TypeAlive:
		return "alive"
	case TypeSuspect:
		return "suspect"
	case TypeDead:
		return "dead"
	case TypePushPull:
		return "pushPull"
	case TypeCompound:
		return "compound"
	case TypeUser:
		return "user"
	case TypeBroadcast:
		return "broadcast"
	case TypeAckPayload:
		return "ackPayload"
	case TypeHeartbeat:
		return "heartbeat"
	case TypeViewDigest:
		return "viewDigest"
	case TypeIHave:
		return "iHave"
	case TypeGraft:
		return "graft"
	case TypePrune:
		return "prune"
	case TypeRefusal:
		return "refusal"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}
