package wire

import "fmt"

// MaxSmallStreamSize bounds a stream message that is not a push-pull: a TCP
// ping (a ping, and a suspicion riding with it) or its reply (an ack and
// this member's alive, whose metadata may take MaxMetaLen bytes), with room
// for a few more small frames beside them.
const MaxSmallStreamSize = MaxMetaLen + 4<<10

// CheckSmallStreamPacket reports whether b, a stream message expected to be
// small (anything but a push-pull), may be decoded with DecodeStreamPacket:
// it must hold at most MaxSmallStreamSize bytes and no push-pull, neither
// alone nor as a frame of a compound (a push-pull is read with
// ParsePushPull, and only where one belongs).
//
// It reads the compound's frame headers and type bytes only and allocates
// nothing. That is the point: DecodeStreamPacket accepts a compound of
// MaxCompoundParts push-pull frames up to MaxStreamMessageSize bytes and
// expands it to a dozen times its size before the caller could tell that
// it is not what the stream should carry. Failures are *DecodeError
// wrapping ErrTooLarge (the size), ErrMalformed (a push-pull) or whatever
// broke the compound's frame list. A wrong version or an unknown type
// passes: DecodeStreamPacket reports those without allocating.
func CheckSmallStreamPacket(b []byte) error {
	if len(b) > MaxSmallStreamSize {
		return &DecodeError{Err: fmt.Errorf("%w: %d bytes where a message other than a push-pull belongs, limit %d",
			ErrTooLarge, len(b), MaxSmallStreamSize)}
	}
	if len(b) < 2 || b[0] != Version {
		return nil
	}
	switch Type(b[1]) {
	case TypePushPull:
		return &DecodeError{Type: TypePushPull, Err: fmt.Errorf("%w: push-pull where another message belongs", ErrMalformed)}
	case TypeCompound:
	default:
		return nil
	}
	d := decoder{b: b[2:]}
	n := d.arrayLen("Frames", 0, MaxCompoundParts)
	for range n {
		f := compoundItem(&d)
		if d.err != nil {
			break
		}
		if Type(f[0]) == TypePushPull {
			return &DecodeError{Type: TypeCompound, Field: "Frames",
				Err: fmt.Errorf("%w: push-pull frame in a compound", ErrMalformed)}
		}
	}
	if d.err != nil {
		return &DecodeError{Type: TypeCompound, Field: d.field, Err: d.err}
	}
	return nil
}
