package claims

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Mode says whether a member signs its claims and requires others'.
type Mode uint8

const (
	// ModeOff: nothing is signed or checked.
	ModeOff Mode = iota
	// ModeSign: this member signs its claims and checks those of members
	// known to sign; unsigned claims about others are taken.
	ModeSign
	// ModeRequired: as ModeSign, and every claim about another member
	// must be signed.
	ModeRequired
)

// Config is what a Table is made from: the member's identity and the
// cluster's rules.
type Config struct {
	// Name is this member's name, Label the cluster label every claim is
	// signed under.
	Name, Label string
	Mode        Mode
	// Identity is this member's key (nil: it cannot sign), Certificate
	// its certificate from one of TrustedRoots (none: names are bound on
	// first use).
	Identity     ed25519.PrivateKey
	Certificate  []byte
	TrustedRoots []ed25519.PublicKey
	// MaxMembers bounds the accusers and accusations held.
	MaxMembers int
	// ProbeInterval paces the accusers' buckets (AccuserEvery).
	ProbeInterval time.Duration
}

// Stats counts what a Table signed, verified and refused.
type Stats struct {
	SignaturesMade      uint64 // claims this member signed
	SignaturesVerified  uint64 // signatures and certificates verified, each claim once
	ClaimsUnsigned      uint64 // claims about other members dropped for want of a signature
	ClaimsForged        uint64 // claims dropped whose signature is not their member's or accuser's
	KeyConflicts        uint64 // claims dropped that bring another key for a name bound to one
	CertificatesRefused uint64 // claims dropped whose certificate is missing, expired or from no trusted root
	AccusationsLimited  uint64 // accusations dropped past their accuser's bound
}

// maxVerified bounds the digests of claims verified that are kept; past
// it they are forgotten at once, and a claim seen again is verified again.
const maxVerified = 4096

// RecentExchanges is how many of its own push-pulls a member sends a
// claim's proof in after it took the claim: news still spreading (Recent).
const RecentExchanges = 2

// Table is one member's signed claims: its identity, the key each name is
// bound to, the proofs held for relaying, the digests of what was
// verified, and the accusers' buckets. The zero Table is unusable: Init
// it.
type Table struct {
	mode        Mode
	name, label string
	key         ed25519.PrivateKey
	pub         ed25519.PublicKey
	cert        []byte
	roots       []ed25519.PublicKey
	maxMembers  int
	refill      time.Duration
	// held is, by name, the key each name is bound to and the proofs of
	// the claims held about it.
	held map[string]*heldProof
	// verified holds digests of the claims verified, and certs the
	// certificates verified with their expiry, by digest.
	verified map[[sha256.Size]byte]struct{}
	certs    map[[sha256.Size]byte]time.Time
	// accusals holds the signatures of the accusations held, for
	// relaying; own holds this member's signed alive.
	accusals map[Accusation][]byte
	own      wire.Alive
	accusers map[string]*accuser
	buf      []byte
	// exchanges counts the push-pulls this member started; ownAt is its
	// count when this member's alive was last signed (see Recent).
	exchanges, ownAt uint64
	stats            Stats
}

// heldProof is what is held about one name: the key it is bound to, the
// certificate binding it, the signed alive held (Sig empty if none) and
// the member's signature of its leave at leaveInc.
type heldProof struct {
	key      []byte
	cert     []byte
	alive    wire.Alive
	leave    []byte
	leaveInc uint64
	at       uint64 // Table.exchanges when the last proof was kept
	boundAt  uint64 // ... and when the key was bound
}

