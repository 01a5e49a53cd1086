package swim

import (
	"crypto/ed25519"
	"time"

	"github.com/swim-go/swim/internal/claims"
)

// Certificate is a member certificate's content.
type Certificate = claims.Certificate

// Errors of member certificates.
var (
	ErrCertificateExpired     = claims.ErrCertificateExpired
	ErrCertificateUnknownRoot = claims.ErrCertificateUnknownRoot
	ErrCertificateMismatch    = claims.ErrCertificateMismatch
	ErrCertificateMalformed   = claims.ErrCertificateMalformed
)

// NewCertificate signs a certificate binding name to key until notAfter,
// with root, one of the cluster's authorities.
func NewCertificate(root ed25519.PrivateKey, name string, key ed25519.PublicKey, notAfter time.Time) ([]byte, error) {
	return claims.NewCertificate(root, name, key, notAfter)
}

// ParseCertificate reads a certificate's content, without checking its
// signature.
func ParseCertificate(b []byte) (Certificate, error) { return claims.ParseCertificate(b) }

// VerifyCertificate checks cert: that one of roots signed it, for name and
// key, and that it has not expired at now.
func VerifyCertificate(cert []byte, name string, key ed25519.PublicKey, roots []ed25519.PublicKey, now time.Time) error {
	return claims.VerifyCertificate(cert, name, key, roots, now)
}
