// Package certificate is the operators' toolkit for the member
// certificates of a swim cluster's authority: New signs one with a root
// key, Parse reads one, Verify checks one as members do.
//
// A member certificate binds a name to an identity key until an expiry,
// signed by one of the cluster's authorities (swim's Config.Claims.TrustedRoots).
// With roots configured, a claim about a name is taken only under a key a
// valid certificate binds it to, so a name can be taken only with a
// certificate: a key holder can neither take a live member's name nor
// invent members. A member carries its own in Config.Claims.Certificate.
//
// Rotation: a member gets a new certificate (a new expiry, or a new key)
// and restarts with it, or installs it on a running member with
// Memberlist.SetCertificate, which announces it at once. Members check
// expiry against their own clocks: a certificate that expires is refused
// from then on, so issue the next one well before (a fraction of the
// lifetime, as with TLS certificates), and keep clocks within a small
// fraction of it. Retiring a root: issue certificates from the new root,
// add it to every member's Claims.TrustedRoots, switch each member's certificate,
// then remove the old root.
//
// Encoding: a version byte, the name (a length byte, the bytes), the
// 32-byte key, the expiry in Unix seconds (8 bytes, big-endian), the first
// 8 bytes of the root's public key, and the root's 64-byte Ed25519
// signature of everything before it under a domain of its own.
package certificate

import (
	"crypto/ed25519"
	"time"

	"github.com/swim-go/swim/internal/claims"
)

// Certificate is a member certificate's content.
type Certificate struct {
	Name     string
	Key      ed25519.PublicKey
	NotAfter time.Time
	// Root is the first 8 bytes of the public key of the root that
	// signed it.
	Root [8]byte
}

// Errors of member certificates, matched with errors.Is (Verify's, and
// those of a swim Machine or Memberlist refusing a certificate).
var (
	ErrExpired     = claims.ErrCertificateExpired
	ErrUnknownRoot = claims.ErrCertificateUnknownRoot
	ErrMismatch    = claims.ErrCertificateMismatch
	ErrMalformed   = claims.ErrCertificateMalformed
)

// New signs a certificate binding name to key until notAfter, with root,
// one of the cluster's authorities.
func New(root ed25519.PrivateKey, name string, key ed25519.PublicKey, notAfter time.Time) ([]byte, error) {
	return claims.NewCertificate(root, name, key, notAfter)
}

// Parse reads a certificate's content, without checking its signature
// (see Verify).
func Parse(b []byte) (Certificate, error) {
	c, err := claims.ParseCertificate(b)
	return Certificate{Name: c.Name, Key: c.Key, NotAfter: c.NotAfter, Root: c.Root}, err
}

// Verify checks cert: that one of roots signed it, for name and key, and
// that it has not expired at now.
func Verify(cert []byte, name string, key ed25519.PublicKey, roots []ed25519.PublicKey, now time.Time) error {
	return claims.VerifyCertificate(cert, name, key, roots, now)
}