// Init makes t a Table for c.
func (t *Table) Init(c Config) {
	t.mode = c.Mode
	t.name, t.label = c.Name, c.Label
	t.key = c.Identity
	if len(t.key) == ed25519.PrivateKeySize {
		t.pub = t.key.Public().(ed25519.PublicKey)
	}
	t.cert = c.Certificate
	t.roots = c.TrustedRoots
	t.maxMembers = c.MaxMembers
	t.refill = AccuserEvery * c.ProbeInterval
	t.held = make(map[string]*heldProof)
	t.verified = make(map[[sha256.Size]byte]struct{})
	t.certs = make(map[[sha256.Size]byte]time.Time)
	t.accusals = make(map[Accusation][]byte)
	t.accusers = make(map[string]*accuser)
}

// Mode returns the signature mode.
func (t *Table) Mode() Mode { return t.mode }

// SetMode changes the signature mode.
func (t *Table) SetMode(m Mode) { t.mode = m }

// Signing reports whether signatures are on.
func (t *Table) Signing() bool { return t.mode != ModeOff }

// HasIdentity reports whether this member has a key to sign with.
func (t *Table) HasIdentity() bool { return t.key != nil }

// HasRoots reports whether an authority binds names (Config.Claims.TrustedRoots).
func (t *Table) HasRoots() bool { return len(t.roots) > 0 }

// Public returns this member's public key (nil without an identity); the
// caller must not change it.
func (t *Table) Public() ed25519.PublicKey { return t.pub }

// Stats returns the counters.
func (t *Table) Stats() Stats { return t.stats }

// Exchange counts a push-pull this member starts: the clock of Recent
// and BoundLately.
func (t *Table) Exchange() { t.exchanges++ }

func (t *Table) sign(claim []byte) []byte {
	t.stats.SignaturesMade++
	return ed25519.Sign(t.key, claim)
}

// verify reports whether sig is key's signature of claim, verifying each
// claim once (see maxVerified).
func (t *Table) verify(key, claim, sig []byte) bool {
	if len(key) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	h := sha256.New()
	h.Write(key)
	h.Write(sig)
	h.Write(claim)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	if _, ok := t.verified[d]; ok {
		return true
	}
	t.stats.SignaturesVerified++
	if !Verify(key, claim, sig) {
		return false
	}
	if len(t.verified) >= maxVerified {
		clear(t.verified)
	}
	t.verified[d] = struct{}{}
	return true
}

func (t *Table) aliveClaim(a *wire.Alive) []byte {
	t.buf = AppendAlive(t.buf[:0], t.label, a)
	return t.buf
}

func (t *Table) leaveClaim(name string, inc, life uint64) []byte {
	t.buf = AppendLeave(t.buf[:0], t.label, name, inc, life)
	return t.buf
}

func (t *Table) accusationClaim(k Accusation) []byte {
	t.buf = AppendAccusation(t.buf[:0], t.label, k)
	return t.buf
}

// Bound returns the key the name is bound to here, nil if none.
func (t *Table) Bound(name string) []byte {
	if p := t.held[name]; p != nil {
		return p.key
	}
	return nil
}

// Holds reports whether anything is held about name.
func (t *Table) Holds(name string) bool { return t.held[name] != nil }

// unsignedRefused reports whether an unsigned claim about name is
// dropped, counting it: with ModeRequired, or when name is bound to a
// key (a member known to sign).
func (t *Table) unsignedRefused(name string) bool {
	if t.mode == ModeRequired || t.Bound(name) != nil {
		t.stats.ClaimsUnsigned++
		return true
	}
	return false
}

