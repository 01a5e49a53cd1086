package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// MaxAddrLen is the longest address field a decoder accepts: EncodeAddr's
// IPv6 form. Addresses are bounded like names so that a hostile delta cannot
// make a receiver store kilobytes per member.
const MaxAddrLen = 18

// EncodeAddr returns the compact binary form of an address.
//
// The form is the IP address (4 bytes for IPv4, 16 for IPv6) followed by the
// port, big-endian: 6 or 18 bytes. An IPv4-mapped IPv6 address is written as
// IPv4, so one host has one encoding, and an IPv6 zone is dropped (it means
// nothing to another host). An invalid AddrPort encodes as nil, which
// DecodeAddr rejects.
func EncodeAddr(ap netip.AddrPort) []byte {
	a := ap.Addr().Unmap()
	switch {
	case a.Is4():
		b := make([]byte, 0, 6)
		a4 := a.As4()
		b = append(b, a4[:]...)
		return binary.BigEndian.AppendUint16(b, ap.Port())
	case a.Is6():
		b := make([]byte, 0, 18)
		a16 := a.As16()
		b = append(b, a16[:]...)
		return binary.BigEndian.AppendUint16(b, ap.Port())
	}
	return nil
}

// DecodeAddr parses EncodeAddr's form.
//
// Any length but 6 or 18 is a *DecodeError wrapping ErrMalformed. An
// IPv4-mapped IPv6 address is returned as IPv4, as EncodeAddr would have
// written it.
func DecodeAddr(b []byte) (netip.AddrPort, error) {
	switch len(b) {
	case 6:
		port := binary.BigEndian.Uint16(b[4:])
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), port), nil
	case 18:
		port := binary.BigEndian.Uint16(b[16:])
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[:16])).Unmap(), port), nil
	}
	return netip.AddrPort{}, &DecodeError{
		Field: "addr",
		Err:   fmt.Errorf("%w: %d bytes, want 6 or 18", ErrMalformed, len(b)),
	}
}
