package wire

import (
	"errors"
	"fmt"
)

// Minimum encoded sizes, used to reject counts that the remaining input could
// not possibly hold before allocating for them.
const (
	// minMemberStateLen is the smallest MemberState encoding: fixarray
	// header, empty name, nil addr, incarnation, state and nil meta, one
	// byte each.
	minMemberStateLen = 6
)

// AppendFrame appends msg's frame (type byte + msgpack body) to dst.
//
// It fails, returning dst unchanged, when msg breaks a limit its receiver
// enforces (a name over MaxNameLen, metadata over MaxMetaLen, an address over
// MaxAddrLen, too many members or compound parts), so that a sender finds out
// instead of its peers silently dropping the packet. A *Compound encodes as a
// compound frame; its frames must be non-empty and not compounds themselves.
func AppendFrame(dst []byte, msg Message) ([]byte, error) {
	out := append(dst, 0) // type byte, set below once msg is known to be valid
	out, err := appendBody(out, msg)
	if err != nil {
		return dst, err
	}
	out[len(dst)] = byte(msg.Type())
	return out, nil
}

// AppendPacket appends a whole packet (version byte + frame) for msg to dst.
// On error dst is returned unchanged.
func AppendPacket(dst []byte, msg Message) ([]byte, error) {
	out, err := AppendFrame(append(dst, Version), msg)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// AppendCompound appends a packet carrying frames to dst. With one frame it
// writes a plain packet (version byte + that frame), saving the overhead.
//
// The frames are trusted to come from AppendFrame: there is no error result,
// so the caller keeps to MaxCompoundParts frames, none of them a compound,
// and budgets CompoundHeaderMax plus FrameOverheadMax per frame. With no
// frames it writes an empty compound, which decodes to no messages.
func AppendCompound(dst []byte, frames [][]byte) []byte {
	if len(frames) == 1 {
		return append(append(dst, Version), frames[0]...)
	}
	dst = append(dst, Version, byte(TypeCompound))
	return appendCompoundBody(dst, frames)
}

func appendCompoundBody(dst []byte, frames [][]byte) []byte {
	dst = appendArrayLen(dst, len(frames))
	for _, f := range frames {
		dst = append(appendBinLen(dst, len(f)), f...)
	}
	return dst
}

var errNilMessage = errors.New("wire: encode nil message")

// appendBody appends msg's msgpack body: an array of its fields in
// declaration order. Limits are checked before anything is written for the
// field, and the caller discards the partial output on error.
func appendBody(b []byte, msg Message) ([]byte, error) {
	switch m := msg.(type) {
	case *Ping:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkNames(TypePing, "Target", m.Target, "From", m.From); err != nil {
			return b, err
		}
		if m.TargetLife == 0 {
			b = appendArrayLen(b, 3)
		} else {
			b = appendArrayLen(b, 4)
		}
		b = appendUint(b, uint64(m.Seq))
		b = appendString(b, m.Target)
		b = appendString(b, m.From)
		if m.TargetLife != 0 {
			b = appendUint(b, m.TargetLife)
		}
		return b, nil

	case *PingReq:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkNames(TypePingReq, "Target", m.Target, "From", m.From); err != nil {
			return b, err
		}
		if err := checkLen(TypePingReq, "TargetAddr", len(m.TargetAddr), MaxAddrLen); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 4)
		b = appendUint(b, uint64(m.Seq))
		b = appendString(b, m.Target)
		b = appendBin(b, m.TargetAddr)
		return appendString(b, m.From), nil

	case *Ack:
		if m == nil {
			return b, errNilMessage
		}
		b = appendArrayLen(b, 1)
		return appendUint(b, uint64(m.Seq)), nil

	case *Nack:
		if m == nil {
			return b, errNilMessage
		}
		b = appendArrayLen(b, 1)
		return appendUint(b, uint64(m.Seq)), nil

	case *Alive:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkMember(TypeAlive, "", m.Name, m.Addr, m.Meta); err != nil {
			return b, err
		}
		if err := checkProof(TypeAlive, m.Key, m.Sig, m.Cert); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 6+proofFields(m.Key, m.Sig, m.Cert))
		b = appendString(b, m.Name)
		b = appendBin(b, m.Addr)
		b = appendUint(b, m.Incarnation)
		b = appendBin(b, m.Meta)
		b = appendUint(b, m.Versions.pack())
		b = appendUint(b, m.Life)
		return appendProof(b, m.Key, m.Sig, m.Cert), nil

	case *Suspect:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkNames(TypeSuspect, "Name", m.Name, "From", m.From); err != nil {
			return b, err
		}
		if err := checkProof(TypeSuspect, nil, m.Sig, nil); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 5+sigFields(m.Sig))
		b = appendString(b, m.Name)
		b = appendUint(b, m.Incarnation)
		b = appendString(b, m.From)
		b = appendUint(b, uint64(m.Silence))
		b = appendUint(b, m.Life)
		return appendSig(b, m.Sig), nil

	case *Dead:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkNames(TypeDead, "Name", m.Name, "From", m.From); err != nil {
			return b, err
		}
		if err := checkProof(TypeDead, nil, m.Sig, nil); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 5+sigFields(m.Sig))
		b = appendString(b, m.Name)
		b = appendUint(b, m.Incarnation)
		b = appendString(b, m.From)
		b = appendBool(b, m.Left)
		b = appendUint(b, m.Life)
		return appendSig(b, m.Sig), nil

	case *PushPull:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypePushPull, "From", len(m.From), MaxNameLen); err != nil {
			return b, err
		}
		if err := checkLen(TypePushPull, "Members", len(m.Members), MaxPushPullMembers); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 3)
		b = appendString(b, m.From)
		b = appendBool(b, m.Join)
		b = appendArrayLen(b, len(m.Members))
		for i := range m.Members {
			ms := &m.Members[i]
			if err := checkMember(TypePushPull, "Members.", ms.Name, ms.Addr, ms.Meta); err != nil {
				return b, err
			}
			if err := checkProof(TypePushPull, ms.Key, ms.Sig, ms.Cert); err != nil {
				return b, err
			}
			b = appendMemberState(b, ms.Name, ms.Addr, ms.Incarnation, ms.State, ms.Meta, ms.Versions, ms.Life, ms.Key, ms.Sig, ms.Cert)
		}
		return b, nil

	case *Compound:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypeCompound, "Frames", len(m.Frames), MaxCompoundParts); err != nil {
			return b, err
		}
		for _, f := range m.Frames {
			if len(f) == 0 {
				return b, fmt.Errorf("wire: encode compound: empty frame: %w", ErrMalformed)
			}
			if Type(f[0]) == TypeCompound {
				return b, fmt.Errorf("wire: encode compound: nested compound: %w", ErrMalformed)
			}
		}
		return appendCompoundBody(b, m.Frames), nil

	case *User:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypeUser, "From", len(m.From), MaxNameLen); err != nil {
			return b, err
		}
		if err := checkLen(TypeUser, "Payload", len(m.Payload), MaxStreamMessageSize); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 2)
		b = appendString(b, m.From)
		return appendBin(b, m.Payload), nil

	case *Broadcast:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypeBroadcast, "Origin", len(m.Origin), MaxNameLen); err != nil {
			return b, err
		}
		if err := checkLen(TypeBroadcast, "Key", len(m.Key), MaxKeyLen); err != nil {
			return b, err
		}
		if err := checkLen(TypeBroadcast, "Payload", len(m.Payload), MaxPacketSize); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 6)
		b = appendString(b, m.Origin)
		b = appendUint(b, m.Epoch)
		b = appendUint(b, uint64(m.Seq))
		b = appendString(b, m.Key)
		b = appendBin(b, m.Payload)
		return appendUint(b, m.Sent), nil

	case *AckPayload:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypeAckPayload, "Payload", len(m.Payload), MaxPacketSize); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 2)
		b = appendUint(b, uint64(m.Seq))
		return appendBin(b, m.Payload), nil

	case *Heartbeat:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypeHeartbeat, "From", len(m.From), MaxNameLen); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 1)
		return appendString(b, m.From), nil

	case *ViewDigest:
		if m == nil {
			return b, errNilMessage
		}
		b = appendArrayLen(b, 2)
		b = appendUint(b, uint64(m.Live))
		return appendUint(b, uint64(m.Digest)), nil

	case *IHave:
		if m == nil {
			return b, errNilMessage
		}
		return appendIDs(b, TypeIHave, m.IDs)

	case *Graft:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypeGraft, "Origins", len(m.Origins), MaxGraftOrigins); err != nil {
			return b, err
		}
		for _, o := range m.Origins {
			if err := checkLen(TypeGraft, "Origins", len(o), MaxNameLen); err != nil {
				return b, err
			}
		}
		if err := checkLen(TypeGraft, "IDs", len(m.IDs), MaxTreeIDs); err != nil {
			return b, err
		}
		// Empty lists are msgpack nil, as the library writes a nil slice.
		b = appendArrayLen(b, 2)
		if len(m.IDs) == 0 {
			b = append(b, mpNil)
		} else {
			b = appendUints(b, m.IDs)
		}
		if len(m.Origins) == 0 {
			return append(b, mpNil), nil
		}
		b = appendArrayLen(b, len(m.Origins))
		for _, o := range m.Origins {
			b = appendString(b, o)
		}
		return b, nil

	case *Refusal:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypeRefusal, "Reason", len(m.Reason), MaxRefusalLen); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 1)
		return appendString(b, m.Reason), nil

	case *Prune:
		if m == nil {
			return b, errNilMessage
		}
		if err := checkLen(TypePrune, "Origin", len(m.Origin), MaxNameLen); err != nil {
			return b, err
		}
		b = appendArrayLen(b, 1)
		return appendString(b, m.Origin), nil

	case nil:
		return b, errNilMessage
	}
	return b, fmt.Errorf("wire: encode %T: %w", msg, ErrUnknownType)
}

