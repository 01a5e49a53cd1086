package swim

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Signed claims: what a member says about itself, only it can say.
//
// With a cluster key every member can forge anything about any other: move
// it, change its metadata, announce its leave, raise its incarnation, claim
// a new life for it. With signatures on, each member holds an Ed25519 key
// (Config.Identity) and signs the claims only it may make, which every
// member relays unchanged:
//
//   - its alive (address, metadata, incarnation, versions, life and the
//     public key itself), which is also its refutation;
//   - its leave.
//
// An accusation (suspect or dead) is signed by its accuser, so a relayed
// accusation names its author truthfully and each author's accusations
// are counted and bounded (accuserBurst).
//
// A name is bound to a key in one of two ways. Without an authority, the
// first key a member sees a name with holds it (trust on first use); a
// claim under another key is taken only for a new life of the name whose
// held life no longer answers (lives.go: a restart with a fresh identity),
// so a key holder cannot take a live member's name. With an authority
// (Config.TrustedRoots) a claim must carry a certificate of one of them
// binding the name to its key (certificate.go).
//
// What a key holder can still do: accuse (signed, counted, bounded; the
// accused's signed refutation always wins, SWIM §4.2), delay or drop what
// it relays, and invent members under names nobody holds yet (admission.go
// and newcomers.go check those, and an authority forbids them).
//
// A claim is verified when it is news (a stale copy is dropped before any
// verification) and once: a digest of each claim verified is kept, so the
// copies of one claim that gossip and push-pulls bring again cost a hash.

// SignatureMode says whether a member signs its claims and requires
// others', the steps of switching a running cluster to signed claims one
// member at a time (docs/security.md):
//
//  1. On every member, one at a time: SignaturesSign.
//  2. On every member, one at a time: SignaturesRequired.
//
// Each step is a restart with the new Config, or, on a running member,
// Memberlist.SetSignatures. Turning signatures off runs the steps
// backwards.
type SignatureMode uint8

const (
	// SignaturesOff: nothing is signed or checked. The default.
	SignaturesOff SignatureMode = iota
	// SignaturesSign: this member signs its claims and keeps and relays
	// the signatures of others; a claim whose signature is wrong is
	// dropped, and so is an unsigned claim about a member known to sign.
	// Unsigned claims about members not known to sign (those not yet
	// switched) are taken as before.
	SignaturesSign
	// SignaturesRequired: as SignaturesSign, and every claim about
	// another member must be signed: unsigned ones are dropped and counted
	// (ClaimsUnsigned). Claims about this member itself need none: it
	// refutes what is false.
	SignaturesRequired
)

func (s SignatureMode) String() string {
	switch s {
	case SignaturesOff:
		return "off"
	case SignaturesSign:
		return "sign"
	case SignaturesRequired:
		return "required"
	}
	return fmt.Sprintf("SignatureMode(%d)", uint8(s))
}

// ParseSignatureMode parses the names String returns.
func ParseSignatureMode(s string) (SignatureMode, error) {
	for m := SignaturesOff; m <= SignaturesRequired; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("swim: signature mode %q: want off, sign or required", s)
}

// Claim kinds, each signed under its own tag so that no signature of one
// kind can pass for another.
const (
	claimAlive   byte = 'A'
	claimLeave   byte = 'L'
	claimSuspect byte = 'S'
	claimDead    byte = 'D'
)

// claimDomain starts every signed claim: these signatures are valid for
// nothing else the key may sign.
const claimDomain = "swim claim v1\x00"

// maxVerified bounds the digests of claims verified that are kept; past
// it they are forgotten at once, and a claim seen again is verified again.
const maxVerified = 4096

// accuserBurst and accuserEvery bound the accusations taken from one
// accuser: a bucket of accuserBurst, refilled by one per accuserEvery
// probe intervals. A member accuses at most the one member it probes per
// round; a crash of many at once is declared dead by every member, so
// one accuser's accusations past the bound delay nothing that the others'
// do not bring.
const (
	accuserBurst = 32
	accuserEvery = 1
)

