package claims

import (
	"bytes"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newTable is member 0's Table, called "self", in mode.
func newTable(mode Mode) *Table {
	t := &Table{}
	t.Init(Config{Name: "self", Mode: mode, Identity: testKey(0), MaxMembers: 100, ProbeInterval: time.Second})
	return t
}

// boundTable is newTable with "a" bound to member 1's key.
func boundTable(mode Mode) *Table {
	t := newTable(mode)
	t.KeepAlive(signed(testAlive("a", 1, 1), "", 1))
	return t
}

// ProveAlive takes an alive signed by the key its name is bound to, or
// the first key a name is seen with; it drops and counts the rest, a new
// life under another key too (without an authority a name stays with its
// key).
func TestProveAlive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		table   func() *Table
		alive   *wire.Alive
		newLife bool
		ok      bool
		counted func(Stats) uint64
	}{
		{"off: anything", func() *Table { return boundTable(ModeOff) }, testAlive("a", 2, 1), false, true, nil},
		{"unsigned, unbound, sign mode", func() *Table { return newTable(ModeSign) }, testAlive("a", 2, 1), false, true, nil},
		{"unsigned, unbound, required", func() *Table { return newTable(ModeRequired) }, testAlive("a", 2, 1), false, false,
			func(s Stats) uint64 { return s.ClaimsUnsigned }},
		{"unsigned, bound", func() *Table { return boundTable(ModeSign) }, testAlive("a", 2, 1), false, false,
			func(s Stats) uint64 { return s.ClaimsUnsigned }},
		{"first key", func() *Table { return newTable(ModeRequired) }, signed(testAlive("a", 2, 1), "", 1), false, true, nil},
		{"bound key", func() *Table { return boundTable(ModeRequired) }, signed(testAlive("a", 2, 1), "", 1), false, true, nil},
		{"another key, same life", func() *Table { return boundTable(ModeRequired) }, signed(testAlive("a", 2, 2), "", 2), false, false,
			func(s Stats) uint64 { return s.KeyConflicts }},
		{"another key, new life", func() *Table { return boundTable(ModeRequired) }, signed(testAlive("a", 2, 2), "", 2), true, false,
			func(s Stats) uint64 { return s.KeyConflicts }},
		{"signed under another label", func() *Table { return newTable(ModeRequired) }, signed(testAlive("a", 2, 1), "other", 1), false, false,
			func(s Stats) uint64 { return s.ClaimsForged }},
		{"key and signature of different members", func() *Table { return newTable(ModeRequired) },
			func() *wire.Alive { a := signed(testAlive("a", 2, 1), "", 1); a.Key = testPub(2); return a }(), false, false,
			func(s Stats) uint64 { return s.ClaimsForged }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := tc.table()
			require.Equal(t, tc.ok, tb.ProveAlive(testNow, tc.alive, tc.newLife))
			if tc.counted != nil {
				require.Equal(t, uint64(1), tc.counted(tb.Stats()))
			}
		})
	}
}

// A name is bound to the key of the first signed alive kept, and to a new
// one only when a new key is kept; Forget unbinds it.
func TestBoundKeys(t *testing.T) {
	tb := newTable(ModeSign)
	require.Nil(t, tb.Bound("a"))
	require.False(t, tb.Holds("a"))
	tb.KeepAlive(testAlive("a", 1, 1)) // unsigned: binds nothing
	require.Nil(t, tb.Bound("a"))
	tb.KeepAlive(signed(testAlive("a", 1, 1), "", 1))
	require.Equal(t, []byte(testPub(1)), tb.Bound("a"))
	require.True(t, tb.BoundLately("a"))
	for range RecentExchanges {
		tb.Exchange()
	}
	require.False(t, tb.BoundLately("a"))
	tb.KeepAlive(signed(testAlive("a", 2, 1), "", 1))
	require.False(t, tb.BoundLately("a"), "the same key: bound since before")
	require.True(t, tb.Recent("a"), "a proof kept lately")
	tb.KeepAlive(signed(testAlive("a", 1, 2), "", 2))
	require.Equal(t, []byte(testPub(2)), tb.Bound("a"))
	require.True(t, tb.BoundLately("a"))
	tb.Forget("a")
	require.Nil(t, tb.Bound("a"))
	require.False(t, tb.Recent("a"))

	off := newTable(ModeOff)
	off.KeepAlive(signed(testAlive("a", 1, 1), "", 1))
	require.Nil(t, off.Bound("a"), "nothing is kept with signatures off")
}