// appendIDs appends the body of an IHave: an array holding the
// array of identifiers.
func appendIDs(b []byte, t Type, ids []uint64) ([]byte, error) {
	if err := checkLen(t, "IDs", len(ids), MaxTreeIDs); err != nil {
		return b, err
	}
	b = appendArrayLen(b, 1)
	return appendUints(b, ids), nil
}

func appendUints(b []byte, ids []uint64) []byte {
	b = appendArrayLen(b, len(ids))
	for _, id := range ids {
		b = appendUint(b, id)
	}
	return b
}

// checkLen reports a length over its limit as an error wrapping ErrTooLarge.
func checkLen(t Type, field string, n, max int) error {
	if n > max {
		return fmt.Errorf("wire: encode %s: %s is %d long, limit %d: %w", t, field, n, max, ErrTooLarge)
	}
	return nil
}

func checkNames(t Type, f1, s1, f2, s2 string) error {
	if err := checkLen(t, f1, len(s1), MaxNameLen); err != nil {
		return err
	}
	return checkLen(t, f2, len(s2), MaxNameLen)
}

// appendMemberState appends one push-pull entry. The Versions, a field
// that members predating versioning skip, come last.
func appendMemberState(b []byte, name string, addr []byte, inc uint64, state uint8, meta []byte, v Versions, life uint64, key, sig, cert []byte) []byte {
	b = appendArrayLen(b, 7+proofFields(key, sig, cert))
	b = appendString(b, name)
	b = appendBin(b, addr)
	b = appendUint(b, inc)
	b = appendUint(b, uint64(state))
	b = appendBin(b, meta)
	b = appendUint(b, v.pack())
	b = appendUint(b, life)
	return appendProof(b, key, sig, cert)
}

