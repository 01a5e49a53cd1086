package certificate_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/certificate"
)

// An operator issues a certificate, reads it back and checks it as a
// member would.
func TestIssueReadVerify(t *testing.T) {
	rootPub, root, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	key, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cert, err := certificate.New(root, "node-1", key, now.Add(time.Hour))
	require.NoError(t, err)

	c, err := certificate.Parse(cert)
	require.NoError(t, err)
	require.Equal(t, "node-1", c.Name)
	require.Equal(t, key, c.Key)
	require.True(t, now.Add(time.Hour).Equal(c.NotAfter))
	require.Equal(t, []byte(rootPub[:8]), c.Root[:])

	roots := []ed25519.PublicKey{rootPub}
	for _, tc := range []struct {
		name string
		for_ string
		at   time.Time
		want error
	}{
		{"valid", "node-1", now, nil},
		{"another name", "node-2", now, certificate.ErrMismatch},
		{"expired", "node-1", now.Add(time.Hour), certificate.ErrExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := certificate.Verify(cert, tc.for_, key, roots, tc.at)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
	otherPub, _, _ := ed25519.GenerateKey(nil)
	require.ErrorIs(t, certificate.Verify(cert, "node-1", key, []ed25519.PublicKey{otherPub}, now), certificate.ErrUnknownRoot)
	_, err = certificate.Parse(cert[:10])
	require.ErrorIs(t, err, certificate.ErrMalformed)
}