// A held alive's proof is attached to the same alive only; this member's
// own alive is signed once per content.
func TestHeldProofs(t *testing.T) {
	tb := newTable(ModeSign)
	held := signed(testAlive("a", 1, 1), "", 1)
	tb.KeepAlive(held)
	held.Meta[0] = 'M' // the Table keeps its own copy
	same := testAlive("a", 1, 1)
	same.Key = nil
	tb.AttachHeld(same)
	require.Equal(t, signed(testAlive("a", 1, 1), "", 1).Sig, same.Sig)
	require.Equal(t, []byte(testPub(1)), []byte(same.Key))
	newer := testAlive("a", 2, 1)
	newer.Key = nil
	tb.AttachHeld(newer)
	require.Nil(t, newer.Sig, "not what the member signed")

	own := testAlive("self", 1, 0)
	own.Key = nil
	tb.ProveOwn(own)
	require.True(t, ed25519.Verify(testPub(0), AppendAlive(nil, "", own), own.Sig))
	require.Equal(t, uint64(1), tb.Stats().SignaturesMade)
	again := testAlive("self", 1, 0)
	tb.ProveOwn(again)
	require.Equal(t, own.Sig, again.Sig)
	require.Equal(t, uint64(1), tb.Stats().SignaturesMade, "signed once")
	again = testAlive("self", 2, 0)
	tb.ProveOwn(again)
	require.Equal(t, uint64(2), tb.Stats().SignaturesMade, "news: signed again")
	require.True(t, tb.Recent("self"))
}

// A signature is verified once; copies of the claim cost a hash.
func TestVerifiedOnce(t *testing.T) {
	tb := newTable(ModeRequired)
	a := signed(testAlive("a", 1, 1), "", 1)
	require.True(t, tb.ProveAlive(testNow, a, false))
	require.True(t, tb.ProveAlive(testNow, a, false))
	require.Equal(t, uint64(1), tb.Stats().SignaturesVerified)
	bad := signed(testAlive("a", 1, 1), "", 1)
	bad.Sig[0] ^= 1
	require.False(t, tb.ProveAlive(testNow, bad, false))
	require.False(t, tb.ProveAlive(testNow, bad, false))
	require.Equal(t, uint64(3), tb.Stats().SignaturesVerified, "a bad signature is not remembered")
}

// A leave is the member's own word: signed by its bound key, or unsigned
// where that is allowed; held for relaying at its incarnation.
func TestProveLeave(t *testing.T) {
	sig := Sign(testKey(1), AppendLeave(nil, "", "a", 2, 5))
	for _, tc := range []struct {
		name       string
		table      func() *Table
		sig        []byte
		ok, signed bool
		counted    func(Stats) uint64
	}{
		{"off", func() *Table { return boundTable(ModeOff) }, nil, true, false, nil},
		{"unsigned, unbound", func() *Table { return newTable(ModeSign) }, nil, true, false, nil},
		{"unsigned, bound", func() *Table { return boundTable(ModeSign) }, nil, false, false, func(s Stats) uint64 { return s.ClaimsUnsigned }},
		{"signed, unbound", func() *Table { return newTable(ModeSign) }, sig, false, false, func(s Stats) uint64 { return s.ClaimsForged }},
		{"signed by the bound key", func() *Table { return boundTable(ModeSign) }, sig, true, true, nil},
		{"signed by another key", func() *Table { return boundTable(ModeSign) }, Sign(testKey(2), AppendLeave(nil, "", "a", 2, 5)), false, false,
			func(s Stats) uint64 { return s.ClaimsForged }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := tc.table()
			ok, signed := tb.ProveLeave("a", 2, 5, tc.sig)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.signed, signed)
			if tc.counted != nil {
				require.Equal(t, uint64(1), tc.counted(tb.Stats()))
			}
			if signed {
				require.Equal(t, sig, tb.LeaveSig("a", 2, 5))
				require.Nil(t, tb.LeaveSig("a", 3, 5), "held at its incarnation only")
			}
		})
	}
	tb := newTable(ModeSign)
	require.True(t, ed25519.Verify(testPub(0), AppendLeave(nil, "", "self", 4, 1), tb.LeaveSig("self", 4, 1)))
	require.True(t, tb.ProveRelayedLeave("a"))
	require.False(t, boundTable(ModeSign).ProveRelayedLeave("a"), "another's report of a signing member's leave")
}