// ProveAlive reports whether an alive about another member may be taken,
// counting it when not: its signature is the key its name is bound to, or
// a first key for it, and, with an authority, a certificate binds the name
// to that key. Without an authority a name stays with its key for as long
// as this member remembers the name (the known-hosts model: until its
// tombstone is reaped, or the operator rebinds it): a new life under
// another key is refused whatever the held life's silence, since anyone
// holding the cluster key could otherwise take a paused or crashed
// member's name. With an authority a new life (newLife) may bring a new
// key its certificate names.
func (t *Table) ProveAlive(now time.Time, a *wire.Alive, newLife bool) bool {
	if !t.Signing() {
		return true
	}
	if len(a.Sig) == 0 || len(a.Key) == 0 {
		return !t.unsignedRefused(a.Name)
	}
	if bound := t.Bound(a.Name); bound != nil && !bytes.Equal(bound, a.Key) && (!newLife || len(t.roots) == 0) {
		t.stats.KeyConflicts++
		return false
	}
	if len(t.roots) > 0 && !t.certified(now, a.Name, a.Key, a.Cert) {
		t.stats.CertificatesRefused++
		return false
	}
	if !t.verify(a.Key, t.aliveClaim(a), a.Sig) {
		t.stats.ClaimsForged++
		return false
	}
	return true
}

// Rebind forgets the key name is bound to here, so that the next key
// seen with it is bound (an operator's decision: the member lost its key).
// It reports whether a binding was held.
func (t *Table) Rebind(name string) bool {
	p := t.held[name]
	if p == nil || p.key == nil {
		return false
	}
	delete(t.held, name)
	return true
}

// KeepAlive holds the proof of a signed alive just taken: the name is
// bound to its key from now on, and the alive is relayed with it.
func (t *Table) KeepAlive(a *wire.Alive) {
	if !t.Signing() || len(a.Sig) == 0 {
		return
	}
	p := t.heldOf(a.Name)
	if !bytes.Equal(p.key, a.Key) {
		p.boundAt = t.exchanges
	}
	p.key = bytes.Clone(a.Key)
	p.cert = bytes.Clone(a.Cert)
	p.alive = cloneAlive(a)
	p.at = t.exchanges
}

func cloneAlive(a *wire.Alive) wire.Alive {
	return wire.Alive{Name: a.Name, Addr: cloneBytes(a.Addr), Incarnation: a.Incarnation,
		Meta: cloneBytes(a.Meta), Versions: a.Versions, Life: a.Life,
		Key: cloneBytes(a.Key), Sig: cloneBytes(a.Sig), Cert: cloneBytes(a.Cert)}
}

// cloneBytes copies b (nil when empty).
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

func (t *Table) heldOf(name string) *heldProof {
	p := t.held[name]
	if p == nil {
		p = &heldProof{}
		t.held[name] = p
	}
	return p
}

// Forget drops what is held about a name no longer in the member table.
func (t *Table) Forget(name string) { delete(t.held, name) }

// sameAlive reports whether h says what a says, proofs aside.
func sameAlive(h, a *wire.Alive) bool {
	return h.Incarnation == a.Incarnation && h.Life == a.Life && h.Versions == a.Versions &&
		bytes.Equal(h.Addr, a.Addr) && bytes.Equal(h.Meta, a.Meta)
}

// ProveOwn attaches this member's key, signature and certificate to a, its
// own alive, signing it when it says anything new.
func (t *Table) ProveOwn(a *wire.Alive) {
	if !t.Signing() {
		return
	}
	o := &t.own
	if len(o.Sig) == 0 || !sameAlive(o, a) {
		a.Key = t.pub
		*o = cloneAlive(a)
		o.Key, o.Cert = t.pub, t.cert
		o.Sig = t.sign(t.aliveClaim(o))
		t.ownAt = t.exchanges
	}
	a.Key, a.Sig, a.Cert = o.Key, o.Sig, o.Cert
}

// AttachHeld attaches to a, another member's alive as held here, the
// member's own proof when a is what it signed.
func (t *Table) AttachHeld(a *wire.Alive) {
	if !t.Signing() {
		return
	}
	p := t.held[a.Name]
	if p == nil || len(p.alive.Sig) == 0 {
		return
	}
	if h := &p.alive; sameAlive(h, a) {
		a.Key, a.Sig, a.Cert = h.Key, h.Sig, h.Cert
	}
}