// proofFields is how many trailing fields a claim's key, signature and
// certificate take: none when unsigned, Key and Sig, and Cert when set.
func proofFields(key, sig, cert []byte) int {
	switch {
	case len(cert) > 0:
		return 3
	case len(key) > 0 || len(sig) > 0:
		return 2
	}
	return 0
}

// appendProof appends the trailing fields proofFields counts.
func appendProof(b, key, sig, cert []byte) []byte {
	switch proofFields(key, sig, cert) {
	case 3:
		return appendBin(appendBin(appendBin(b, key), sig), cert)
	case 2:
		return appendBin(appendBin(b, key), sig)
	}
	return b
}

func sigFields(sig []byte) int {
	if len(sig) > 0 {
		return 1
	}
	return 0
}

func appendSig(b, sig []byte) []byte {
	if len(sig) > 0 {
		return appendBin(b, sig)
	}
	return b
}

// checkProof checks that a key and a signature are empty or of their
// size, and the certificate's length.
func checkProof(t Type, key, sig, cert []byte) error {
	switch {
	case len(key) != 0 && len(key) != KeyLen:
		return fmt.Errorf("wire: encode %v: Key of %d bytes, want %d: %w", t, len(key), KeyLen, ErrMalformed)
	case len(sig) != 0 && len(sig) != SigLen:
		return fmt.Errorf("wire: encode %v: Sig of %d bytes, want %d: %w", t, len(sig), SigLen, ErrMalformed)
	}
	return checkLen(t, "Cert", len(cert), MaxCertLen)
}

// checkMember checks the limits of the fields Alive and MemberState share.
// prefix qualifies the field names; it is joined to them only on the error
// path, so the push-pull loop does not allocate.
func checkMember(t Type, prefix, name string, addr, meta []byte) error {
	if len(name) <= MaxNameLen && len(addr) <= MaxAddrLen && len(meta) <= MaxMetaLen {
		return nil
	}
	if err := checkLen(t, prefix+"Name", len(name), MaxNameLen); err != nil {
		return err
	}
	if err := checkLen(t, prefix+"Addr", len(addr), MaxAddrLen); err != nil {
		return err
	}
	return checkLen(t, prefix+"Meta", len(meta), MaxMetaLen)
}
