package wire

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncodeAddr(t *testing.T) {
	tests := []struct {
		name string
		in   netip.AddrPort
		want string // hex, "" for nil
		back netip.AddrPort
	}{
		{"ipv4", netip.MustParseAddrPort("10.0.0.1:7946"), "0a0000011f0a", netip.MustParseAddrPort("10.0.0.1:7946")},
		{"ipv4 port 0", netip.MustParseAddrPort("0.0.0.0:0"), "000000000000", netip.MustParseAddrPort("0.0.0.0:0")},
		{"ipv4 max port", netip.MustParseAddrPort("255.255.255.255:65535"), "ffffffffffff", netip.MustParseAddrPort("255.255.255.255:65535")},
		{"ipv6", netip.MustParseAddrPort("[2001:db8::1]:7946"), "20010db80000000000000000000000011f0a", netip.MustParseAddrPort("[2001:db8::1]:7946")},
		{"ipv4-mapped unmapped", netip.MustParseAddrPort("[::ffff:10.0.0.1]:7946"), "0a0000011f0a", netip.MustParseAddrPort("10.0.0.1:7946")},
		{"zone dropped", netip.MustParseAddrPort("[fe80::1%eth0]:80"), "fe8000000000000000000000000000010050", netip.MustParseAddrPort("[fe80::1]:80")},
		{"invalid", netip.AddrPort{}, "", netip.AddrPort{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeAddr(tc.in)
			if tc.want == "" {
				require.Nil(t, b)
				_, err := DecodeAddr(b)
				requireDecodeError(t, err, ErrMalformed)
				return
			}
			require.Equal(t, unhex(t, tc.want), b)
			got, err := DecodeAddr(b)
			require.NoError(t, err)
			require.Equal(t, tc.back, got)
		})
	}
}

func TestDecodeAddr(t *testing.T) {
	// An 18-byte IPv4-mapped address (which EncodeAddr never writes) comes
	// back as IPv4, so it survives a re-encode unchanged.
	got, err := DecodeAddr(unhex(t, "00000000000000000000ffff0a0000011f0a"))
	require.NoError(t, err)
	require.Equal(t, netip.MustParseAddrPort("10.0.0.1:7946"), got)

	for _, n := range []int{0, 1, 5, 7, 16, 17, 19, 100} {
		_, err := DecodeAddr(make([]byte, n))
		requireDecodeError(t, err, ErrMalformed)
	}
}