// ProveLeave reports whether a leave in the member's own name at inc and
// life, signed sig, is signed by the key its name is bound to (signed: it
// was, and is held for relaying), or may be taken unsigned (counting it
// when not).
func (t *Table) ProveLeave(name string, inc, life uint64, sig []byte) (ok, signed bool) {
	if !t.Signing() {
		return true, false
	}
	if len(sig) == 0 {
		return !t.unsignedRefused(name), false
	}
	bound := t.Bound(name)
	if bound == nil || !t.verify(bound, t.leaveClaim(name, inc, life), sig) {
		t.stats.ClaimsForged++
		return false, false
	}
	p := t.heldOf(name)
	p.leave, p.leaveInc, p.at = bytes.Clone(sig), inc, t.exchanges
	return true, true
}

// ProveRelayedLeave reports whether a leave of name reported by another
// member may be taken, counting it when not: a leave is the member's own
// word, so another's report of it counts as unsigned.
func (t *Table) ProveRelayedLeave(name string) bool {
	return !t.Signing() || !t.unsignedRefused(name)
}

// LeaveSig is the member's signature of its leave at inc and life, if
// held: this member's own, signed now, or another's, kept by ProveLeave.
func (t *Table) LeaveSig(name string, inc, life uint64) []byte {
	if !t.Signing() {
		return nil
	}
	if name == t.name {
		return t.sign(t.leaveClaim(name, inc, life))
	}
	if p := t.held[name]; p != nil && p.leaveInc == inc {
		return p.leave
	}
	return nil
}

// ProveAccusation reports whether an accusation of another member, signed
// sig, may be taken, counting it when not: it is signed by the accuser's
// key, or may be unsigned (an accuser not known to sign, without
// ModeRequired), and the accuser's bucket is not empty.
func (t *Table) ProveAccusation(now time.Time, k Accusation, sig []byte) bool {
	if !t.Signing() || k.From == t.name {
		return true
	}
	bound := t.Bound(k.From)
	switch {
	case len(sig) == 0:
		if t.unsignedRefused(k.From) {
			return false
		}
	case bound == nil:
		// An accuser whose key is not known: nothing to check the
		// signature against, so it counts as unsigned.
		if t.mode == ModeRequired {
			t.stats.ClaimsUnsigned++
			return false
		}
		sig = nil
	case !t.verify(bound, t.accusationClaim(k), sig):
		t.stats.ClaimsForged++
		return false
	}
	if _, seen := t.accusals[k]; seen {
		return true // a copy: counted once
	}
	if !t.takeAccusation(now, k.From) {
		return false
	}
	t.holdAccusation(k, bytes.Clone(sig)) // nil when unsigned: still counted once
	return true
}

func (t *Table) holdAccusation(k Accusation, sig []byte) {
	if len(t.accusals) >= t.maxMembers*4 {
		clear(t.accusals)
	}
	t.accusals[k] = sig
}

// AccusationSig is the signature of an accusation to send: this member's
// own, signed now, or the accuser's, held by ProveAccusation.
func (t *Table) AccusationSig(k Accusation) []byte {
	if !t.Signing() {
		return nil
	}
	if k.From == t.name {
		if sig, ok := t.accusals[k]; ok {
			return sig
		}
		sig := t.sign(t.accusationClaim(k))
		t.holdAccusation(k, sig)
		return sig
	}
	return t.accusals[k]
}

// ProveOwnLife reports whether a claim of this member's name at another
// life may be checked as a second process of the name, counting it when
// not. It must be signed (this member's name is bound to its key, as any
// name of a member known to sign); under this member's own key it is
// this identity's other run; under another, only with an authority, by a
// certificate for the name. Without one the name stays with this
// member's key (ProveAlive): no seed's view and no other member's word
// makes it yield its name to another key.
func (t *Table) ProveOwnLife(now time.Time, a *wire.Alive) bool {
	if !t.Signing() {
		return true
	}
	if len(a.Sig) == 0 || len(a.Key) == 0 {
		t.stats.ClaimsUnsigned++
		return false
	}
	if !t.verify(a.Key, t.aliveClaim(a), a.Sig) {
		t.stats.ClaimsForged++
		return false
	}
	switch {
	case bytes.Equal(a.Key, t.pub):
		return true // this identity's own other run: a restart
	case len(t.roots) > 0:
		if !t.certified(now, a.Name, a.Key, a.Cert) {
			t.stats.CertificatesRefused++
			return false
		}
		return true
	}
	t.stats.KeyConflicts++
	return false
}

