package swim

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/certificate"
)

// TestUnsignedClusterSwitchesToSignatures: 8 members of an unsigned
// cluster switch to signing, then to required signatures, one member at a
// time at run time, with no suspicion and no claim refused; then each has
// every other's key bound, and a member that does not sign cannot join.
func TestUnsignedClusterSwitchesToSignatures(t *testing.T) {
	t.Parallel()
	members := formCluster(t, namedConfigs(8, "sig", testConfig)...)
	stepInTurn(t, members, []clusterStep{
		{"sign", func(m *testMember) error { return m.SetSignatures(SignaturesSign) }},
		{"required", func(m *testMember) error { return m.SetSignatures(SignaturesRequired) }},
	})
	for _, m := range members {
		awaitTraffic(t, m, 3)
		require.Equal(t, SignaturesRequired, m.Signatures())
	}
	require.Zero(t, countEvents(members, EventSuspect), "suspicions during the switch: %s", views(members))
	require.Zero(t, sumStats(members, func(s MemberlistStats) uint64 {
		return s.Claims.Unsigned + s.Claims.Forged + s.Claims.KeyConflicts
	}), "claims refused during the switch")
	require.Eventually(t, func() bool {
		for _, m := range members {
			for _, o := range members {
				if o != m && !m.machineBound(o) {
					return false
				}
			}
		}
		return true
	}, formTimeout, pollEvery, "keys not bound everywhere")

	unsigned := startMember(t, testConfig("unsigned"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := unsigned.Join(ctx, members[3].LocalMember().Addr.String())
	require.ErrorIs(t, err, ErrJoinRefused)
	require.ErrorContains(t, err, "signatures required")
	requireNotMembers(t, members, "unsigned")
}

// machineBound reports whether m holds o's name bound to o's key.
func (m *testMember) machineBound(o *testMember) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return string(m.machine.sigs.Bound(o.LocalMember().Name)) == string(o.IdentityKey())
}

// certConfig is testConfig for a cluster whose authority is root: signed
// claims required, and a certificate from issuer valid until notAfter.
func certConfig(t *testing.T, name string, roots []ed25519.PublicKey, issuer ed25519.PrivateKey, notAfter time.Time) *Config {
	c := testConfig(name)
	_, c.Claims.Identity, _ = ed25519.GenerateKey(nil)
	c.Claims.Signatures = SignaturesRequired
	c.Claims.TrustedRoots = roots
	cert, err := certificate.New(issuer, name, c.Claims.Identity.Public().(ed25519.PublicKey), notAfter)
	require.NoError(t, err)
	c.Claims.Certificate = cert
	return c
}

// TestCertificateErrors: in a cluster with an authority, members with
// certificates join; a member whose certificate expired cannot start, and
// one whose certificate a root the cluster does not trust signed is told
// so by the seed when it joins; neither becomes a member.
func TestCertificateErrors(t *testing.T) {
	t.Parallel()
	rootPub, root, _ := ed25519.GenerateKey(nil)
	otherPub, other, _ := ed25519.GenerateKey(nil)
	roots := []ed25519.PublicKey{rootPub}
	later := time.Now().Add(time.Hour)
	members := formCluster(t,
		certConfig(t, "ca-0", roots, root, later),
		certConfig(t, "ca-1", roots, root, later),
		certConfig(t, "ca-2", roots, root, later))

	expired := certConfig(t, "expired", roots, root, time.Now().Add(-time.Minute))
	_, err := New(expired)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "certificate expired")

	_, err = New(certConfig(t, "foreign", roots, other, later))
	require.ErrorContains(t, err, "not signed by a trusted root", "its own roots do not include the issuer")

	// A member that trusts its own issuer: the cluster's seed refuses it.
	foreign := startMember(t, certConfig(t, "foreign", []ed25519.PublicKey{rootPub, otherPub}, other, later))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err = foreign.Join(ctx, members[1].LocalMember().Addr.String())
	require.ErrorIs(t, err, ErrJoinRefused)
	require.ErrorContains(t, err, `certificate of "foreign"`)
	require.ErrorContains(t, err, "not signed by a trusted root")
	require.True(t, strings.Contains(err.Error(), members[1].LocalMember().Addr.String()), "the error names the seed: %v", err)
	for _, m := range members {
		awaitTraffic(t, m, 3)
	}
	requireNotMembers(t, members, "foreign")
	require.Positive(t, members[1].Stats().Claims.CertificatesRefused)
	require.Zero(t, countEvents(members, EventSuspect))
}
