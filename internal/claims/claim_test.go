package claims

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// testKey is test member i's identity key.
func testKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("identity of member %d", i)))
	return ed25519.NewKeyFromSeed(seed[:])
}

func testPub(i int) ed25519.PublicKey { return testKey(i).Public().(ed25519.PublicKey) }

// testAlive is member name's alive at inc, life 5, its key in it.
func testAlive(name string, inc uint64, key int) *wire.Alive {
	return &wire.Alive{Name: name, Addr: []byte{10, 0, 0, 1, 0x1f, 0x0a}, Incarnation: inc, Meta: []byte("meta"),
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: wire.ProtocolSigned}, Life: 5, Key: testPub(key)}
}

// signed signs a with member key's identity under label.
func signed(a *wire.Alive, label string, key int) *wire.Alive {
	a.Key = testPub(key)
	a.Sig = Sign(testKey(key), AppendAlive(nil, label, a))
	return a
}

// The bytes each kind of claim signs are fixed: a signature made by one
// release must verify in the next.
func TestClaimEncoding(t *testing.T) {
	a := &wire.Alive{Name: "a", Addr: []byte{1, 2}, Incarnation: 3, Meta: []byte("m"),
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: 8, AppMax: 2}, Life: 5, Key: []byte{9}}
	for _, tc := range []struct {
		name  string
		claim []byte
		want  string
	}{
		{"alive", AppendAlive(nil, "L", a),
			"7377696d20636c61696d2076310041014c016100000000000000030000000000000005020102016d010800020109"},
		{"leave", AppendLeave(nil, "L", "a", 3, 5),
			"7377696d20636c61696d207631004c014c016100000000000000030000000000000005"},
		{"suspect", AppendAccusation(nil, "L", Accusation{Name: "a", From: "b", Inc: 3, Life: 5}),
			"7377696d20636c61696d2076310053014c0161000000000000000300000000000000050162"},
		{"dead", AppendAccusation(nil, "L", Accusation{Name: "a", From: "b", Inc: 3, Life: 5, Dead: true}),
			"7377696d20636c61696d2076310044014c0161000000000000000300000000000000050162"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, hex.EncodeToString(tc.claim))
		})
	}
}

// No claim's bytes are another's: a signature is valid for one kind, one
// cluster label, one member, one incarnation and one life.
func TestClaimsDistinct(t *testing.T) {
	base := Accusation{Name: "a", From: "b", Inc: 3, Life: 5}
	claims := map[string][]byte{
		"alive":           AppendAlive(nil, "L", &wire.Alive{Name: "a", Incarnation: 3, Life: 5}),
		"leave":           AppendLeave(nil, "L", "a", 3, 5),
		"suspect":         AppendAccusation(nil, "L", base),
		"dead":            AppendAccusation(nil, "L", Accusation{Name: "a", From: "b", Inc: 3, Life: 5, Dead: true}),
		"other label":     AppendLeave(nil, "M", "a", 3, 5),
		"no label":        AppendLeave(nil, "", "a", 3, 5),
		"other name":      AppendLeave(nil, "L", "b", 3, 5),
		"other inc":       AppendLeave(nil, "L", "a", 4, 5),
		"other life":      AppendLeave(nil, "L", "a", 3, 6),
		"other accuser":   AppendAccusation(nil, "L", Accusation{Name: "a", From: "c", Inc: 3, Life: 5}),
		"label into name": AppendLeave(nil, "La", "", 3, 5),
	}
	seen := map[string]string{}
	for name, c := range claims {
		require.True(t, bytes.HasPrefix(c, []byte(domain)), name)
		if other, ok := seen[string(c)]; ok {
			t.Fatalf("%s and %s sign the same bytes", name, other)
		}
		seen[string(c)] = name
	}
}

// An alive's signature covers every field but the signature and the
// certificate.
func TestAliveClaimCovers(t *testing.T) {
	base := testAlive("a", 1, 1)
	claim := AppendAlive(nil, "", base)
	for _, tc := range []struct {
		name    string
		change  func(a *wire.Alive)
		covered bool
	}{
		{"address", func(a *wire.Alive) { a.Addr = []byte{10, 0, 0, 2, 0x1f, 0x0a} }, true},
		{"metadata", func(a *wire.Alive) { a.Meta = []byte("evil") }, true},
		{"incarnation", func(a *wire.Alive) { a.Incarnation++ }, true},
		{"life", func(a *wire.Alive) { a.Life++ }, true},
		{"versions", func(a *wire.Alive) { a.Versions.AppMax = 3 }, true},
		{"key", func(a *wire.Alive) { a.Key = testPub(2) }, true},
		{"signature", func(a *wire.Alive) { a.Sig = []byte{1} }, false},
		{"certificate", func(a *wire.Alive) { a.Cert = []byte{1} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := cloneAlive(base)
			tc.change(&a)
			require.Equal(t, tc.covered, !bytes.Equal(claim, AppendAlive(nil, "", &a)))
		})
	}
}

// Verify takes a key's signature of the claim and nothing else, whatever
// the sizes a peer sends.
func TestVerify(t *testing.T) {
	claim := AppendLeave(nil, "", "a", 1, 1)
	sig := Sign(testKey(1), claim)
	for _, tc := range []struct {
		name  string
		key   ed25519.PublicKey
		claim []byte
		sig   []byte
		ok    bool
	}{
		{"signed", testPub(1), claim, sig, true},
		{"another key", testPub(2), claim, sig, false},
		{"another claim", testPub(1), AppendLeave(nil, "", "a", 2, 1), sig, false},
		{"short key", testPub(1)[:31], claim, sig, false},
		{"no key", nil, claim, sig, false},
		{"short signature", testPub(1), claim, sig[:63], false},
		{"no signature", testPub(1), claim, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ok, Verify(tc.key, tc.claim, tc.sig))
		})
	}
}