// CheckOwnCertificate checks this member's certificate against its roots
// and identity, at now.
func (t *Table) CheckOwnCertificate(now time.Time) error {
	return VerifyCertificate(t.cert, t.name, t.pub, t.roots, now)
}

// SetCertificate installs cert, once checked at now, as this member's
// certificate; its alive is signed anew with it.
func (t *Table) SetCertificate(now time.Time, cert []byte) error {
	if err := VerifyCertificate(cert, t.name, t.pub, t.roots, now); err != nil {
		return err
	}
	t.cert = bytes.Clone(cert)
	t.own = wire.Alive{}
	return nil
}

// certified reports whether cert, from one of the trusted roots, binds
// name to key at now; each certificate is verified once.
func (t *Table) certified(now time.Time, name string, key, cert []byte) bool {
	if len(cert) == 0 {
		return false
	}
	d := sha256.Sum256(cert)
	if exp, ok := t.certs[d]; ok {
		c, _ := ParseCertificate(cert)
		return now.Before(exp) && c.Name == name && bytes.Equal(c.Key, key)
	}
	c, err := ParseCertificate(cert)
	if err != nil {
		return false
	}
	t.stats.SignaturesVerified++
	if c.check(name, key, t.roots, now) != nil || verifyCertSig(cert, t.roots) != nil {
		return false
	}
	if len(t.certs) >= maxVerified {
		clear(t.certs)
	}
	t.certs[d] = c.NotAfter
	return true
}

// errUnsignedJoiner refuses a joiner's unsigned entry.
var errUnsignedJoiner = errors.New("unsigned; signatures required")

// CheckJoiner checks a joiner's own entry in its join request (its key,
// signature and certificate): signed where signatures are required,
// certified where there is an authority, and, without one, under the key
// its name is bound to here, if any (a process that lost its key is told
// so). The error, counted, is the reason the joiner is told.
func (t *Table) CheckJoiner(now time.Time, name string, key, sig, cert []byte) error {
	if !t.Signing() {
		return nil
	}
	switch {
	case len(sig) == 0 || len(key) == 0:
		if t.mode == ModeRequired {
			t.stats.ClaimsUnsigned++
			return errUnsignedJoiner
		}
	case len(t.roots) > 0:
		if err := VerifyCertificate(cert, name, key, t.roots, now); err != nil {
			t.stats.CertificatesRefused++
			return fmt.Errorf("certificate of %q: %w", name, err)
		}
	case t.Bound(name) != nil && !bytes.Equal(key, t.Bound(name)):
		t.stats.KeyConflicts++
		return fmt.Errorf("name %q is bound to another key: the cluster keeps a name with the key it first saw until it forgets the member; rejoin with that identity, or have the operator rebind the name", name)
	}
	return nil
}

// BoundLately reports whether name's key was bound in this member's last
// RecentExchanges exchanges: its member turned signatures on, or joined,
// lately.
func (t *Table) BoundLately(name string) bool {
	p := t.held[name]
	return p != nil && t.exchanges-p.boundAt < RecentExchanges
}

// Recent reports whether the proof of name's claim (this member's own: its
// alive) was taken in this member's last RecentExchanges exchanges.
func (t *Table) Recent(name string) bool {
	at := t.ownAt
	if name != t.name {
		p := t.held[name]
		if p == nil {
			return false
		}
		at = p.at
	}
	return t.exchanges-at < RecentExchanges
}
