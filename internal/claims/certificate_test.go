package claims

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A certificate binds one name to one key until its expiry, for the roots
// that include its signer.
func TestCertificates(t *testing.T) {
	rootPub, root, _ := ed25519.GenerateKey(nil)
	otherPub, other, _ := ed25519.GenerateKey(nil)
	notAfter := testNow.Add(time.Hour)
	cert, err := NewCertificate(root, "a", testPub(1), notAfter)
	require.NoError(t, err)
	c, err := ParseCertificate(cert)
	require.NoError(t, err)
	require.Equal(t, "a", c.Name)
	require.Equal(t, testPub(1), c.Key)
	require.True(t, notAfter.Equal(c.NotAfter))
	require.Equal(t, []byte(rootPub[:8]), c.Root[:])

	forged := append([]byte(nil), cert...)
	forged[len(forged)-1] ^= 1
	byOther, err := NewCertificate(other, "a", testPub(1), notAfter)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		cert  []byte
		for_  string
		key   ed25519.PublicKey
		roots []ed25519.PublicKey
		at    time.Time
		want  error
	}{
		{"valid", cert, "a", testPub(1), []ed25519.PublicKey{rootPub}, testNow, nil},
		{"valid among roots", cert, "a", testPub(1), []ed25519.PublicKey{otherPub, rootPub}, testNow, nil},
		{"another name", cert, "b", testPub(1), []ed25519.PublicKey{rootPub}, testNow, ErrCertificateMismatch},
		{"another key", cert, "a", testPub(2), []ed25519.PublicKey{rootPub}, testNow, ErrCertificateMismatch},
		{"expired", cert, "a", testPub(1), []ed25519.PublicKey{rootPub}, notAfter, ErrCertificateExpired},
		{"unknown root", byOther, "a", testPub(1), []ed25519.PublicKey{rootPub}, testNow, ErrCertificateUnknownRoot},
		{"bad signature", forged, "a", testPub(1), []ed25519.PublicKey{rootPub}, testNow, ErrCertificateUnknownRoot},
		{"empty", nil, "a", testPub(1), []ed25519.PublicKey{rootPub}, testNow, ErrCertificateMalformed},
		{"truncated", cert[:len(cert)-1], "a", testPub(1), []ed25519.PublicKey{rootPub}, testNow, ErrCertificateMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyCertificate(tc.cert, tc.for_, tc.key, tc.roots, tc.at)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

func TestNewCertificateChecksItsInput(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	for _, tc := range []struct {
		name     string
		root     ed25519.PrivateKey
		subject  string
		key      ed25519.PublicKey
		notAfter time.Time
		want     string
	}{
		{"short root", root[:10], "a", testPub(1), testNow, "root key of 10 bytes"},
		{"short key", root, "a", testPub(1)[:5], testNow, "key of 5 bytes"},
		{"no name", root, "", testPub(1), testNow, "name of 0 bytes"},
		{"before 1970", root, "a", testPub(1), time.Unix(0, 0), "before 1970"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCertificate(tc.root, tc.subject, tc.key, tc.notAfter)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
