package claims

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// A member certificate binds a name to an identity key until an expiry,
// signed by one of the cluster's authorities (the trusted roots). With
// roots, a claim about a name is taken only under a key a valid
// certificate binds it to, so a name can be taken only with a certificate:
// a key holder can neither take a live member's name nor invent members.
//
// Encoding: a version byte, the name (a length byte, the bytes), the 32-byte
// key, the expiry in Unix seconds (8 bytes, big-endian), the first 8 bytes
// of the root's public key, and the root's 64-byte Ed25519 signature of
// everything before it under a domain of its own.

// Certificate is a member certificate's content.
type Certificate struct {
	Name     string
	Key      ed25519.PublicKey
	NotAfter time.Time
	// Root is the first 8 bytes of the public key of the root that
	// signed it (ParseCertificate fills it in).
	Root [8]byte
}

const (
	certVersion = 1
	certDomain  = "swim member certificate v1\x00"
)

// Errors of member certificates.
var (
	ErrCertificateExpired     = errors.New("certificate expired")
	ErrCertificateUnknownRoot = errors.New("certificate not signed by a trusted root")
	ErrCertificateMismatch    = errors.New("certificate is for another name or key")
	ErrCertificateMalformed   = errors.New("malformed certificate")
)

// NewCertificate signs a certificate binding name to key until notAfter,
// with root, one of the cluster's authorities.
func NewCertificate(root ed25519.PrivateKey, name string, key ed25519.PublicKey, notAfter time.Time) ([]byte, error) {
	switch {
	case len(root) != ed25519.PrivateKeySize:
		return nil, fmt.Errorf("swim: certificate root key of %d bytes, want %d", len(root), ed25519.PrivateKeySize)
	case len(key) != ed25519.PublicKeySize:
		return nil, fmt.Errorf("swim: certificate key of %d bytes, want %d", len(key), ed25519.PublicKeySize)
	case name == "" || len(name) > wire.MaxNameLen:
		return nil, fmt.Errorf("swim: certificate name of %d bytes, want 1..%d", len(name), wire.MaxNameLen)
	case notAfter.Unix() <= 0:
		return nil, errors.New("swim: certificate expiry before 1970")
	}
	body := appendCertBody(nil, name, key, notAfter, root.Public().(ed25519.PublicKey))
	sig := ed25519.Sign(root, append([]byte(certDomain), body...))
	return append(body, sig...), nil
}

func appendCertBody(b []byte, name string, key ed25519.PublicKey, notAfter time.Time, root ed25519.PublicKey) []byte {
	b = append(b, certVersion, byte(len(name)))
	b = append(b, name...)
	b = append(b, key...)
	b = binary.BigEndian.AppendUint64(b, uint64(notAfter.Unix()))
	return append(b, root[:8]...)
}

// ParseCertificate reads a certificate's content, without checking its
// signature (see VerifyCertificate).
func ParseCertificate(b []byte) (Certificate, error) {
	var c Certificate
	if len(b) < 2 || b[0] != certVersion {
		return c, ErrCertificateMalformed
	}
	n := int(b[1])
	if n == 0 || len(b) != 2+n+ed25519.PublicKeySize+8+8+ed25519.SignatureSize {
		return c, ErrCertificateMalformed
	}
	p := b[2:]
	c.Name = string(p[:n])
	p = p[n:]
	c.Key = ed25519.PublicKey(bytes.Clone(p[:ed25519.PublicKeySize]))
	p = p[ed25519.PublicKeySize:]
	exp := binary.BigEndian.Uint64(p)
	if exp > 1<<40 {
		return c, ErrCertificateMalformed
	}
	c.NotAfter = time.Unix(int64(exp), 0)
	copy(c.Root[:], p[8:16])
	return c, nil
}

// VerifyCertificate checks cert: that one of roots signed it, for name and
// key, and that it has not expired at now.
func VerifyCertificate(cert []byte, name string, key ed25519.PublicKey, roots []ed25519.PublicKey, now time.Time) error {
	c, err := ParseCertificate(cert)
	if err != nil {
		return err
	}
	if err := c.check(name, key, roots, now); err != nil {
		return err
	}
	return verifyCertSig(cert, roots)
}

// check checks c's name, key, expiry and root (not its signature, which
// verifyCertSig checks).
func (c Certificate) check(name string, key ed25519.PublicKey, roots []ed25519.PublicKey, now time.Time) error {
	if c.Name != name || !bytes.Equal(c.Key, key) {
		return fmt.Errorf("%w: %q", ErrCertificateMismatch, c.Name)
	}
	if !now.Before(c.NotAfter) {
		return fmt.Errorf("%w at %s", ErrCertificateExpired, c.NotAfter.UTC().Format(time.RFC3339))
	}
	if rootOf(c.Root, roots) == nil {
		return fmt.Errorf("%w (root %x)", ErrCertificateUnknownRoot, c.Root)
	}
	return nil
}

func rootOf(id [8]byte, roots []ed25519.PublicKey) ed25519.PublicKey {
	for _, r := range roots {
		if len(r) == ed25519.PublicKeySize && bytes.Equal(r[:8], id[:]) {
			return r
		}
	}
	return nil
}

// verifyCertSig checks a well-formed certificate's signature against the
// root it names.
func verifyCertSig(cert []byte, roots []ed25519.PublicKey) error {
	c, err := ParseCertificate(cert)
	if err != nil {
		return err
	}
	root := rootOf(c.Root, roots)
	if root == nil {
		return fmt.Errorf("%w (root %x)", ErrCertificateUnknownRoot, c.Root)
	}
	body, sig := cert[:len(cert)-ed25519.SignatureSize], cert[len(cert)-ed25519.SignatureSize:]
	if !ed25519.Verify(root, append([]byte(certDomain), body...), sig) {
		return fmt.Errorf("%w (bad signature)", ErrCertificateUnknownRoot)
	}
	return nil
}