// signatures is the Machine's part of signed claims.
type signatures struct {
	mode  SignatureMode
	key   ed25519.PrivateKey
	pub   ed25519.PublicKey
	cert  []byte
	roots []ed25519.PublicKey
	// held is, by name, the key each name is bound to and the proofs of
	// the claims held about it.
	held map[string]*heldProof
	// verified holds digests of the claims verified, and certs the
	// certificates verified with their expiry, by digest.
	verified map[[sha256.Size]byte]struct{}
	certs    map[[sha256.Size]byte]time.Time
	// accusals holds the signatures of the accusations held, for
	// relaying; own holds this member's signed alive.
	accusals map[accusal][]byte
	own      wire.Alive
	accusers map[string]*accuser
	buf      []byte
	// exchanges counts the push-pulls this member started; ownAt is its
	// count when this member's alive was last signed (see proofWanted).
	exchanges, ownAt uint64
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
	at       uint64 // signatures.exchanges when the last proof was kept
	boundAt  uint64 // ... and when the key was bound
}

// accusal identifies one accusation: by whom, of whom, at which
// incarnation and life, suspect or dead.
type accusal struct {
	name, from string
	inc, life  uint64
	dead       bool
}

// accuser counts one accuser's accusations and holds its bucket.
type accuser struct {
	tokens  float64
	at      time.Time
	taken   uint64
	limited uint64
}

func (g *signatures) init(cfg *Config) {
	g.mode = cfg.Signatures
	g.key = cfg.Identity
	if len(g.key) == ed25519.PrivateKeySize {
		g.pub = g.key.Public().(ed25519.PublicKey)
	}
	g.cert = cfg.Certificate
	g.roots = cfg.TrustedRoots
	g.held = make(map[string]*heldProof)
	g.verified = make(map[[sha256.Size]byte]struct{})
	g.certs = make(map[[sha256.Size]byte]time.Time)
	g.accusals = make(map[accusal][]byte)
	g.accusers = make(map[string]*accuser)
}

func (m *Machine) signing() bool { return m.sigs.mode != SignaturesOff }

// SetSignatures changes the signature mode at once (see SignatureMode). A
// Machine without Config.Identity cannot turn signatures on.
func (m *Machine) SetSignatures(now time.Time, mode SignatureMode) error {
	if mode > SignaturesRequired {
		return fmt.Errorf("swim: %v is not a signature mode", mode)
	}
	if mode != SignaturesOff && m.sigs.key == nil {
		return fmt.Errorf("swim: signatures %v: Config.Identity is not set", mode)
	}
	if mode != SignaturesOff && len(m.sigs.roots) > 0 {
		if err := m.checkOwnCertificate(now); err != nil {
			return err
		}
	}
	was := m.sigs.mode
	m.sigs.mode = mode
	if was == SignaturesOff && mode != SignaturesOff {
		// Tell the cluster this member's key at once: members that bind
		// names on first use learn it from its own word. And exchange
		// state soon: the members that just bound it answer with every
		// proof they hold (proofWanted), so it binds theirs.
		m.broadcastSelfAlive()
		m.scheduleFollowUps(now)
	}
	return nil
}

// Signatures returns the signature mode.
func (m *Machine) Signatures() SignatureMode { return m.sigs.mode }

// IdentityKey returns this member's public key (nil without an identity).
func (m *Machine) IdentityKey() ed25519.PublicKey { return bytes.Clone(m.sigs.pub) }

// appendClaim writes the bytes signed for a claim of kind about name: the
// domain, the kind, the cluster label, the name, the incarnation and the
// life; fields of variable length are prefixed by it.
func (m *Machine) appendClaim(b []byte, kind byte, name string, inc, life uint64) []byte {
	b = append(b, claimDomain...)
	b = append(b, kind)
	b = appendField(b, []byte(m.cfg.Label))
	b = appendField(b, []byte(name))
	b = binary.BigEndian.AppendUint64(b, inc)
	return binary.BigEndian.AppendUint64(b, life)
}

func appendField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

// aliveClaim is what an alive's signature covers: everything in it but
// the signature and the certificate (which its authority signed).
func (m *Machine) aliveClaim(a *wire.Alive) []byte {
	b := m.appendClaim(m.sigs.buf[:0], claimAlive, a.Name, a.Incarnation, a.Life)
	b = appendField(b, a.Addr)
	b = appendField(b, a.Meta)
	v := a.Versions
	b = append(b, v.ProtocolMin, v.ProtocolMax, v.AppMin, v.AppMax)
	b = appendField(b, a.Key)
	m.sigs.buf = b
	return b
}