// Without an authority a joiner under another key than its name is bound
// to is refused, and told why; under its key, or a name not bound, it is
// taken; Rebind forgets the binding.
func TestJoinerBoundKey(t *testing.T) {
	tb := boundTable(ModeRequired)
	require.NoError(t, tb.CheckJoiner(testNow, "a", testPub(1), []byte{1}, nil))
	require.ErrorContains(t, tb.CheckJoiner(testNow, "a", testPub(2), []byte{1}, nil), `name "a" is bound to another key`)
	require.Equal(t, uint64(1), tb.Stats().KeyConflicts)
	require.NoError(t, tb.CheckJoiner(testNow, "b", testPub(2), []byte{1}, nil))
	require.True(t, tb.Rebind("a"))
	require.NoError(t, tb.CheckJoiner(testNow, "a", testPub(2), []byte{1}, nil))
	require.False(t, tb.Rebind("a"))
}

// Claims of this member's name at another life: signed, and under its own
// key or a certificate's; a seed's view is no one's word for another key.
func TestProveOwnLife(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alive *wire.Alive
		ok    bool
	}{
		{"unsigned", testAlive("self", 1, 0), false},
		{"own key", signed(testAlive("self", 1, 0), "", 0), true},
		{"another key", signed(testAlive("self", 1, 9), "", 9), false},
		{"forged", func() *wire.Alive { a := signed(testAlive("self", 1, 9), "", 9); a.Meta = nil; return a }(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ok, newTable(ModeSign).ProveOwnLife(testNow, tc.alive))
		})
	}
}

// With an authority, a claim needs a certificate of one of the roots
// binding its name to its key, valid now.
func TestCertifiedClaims(t *testing.T) {
	rootPub, root, _ := ed25519.GenerateKey(nil)
	cert := func(name string, key int, notAfter time.Time) []byte {
		c, err := NewCertificate(root, name, testPub(key), notAfter)
		require.NoError(t, err)
		return c
	}
	tb := &Table{}
	tb.Init(Config{Name: "self", Mode: ModeRequired, Identity: testKey(0), TrustedRoots: []ed25519.PublicKey{rootPub},
		Certificate: cert("self", 0, testNow.Add(time.Hour)), MaxMembers: 100, ProbeInterval: time.Second})
	require.NoError(t, tb.CheckOwnCertificate(testNow))
	require.ErrorIs(t, tb.CheckOwnCertificate(testNow.Add(time.Hour)), ErrCertificateExpired)
	for _, tc := range []struct {
		name string
		cert []byte
		at   time.Time
		ok   bool
	}{
		{"none", nil, testNow, false},
		{"valid", cert("a", 1, testNow.Add(time.Hour)), testNow, true},
		{"valid, seen again", cert("a", 1, testNow.Add(time.Hour)), testNow, true},
		{"seen, expired since", cert("a", 1, testNow.Add(time.Hour)), testNow.Add(time.Hour), false},
		{"expired", cert("a", 1, testNow.Add(-time.Second)), testNow, false},
		{"another name", cert("b", 1, testNow.Add(time.Hour)), testNow, false},
		{"another key", cert("a", 2, testNow.Add(time.Hour)), testNow, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := signed(testAlive("a", 1, 1), "", 1)
			a.Cert = tc.cert
			before := tb.Stats().CertificatesRefused
			require.Equal(t, tc.ok, tb.ProveAlive(tc.at, a, false))
			if !tc.ok {
				require.Equal(t, before+1, tb.Stats().CertificatesRefused)
			}
		})
	}
	require.Error(t, tb.SetCertificate(testNow, cert("other", 0, testNow.Add(time.Hour))))
	renewed := cert("self", 0, testNow.Add(2*time.Hour))
	require.NoError(t, tb.SetCertificate(testNow, renewed))
	own := testAlive("self", 1, 0)
	tb.ProveOwn(own)
	require.Equal(t, renewed, own.Cert)

	// With an authority a new life of a bound name may bring a new key its
	// certificate names (the authority rebinds); without one it may not.
	tb.KeepAlive(signed(testAlive("a", 1, 1), "", 1))
	moved := signed(testAlive("a", 2, 2), "", 2)
	moved.Cert = cert("a", 2, testNow.Add(time.Hour))
	require.True(t, tb.ProveAlive(testNow, moved, true))
	require.False(t, tb.ProveAlive(testNow, moved, false), "the same life under another key")

	require.NoError(t, tb.CheckJoiner(testNow, "a", testPub(1), []byte{1}, cert("a", 1, testNow.Add(time.Hour))))
	require.NoError(t, tb.CheckJoiner(testNow, "a", testPub(2), []byte{1}, cert("a", 2, testNow.Add(time.Hour))), "certified: another key joins")
	require.ErrorContains(t, tb.CheckJoiner(testNow, "a", testPub(1), []byte{1}, nil), `certificate of "a": malformed`)
	require.EqualError(t, tb.CheckJoiner(testNow, "a", nil, nil, nil), "unsigned; signatures required")
	require.Nil(t, newTable(ModeSign).CheckJoiner(testNow, "a", nil, nil, nil))
}

