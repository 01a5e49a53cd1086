package claims

import (
	"crypto/ed25519"
	"encoding/binary"

	"github.com/swim-go/swim/internal/wire"
)

// Claim kinds, each signed under its own tag so that no signature of one
// kind can pass for another.
const (
	kindAlive   byte = 'A'
	kindLeave   byte = 'L'
	kindSuspect byte = 'S'
	kindDead    byte = 'D'
)

// domain starts every signed claim: these signatures are valid for
// nothing else the key may sign.
const domain = "swim claim v1\x00"

// Accusation identifies one accusation: by whom (From), of whom (Name), at
// which incarnation and life, suspect or dead.
type Accusation struct {
	Name, From string
	Inc, Life  uint64
	Dead       bool
}

// appendHead writes what every claim starts with: the domain, the kind,
// the cluster label, the name, the incarnation and the life; fields of
// variable length are prefixed by it.
func appendHead(b []byte, kind byte, label, name string, inc, life uint64) []byte {
	b = append(b, domain...)
	b = append(b, kind)
	b = appendField(b, []byte(label))
	b = appendField(b, []byte(name))
	b = binary.BigEndian.AppendUint64(b, inc)
	return binary.BigEndian.AppendUint64(b, life)
}

func appendField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

// AppendAlive appends to b what an alive's signature covers under the
// cluster label: everything in it but the signature and the certificate
// (which its authority signed).
func AppendAlive(b []byte, label string, a *wire.Alive) []byte {
	b = appendHead(b, kindAlive, label, a.Name, a.Incarnation, a.Life)
	b = appendField(b, a.Addr)
	b = appendField(b, a.Meta)
	v := a.Versions
	b = append(b, v.ProtocolMin, v.ProtocolMax, v.AppMin, v.AppMax)
	return appendField(b, a.Key)
}

// AppendLeave appends to b what the signature of name's leave at inc and
// life covers.
func AppendLeave(b []byte, label, name string, inc, life uint64) []byte {
	return appendHead(b, kindLeave, label, name, inc, life)
}

// AppendAccusation appends to b what the accuser's signature of k covers.
func AppendAccusation(b []byte, label string, k Accusation) []byte {
	kind := kindSuspect
	if k.Dead {
		kind = kindDead
	}
	b = appendHead(b, kind, label, k.Name, k.Inc, k.Life)
	return appendField(b, []byte(k.From))
}

// Sign is key's signature of claim.
func Sign(key ed25519.PrivateKey, claim []byte) []byte { return ed25519.Sign(key, claim) }

// Verify reports whether sig is key's signature of claim.
func Verify(key ed25519.PublicKey, claim, sig []byte) bool {
	return len(key) == ed25519.PublicKeySize && len(sig) == ed25519.SignatureSize && ed25519.Verify(key, claim, sig)
}