func (m *Machine) leaveClaim(name string, inc, life uint64) []byte {
	m.sigs.buf = m.appendClaim(m.sigs.buf[:0], claimLeave, name, inc, life)
	return m.sigs.buf
}

func (m *Machine) accusationClaim(k accusal) []byte {
	kind := claimSuspect
	if k.dead {
		kind = claimDead
	}
	b := m.appendClaim(m.sigs.buf[:0], kind, k.name, k.inc, k.life)
	m.sigs.buf = appendField(b, []byte(k.from))
	return m.sigs.buf
}

func (m *Machine) sign(claim []byte) []byte {
	m.stats.SignaturesMade++
	return ed25519.Sign(m.sigs.key, claim)
}

// verify reports whether sig is key's signature of claim, verifying each
// claim once (see maxVerified).
func (m *Machine) verify(key, claim, sig []byte) bool {
	if len(key) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	h := sha256.New()
	h.Write(key)
	h.Write(sig)
	h.Write(claim)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	if _, ok := m.sigs.verified[d]; ok {
		return true
	}
	m.stats.SignaturesVerified++
	if !ed25519.Verify(key, claim, sig) {
		return false
	}
	if len(m.sigs.verified) >= maxVerified {
		clear(m.sigs.verified)
	}
	m.sigs.verified[d] = struct{}{}
	return true
}

// boundKey returns the key the name is bound to here, nil if none.
func (m *Machine) boundKey(name string) []byte {
	if p := m.sigs.held[name]; p != nil {
		return p.key
	}
	return nil
}

// aliveNews reports whether an alive about s (nil: unknown) may change
// anything held, before its signature is verified: stale copies are
// dropped unverified.
func (m *Machine) aliveNews(a *wire.Alive, s *memberState) bool {
	if s == nil || otherLife(m.lifeOf(s), a.Life) || precedence(s.state(), s.inc(), StateAlive, a.Incarnation) != stale {
		return true
	}
	if len(a.Sig) > 0 && m.boundKey(a.Name) == nil && a.Incarnation == s.inc() && s.live() {
		return true // the key of a member that just started signing
	}
	return a.Incarnation == s.inc() && s.live() &&
		(a.Versions != (wire.Versions{}) && a.Versions != m.versionsOf(s) || a.Life != 0 && m.lifeOf(s) == 0)
}

// aliveProven reports whether an alive about another member, s (nil:
// unknown), may be taken, counting it when not: its signature is the key
// its name is bound to, or a new key the claim may bring (a new life of
// the name, or a first one), and, with an authority, a certificate binds
// the name to that key.
func (m *Machine) aliveProven(now time.Time, a *wire.Alive, s *memberState) bool {
	if !m.signing() {
		return true
	}
	bound := m.boundKey(a.Name)
	if len(a.Sig) == 0 || len(a.Key) == 0 {
		if m.sigs.mode == SignaturesRequired || bound != nil {
			m.stats.ClaimsUnsigned++
			return false
		}
		return true
	}
	if bound != nil && !bytes.Equal(bound, a.Key) && (s == nil || !otherLife(m.lifeOf(s), a.Life)) {
		// The name's process holds another key: only a new life may
		// bring a new one, and the life check then asks the held one.
		m.stats.KeyConflicts++
		return false
	}
	if len(m.sigs.roots) > 0 && !m.certified(now, a.Name, a.Key, a.Cert) {
		m.stats.CertificatesRefused++
		return false
	}
	if !m.verify(a.Key, m.aliveClaim(a), a.Sig) {
		m.stats.ClaimsForged++
		return false
	}
	return true
}

// bindsKey takes a signed alive that says what is held about s already,
// at its incarnation, for a name not yet bound to a key: the claim of a
// member that just turned signatures on (SetSignatures). The name is
// bound to its key, and the claim passed on like news, so that every
// member binds it in O(log N) rounds rather than at its next refutation.
func (m *Machine) bindsKey(a *wire.Alive, s *memberState, src mergeSource) bool {
	if !m.signing() || s == nil || len(a.Sig) == 0 || m.boundKey(a.Name) != nil || a.Incarnation != s.inc() || !s.live() ||
		a.Life != m.lifeOf(s) || a.Versions != m.versionsOf(s) || string(a.Meta) != string(m.metaOf(s)) {
		return false
	}
	if addr, err := wire.DecodeAddr(a.Addr); err != nil || addr != m.addrOf(s) {
		return false
	}
	m.keepAliveProof(a)
	if src.passedOn() {
		m.queueBroadcast(a.Name, a)
	}
	return true
}