// An accusation is its accuser's word: signed by the accuser's bound key,
// or unsigned where that is allowed; held for relaying and counted once.
func TestProveAccusation(t *testing.T) {
	k := Accusation{Name: "b", From: "a", Inc: 1, Life: 5}
	sig := Sign(testKey(1), AppendAccusation(nil, "", k))
	for _, tc := range []struct {
		name    string
		table   func() *Table
		k       Accusation
		sig     []byte
		ok      bool
		relayed []byte
		counted func(Stats) uint64
	}{
		{"off", func() *Table { return boundTable(ModeOff) }, k, nil, true, nil, nil},
		{"by this member", func() *Table { return newTable(ModeRequired) }, Accusation{Name: "b", From: "self"}, nil, true, nil, nil},
		{"unsigned, unbound accuser", func() *Table { return newTable(ModeSign) }, k, nil, true, nil, nil},
		{"unsigned, required", func() *Table { return newTable(ModeRequired) }, k, nil, false, nil, func(s Stats) uint64 { return s.ClaimsUnsigned }},
		{"unsigned, bound accuser", func() *Table { return boundTable(ModeSign) }, k, nil, false, nil, func(s Stats) uint64 { return s.ClaimsUnsigned }},
		{"signed, unbound accuser", func() *Table { return newTable(ModeSign) }, k, sig, true, nil, nil},
		{"signed, unbound accuser, required", func() *Table { return newTable(ModeRequired) }, k, sig, false, nil,
			func(s Stats) uint64 { return s.ClaimsUnsigned }},
		{"signed by the accuser", func() *Table { return boundTable(ModeRequired) }, k, sig, true, sig, nil},
		{"signed as another accuser", func() *Table { return boundTable(ModeRequired) }, k,
			Sign(testKey(2), AppendAccusation(nil, "", k)), false, nil, func(s Stats) uint64 { return s.ClaimsForged }},
		{"dead signed as suspect", func() *Table { return boundTable(ModeRequired) }, Accusation{Name: "b", From: "a", Inc: 1, Life: 5, Dead: true},
			sig, false, nil, func(s Stats) uint64 { return s.ClaimsForged }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := tc.table()
			require.Equal(t, tc.ok, tb.ProveAccusation(testNow, tc.k, tc.sig))
			if tc.counted != nil {
				require.Equal(t, uint64(1), tc.counted(tb.Stats()))
			}
			if tc.k.From != "self" {
				require.Equal(t, tc.relayed, tb.AccusationSig(tc.k))
			}
		})
	}
	tb := newTable(ModeSign)
	own := Accusation{Name: "b", From: "self", Inc: 1, Life: 5}
	s := tb.AccusationSig(own)
	require.True(t, ed25519.Verify(testPub(0), AppendAccusation(nil, "", own), s))
	require.True(t, bytes.Equal(s, tb.AccusationSig(own)))
	require.Equal(t, uint64(1), tb.Stats().SignaturesMade, "signed once")
}