// keepAliveProof holds the proof of a signed alive just taken: the name
// is bound to its key from now on, and the alive is relayed with it.
func (m *Machine) keepAliveProof(a *wire.Alive) {
	if !m.signing() || len(a.Sig) == 0 {
		return
	}
	p := m.heldOf(a.Name)
	if !bytes.Equal(p.key, a.Key) {
		p.boundAt = m.sigs.exchanges
	}
	p.key = bytes.Clone(a.Key)
	p.cert = bytes.Clone(a.Cert)
	p.alive = cloneAlive(a)
	p.at = m.sigs.exchanges
}

func (m *Machine) heldOf(name string) *heldProof {
	p := m.sigs.held[name]
	if p == nil {
		p = &heldProof{}
		m.sigs.held[name] = p
	}
	return p
}

// forgetProofs drops what is held about a name no longer in the table.
func (m *Machine) forgetProofs(name string) { delete(m.sigs.held, name) }

// proveAlive attaches to a, the alive of s as this member holds it, the
// proof that makes it the member's own word: this member's signature for
// its own, the one held for another's when a is what it signed.
func (m *Machine) proveAlive(s *memberState, a *wire.Alive) {
	if !m.signing() {
		return
	}
	if s == m.self {
		o := &m.sigs.own
		if len(o.Sig) == 0 || o.Incarnation != a.Incarnation || o.Life != a.Life || o.Versions != a.Versions ||
			!bytes.Equal(o.Addr, a.Addr) || !bytes.Equal(o.Meta, a.Meta) {
			a.Key = m.sigs.pub
			*o = cloneAlive(a)
			o.Key, o.Cert = m.sigs.pub, m.sigs.cert
			o.Sig = m.sign(m.aliveClaim(o))
			m.sigs.ownAt = m.sigs.exchanges
		}
		a.Key, a.Sig, a.Cert = o.Key, o.Sig, o.Cert
		return
	}
	p := m.sigs.held[a.Name]
	if p == nil || len(p.alive.Sig) == 0 {
		return
	}
	h := &p.alive
	if h.Incarnation == a.Incarnation && h.Life == a.Life && h.Versions == a.Versions &&
		bytes.Equal(h.Addr, a.Addr) && bytes.Equal(h.Meta, a.Meta) {
		a.Key, a.Sig, a.Cert = h.Key, h.Sig, h.Cert
	}
}

// leaveProven reports whether a leave d, in the member's own name, is
// signed by the key its name is bound to (signed: it was, and needs no
// check with the member), or may be taken unsigned (counting it when not).
func (m *Machine) leaveProven(d *wire.Dead, s *memberState) (ok, signed bool) {
	if !m.signing() {
		return true, false
	}
	bound := m.boundKey(d.Name)
	if len(d.Sig) == 0 {
		if m.sigs.mode == SignaturesRequired || bound != nil {
			m.stats.ClaimsUnsigned++
			return false, false
		}
		return true, false
	}
	if bound == nil || !m.verify(bound, m.leaveClaim(d.Name, d.Incarnation, m.lifeOf(s)), d.Sig) {
		m.stats.ClaimsForged++
		return false, false
	}
	p := m.heldOf(d.Name)
	p.leave, p.leaveInc, p.at = bytes.Clone(d.Sig), d.Incarnation, m.sigs.exchanges
	return true, true
}

// leaveSig is the member's signature of its leave at inc, if held: this
// member's own, signed now, or another's, kept by leaveProven.
func (m *Machine) leaveSig(name string, inc, life uint64) []byte {
	if !m.signing() {
		return nil
	}
	if name == m.selfName {
		return m.sign(m.leaveClaim(name, inc, life))
	}
	if p := m.sigs.held[name]; p != nil && p.leaveInc == inc {
		return p.leave
	}
	return nil
}

// accusationProven reports whether an accusation of another member by
// k.from, signed sig, may be taken, counting it when not: it is signed
// by the accuser's key, or may be unsigned (an accuser not known to sign,
// without SignaturesRequired), and the accuser's bucket is not empty.
func (m *Machine) accusationProven(now time.Time, k accusal, sig []byte) bool {
	if !m.signing() || k.from == m.selfName {
		return true
	}
	bound := m.boundKey(k.from)
	switch {
	case len(sig) == 0:
		if m.sigs.mode == SignaturesRequired || bound != nil {
			m.stats.ClaimsUnsigned++
			return false
		}
	case bound == nil:
		// An accuser whose key is not known: nothing to check the
		// signature against, so it counts as unsigned.
		if m.sigs.mode == SignaturesRequired {
			m.stats.ClaimsUnsigned++
			return false
		}
		sig = nil
	case !m.verify(bound, m.accusationClaim(k), sig):
		m.stats.ClaimsForged++
		return false
	}
	if _, seen := m.sigs.accusals[k]; seen {
		return true // a copy: counted once
	}
	if !m.takeAccusation(now, k.from) {
		return false
	}
	if len(m.sigs.accusals) >= m.cfg.MaxMembers*4 {
		clear(m.sigs.accusals)
	}
	m.sigs.accusals[k] = bytes.Clone(sig) // nil when unsigned: still counted once
	return true
}

// takeAccusation takes a token from the accuser's bucket, reporting
// whether there was one.
func (m *Machine) takeAccusation(now time.Time, from string) bool {
	a := m.sigs.accusers[from]
	if a == nil {
		if len(m.sigs.accusers) >= m.cfg.MaxMembers {
			clear(m.sigs.accusers)
		}
		a = &accuser{tokens: accuserBurst, at: now}
		m.sigs.accusers[from] = a
	}
	if per := accuserEvery * m.cfg.ProbeInterval; per > 0 {
		a.tokens = min(accuserBurst, a.tokens+float64(now.Sub(a.at))/float64(per))
	}
	a.at = now
	if a.tokens < 1 {
		a.limited++
		m.stats.AccusationsLimited++
		return false
	}
	a.tokens--
	a.taken++
	return true
}

// AccusationsBy returns how many accusations by the member called name
// this member took, and how many it dropped past the accuser's bound, with
// signatures on.
func (m *Machine) AccusationsBy(name string) (taken, limited uint64) {
	if a := m.sigs.accusers[name]; a != nil {
		return a.taken, a.limited
	}
	return 0, 0
}

// accusationSig is the signature of an accusation to send: this member's
// own, signed now, or the accuser's, held by accusationProven.
func (m *Machine) accusationSig(k accusal) []byte {
	if !m.signing() {
		return nil
	}
	if k.from == m.selfName {
		if sig, ok := m.sigs.accusals[k]; ok {
			return sig
		}
		sig := m.sign(m.accusationClaim(k))
		if len(m.sigs.accusals) >= m.cfg.MaxMembers*4 {
			clear(m.sigs.accusals)
		}
		m.sigs.accusals[k] = sig
		return sig
	}
	return m.sigs.accusals[k]
}

// proveSuspect and proveDead attach the accuser's signature to an
// accusation about to be sent.
func (m *Machine) proveSuspect(d *wire.Suspect) *wire.Suspect {
	d.Sig = m.accusationSig(accusal{name: d.Name, from: d.From, inc: d.Incarnation, life: d.Life})
	return d
}

func (m *Machine) proveDead(d *wire.Dead) *wire.Dead {
	if d.Left {
		if d.From == d.Name {
			d.Sig = m.leaveSig(d.Name, d.Incarnation, d.Life)
		}
		return d
	}
	d.Sig = m.accusationSig(accusal{name: d.Name, from: d.From, inc: d.Incarnation, life: d.Life, dead: true})
	return d
}

// ownLifeProven reports whether a claim of this member's name at another
// life, under another key, may be checked as a second process of the
// name, counting it when not. With an authority it needs a certificate for
// the name; without one, only the view of a seed answering this member's
// join may show the name held by another key (the first key seen holds a
// name: a member that joined holds its own).
func (m *Machine) ownLifeProven(now time.Time, a *wire.Alive, src mergeSource) bool {
	if !m.signing() {
		return true
	}
	if len(a.Sig) == 0 || len(a.Key) == 0 {
		// This member's name is bound to its key here, as any name of
		// a member known to sign.
		m.stats.ClaimsUnsigned++
		return false
	}
	if !m.verify(a.Key, m.aliveClaim(a), a.Sig) {
		m.stats.ClaimsForged++
		return false
	}
	switch {
	case bytes.Equal(a.Key, m.sigs.pub):
		return true // this identity's own other run: a restart
	case len(m.sigs.roots) > 0:
		if !m.certified(now, a.Name, a.Key, a.Cert) {
			m.stats.CertificatesRefused++
			return false
		}
		return true
	case src == mergeJoin || src == mergeFollowUp:
		return true
	}
	m.stats.KeyConflicts++
	return false
}

// checkOwnCertificate checks this member's certificate against its roots
// and identity, at now.
func (m *Machine) checkOwnCertificate(now time.Time) error {
	if err := VerifyCertificate(m.sigs.cert, m.cfg.Name, m.sigs.pub, m.sigs.roots, now); err != nil {
		return fmt.Errorf("swim: certificate of %q: %w", m.cfg.Name, err)
	}
	return nil
}

// SetCertificate installs a new certificate for this member (a renewal
// before the last one expires) and announces it at once.
func (m *Machine) SetCertificate(now time.Time, cert []byte) error {
	if len(m.sigs.roots) == 0 {
		return fmt.Errorf("swim: certificate: no TrustedRoots to check it against")
	}
	if err := VerifyCertificate(cert, m.cfg.Name, m.sigs.pub, m.sigs.roots, now); err != nil {
		return fmt.Errorf("swim: certificate of %q: %w", m.cfg.Name, err)
	}
	m.sigs.cert = bytes.Clone(cert)
	m.sigs.own = wire.Alive{}
	if m.signing() {
		m.broadcastSelfAlive()
	}
	return nil
}

// certified reports whether cert, from one of the trusted roots, binds
// name to key at now; each certificate is verified once.
func (m *Machine) certified(now time.Time, name string, key, cert []byte) bool {
	if len(cert) == 0 {
		return false
	}
	d := sha256.Sum256(cert)
	if exp, ok := m.sigs.certs[d]; ok {
		c, _ := ParseCertificate(cert)
		return now.Before(exp) && c.Name == name && bytes.Equal(c.Key, key)
	}
	c, err := ParseCertificate(cert)
	if err != nil {
		return false
	}
	m.stats.SignaturesVerified++
	if c.check(name, key, m.sigs.roots, now) != nil || verifyCertSig(cert, m.sigs.roots) != nil {
		return false
	}
	if len(m.sigs.certs) >= maxVerified {
		clear(m.sigs.certs)
	}
	m.sigs.certs[d] = c.NotAfter
	return true
}

// entryProof returns the key, signature and certificate of s's push-pull
// entry: its signed alive, its leave, or this member's accusation.
func (m *Machine) entryProof(s *memberState) (key, sig, cert []byte) {
	if !m.signing() {
		return nil, nil, nil
	}
	name := m.nameOf(s)
	switch s.state() {
	case StateAlive:
		a := m.aliveOf(s)
		return a.Key, a.Sig, a.Cert
	case StateLeft:
		return nil, m.leaveSig(name, s.inc(), m.lifeOf(s)), nil
	}
	return nil, m.accusationSig(accusal{name: name, from: m.selfName, inc: s.inc(), life: m.lifeOf(s), dead: false}), nil
}

// ErrJoinRefused is matched (errors.Is) by the error of a join a seed
// refused, which carries the seed's reason: a certificate that expired or
// that no root it trusts signed, unsigned claims where it requires
// signatures, or its application's AdmitJoin.
var ErrJoinRefused = errors.New("swim: join refused")

// refusal is a join refused by this member as a seed, with the reason the
// joiner is told (wire.Refusal).
type refusal struct{ reason string }

func (r *refusal) Error() string { return "join refused: " + r.reason }

// joinerProven checks a joiner's own entry in its join request: signed
// where signatures are required, and certified where there is an
// authority.
func (m *Machine) joinerProven(now time.Time, pp *wire.PushPullView) error {
	if !m.signing() {
		return nil
	}
	var v wire.MemberView
	for c := pp.Cursor(); c.Next(&v); {
		if string(v.Name) != pp.From {
			continue
		}
		switch {
		case len(v.Sig) == 0 || len(v.Key) == 0:
			if m.sigs.mode == SignaturesRequired {
				m.stats.ClaimsUnsigned++
				return &refusal{"unsigned; signatures required"}
			}
		case len(m.sigs.roots) > 0:
			if err := VerifyCertificate(v.Cert, pp.From, v.Key, m.sigs.roots, now); err != nil {
				m.stats.CertificatesRefused++
				return &refusal{fmt.Sprintf("certificate of %q: %v", pp.From, err)}
			}
		}
		return nil
	}
	return nil
}

// encodeRefusal is the answer to a join refused for r, no longer than the
// request was (limit): nobody unknown gets more bytes back than it sent.
func encodeRefusal(r *refusal, limit int) ([]byte, error) {
	reason := r.reason
	reason = reason[:min(len(reason), wire.MaxRefusalLen, max(limit-8, 0))]
	return wire.AppendPacket(nil, &wire.Refusal{Reason: reason})
}

// peerView is what a push-pull request said of each member: enough to
// tell which of this member's entries the requester lacks (entries; nil
// for this member's own requests). full: the requester started signing
// lately, and binds the keys of the names it holds from the proofs of the
// reply.
type peerView struct {
	entries map[string]peerEntry
	full    bool
}

type peerEntry struct {
	inc, life uint64
	state     State
}

// peerView reads the view of the push-pull request req (nil when not
// signing: no entry then carries a proof).
func (m *Machine) peerView(req []byte) peerView {
	if !m.signing() {
		return peerView{}
	}
	pp, err := wire.ParsePushPullLimit(req, m.cfg.MaxMembers)
	if err != nil {
		return peerView{full: true}
	}
	v := peerView{entries: make(map[string]peerEntry, pp.Count)}
	var mv wire.MemberView
	for c := pp.Cursor(); c.Next(&mv); {
		v.entries[string(mv.Name)] = peerEntry{inc: mv.Incarnation, life: mv.Life, state: State(mv.State)}
	}
	// Its key bound here lately (the request itself may have bound it):
	// it turned signatures on, or joined, lately.
	if p := m.sigs.held[pp.From]; p != nil && m.sigs.exchanges-p.boundAt < proofRecent {
		v.full = true
	}
	return v
}

// proofRecent is how many of its own push-pulls a member sends a claim's
// proof in after it took the claim: news still spreading.
const proofRecent = 2

// proofWanted reports whether s's push-pull entry carries its proof (key,
// signature, certificate), which is most of an entry's size. A proof is
// what lets a member take news it missed; an entry the peer holds already
// needs none, and is dropped unverified. So: in a join, where the peer
// holds nothing yet; in a reply, where the requester's view (theirs)
// lacks the entry or holds an older one; in a request, for claims taken
// in this member's last proofRecent exchanges, and for suspicions. A
// member behind on an older claim gets its proof in the reply to its own
// next exchange.
func (m *Machine) proofWanted(s *memberState, join bool, theirs peerView) bool {
	if join || s == m.self || theirs.full {
		return true // this member's own entry says it signs (senderSigns)
	}
	name := m.nameOf(s)
	if theirs.entries != nil {
		e, ok := theirs.entries[name]
		return !ok || otherLife(e.life, m.lifeOf(s)) || precedence(e.state, e.inc, s.state(), s.inc()) == supersedes
	}
	at := m.sigs.ownAt
	if s != m.self {
		if s.state() == StateSuspect {
			return true
		}
		p := m.sigs.held[name]
		if p == nil {
			return false
		}
		at = p.at
	}
	return m.sigs.exchanges-at < proofRecent
}

// senderSigns reports whether the push-pull pp's sender signed its own
// entry.
func senderSigns(pp *wire.PushPullView) bool {
	var v wire.MemberView
	for c := pp.Cursor(); c.Next(&v); {
		if string(v.Name) == pp.From {
			return len(v.Sig) > 0
		}
	}
	return false
}
