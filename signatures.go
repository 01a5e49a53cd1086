package swim

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/wire"
)

// Signed claims: what a member says about itself, only it can say.
//
// With a cluster key every member can forge anything about any other: move
// it, change its metadata, announce its leave, raise its incarnation, claim
// a new life for it. With signatures on, each member holds an Ed25519 key
// (Config.Claims.Identity) and signs the claims only it may make, which every
// member relays unchanged: its alive (also its refutation) and its leave;
// an accusation is signed by its accuser. The rules of who may sign what,
// the keys names are bound to and the proofs held are internal/claims;
// the Machine holds one claims.Table and asks it at the gates of each
// claim (incarnation.go), and this file adapts the member table's view to
// it.
//
// What a key holder can still do: accuse (signed, counted, bounded; the
// accused's signed refutation always wins, SWIM §4.2), delay or drop what
// it relays, and invent members under names nobody holds yet (admission.go
// and newcomers.go check those, and an authority forbids them).
//
// A claim is verified when it is news (a stale copy is dropped before any
// verification, aliveNews) and once.

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
	// (Claims.Unsigned). Claims about this member itself need none: it
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

// claimsConfig is the signed claims' part of cfg.
func claimsConfig(cfg *Config) claims.Config {
	return claims.Config{Name: cfg.Name, Label: cfg.Label, Mode: claims.Mode(cfg.Claims.Signatures),
		Identity: cfg.Claims.Identity, Certificate: cfg.Claims.Certificate, TrustedRoots: cfg.Claims.TrustedRoots,
		MaxMembers: cfg.MaxMembers, ProbeInterval: cfg.ProbeInterval}
}

func (m *Machine) signing() bool { return m.sigs.Signing() }

// SetSignatures changes the signature mode at once (see SignatureMode). A
// Machine without Config.Claims.Identity cannot turn signatures on.
func (m *Machine) SetSignatures(now time.Time, mode SignatureMode) error {
	if mode > SignaturesRequired {
		return fmt.Errorf("swim: %v is not a signature mode", mode)
	}
	if mode != SignaturesOff && !m.sigs.HasIdentity() {
		return fmt.Errorf("swim: signatures %v: Config.Claims.Identity is not set", mode)
	}
	if mode != SignaturesOff && m.sigs.HasRoots() {
		if err := m.sigs.CheckOwnCertificate(now); err != nil {
			return fmt.Errorf("swim: certificate of %q: %w", m.cfg.Name, err)
		}
	}
	was := m.sigs.Signing()
	m.sigs.SetMode(claims.Mode(mode))
	if !was && mode != SignaturesOff {
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
func (m *Machine) Signatures() SignatureMode { return SignatureMode(m.sigs.Mode()) }

// Rebind forgets the key the member called name is bound to here. Under
// trust on first use (no Claims.TrustedRoots) a name stays with the first
// key seen with it for as long as this member remembers the name, until
// its tombstone is reaped (ReconnectTimeout after it was forgotten): a
// process that lost its key is refused under a new one, its join told
// why. Rebind is the operator's way out: run on every member (or on every
// member the new process will reach, which then pass its claims on), it
// lets the next key seen with the name be bound. Certificates from
// trusted roots need none of this: the authority rebinds by issuing one.
// It reports whether a binding was held.
func (m *Machine) Rebind(name string) bool { return m.sigs.Rebind(name) }

// IdentityKey returns this member's public key (nil without an identity).
func (m *Machine) IdentityKey() ed25519.PublicKey { return bytes.Clone(m.sigs.Public()) }

// aliveNews reports whether an alive about s (nil: unknown) may change
// anything held, before its signature is verified: stale copies are
// dropped unverified.
func (m *Machine) aliveNews(a *wire.Alive, s *memberState) bool {
	if s == nil || otherLife(m.lifeOf(s), a.Life) || precedence(s.state(), s.inc(), StateAlive, a.Incarnation) != stale {
		return true
	}
	if len(a.Sig) > 0 && m.sigs.Bound(a.Name) == nil && a.Incarnation == s.inc() && s.live() {
		return true // the key of a member that just started signing
	}
	return a.Incarnation == s.inc() && s.live() &&
		(a.Versions != (wire.Versions{}) && a.Versions != m.versionsOf(s) || a.Life != 0 && m.lifeOf(s) == 0)
}

// verifyBurst and verifyRate bound the signatures a source's unsolicited
// claims (gossip and the push-pulls it starts) may have this member
// verify: verifyBurst at once, verifyRate more each second. A signature
// costs about 50 µs to verify, a claim's hash under a microsecond: a
// member's honest gossip carries each claim's news once (each claim is
// verified once, claims.Table), well under this even in a join storm,
// while one source's junk signatures could otherwise pin a core (3.8 MB/s
// did). Exchanges this member starts, and the checks it makes, are not
// bounded: it chose whom to ask.
const (
	verifyBurst = 512
	verifyRate  = 128
	// maxVerifySources bounds the sources whose budgets are kept; past
	// it they start over, each with a full burst.
	maxVerifySources = 4096
)

// verifyBudget is the token bucket of each source's verifications.
type verifyBudget struct {
	bySource map[netip.Addr]*verifyBucket
}

type verifyBucket struct {
	tokens float64
	at     time.Time
}

// take spends one verification of source's budget at now, and reports
// whether there was one.
func (v *verifyBudget) take(now time.Time, source netip.Addr) bool {
	if v.bySource == nil || len(v.bySource) >= maxVerifySources {
		v.bySource = make(map[netip.Addr]*verifyBucket)
	}
	b := v.bySource[source]
	if b == nil {
		b = &verifyBucket{tokens: verifyBurst, at: now}
		v.bySource[source] = b
	}
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = min(verifyBurst, b.tokens+elapsed.Seconds()*verifyRate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// accusationFromStranger reports whether an accusation (or a leave) of the
// member called name, in a packet from sender (nil: no member at the
// packet's address), is to be dropped before its signature is verified,
// counting it: on a cluster that signs, one passed on by no live member,
// unless it is about this member, which refutes what is false for free.
// Checks of this member's own (final and claim checks) carry their claim
// from live members; a leave notice comes from the member leaving.
func (m *Machine) accusationFromStranger(name string, sender *memberState) bool {
	if !m.signing() || name == m.selfName || sender != nil && sender.live() {
		return false
	}
	m.stats.Claims.FromStrangers++
	return true
}

// aliveProven reports whether an alive about another member, s (nil:
// unknown), may be taken (claims.Table.ProveAlive): a key other than the
// one its name is bound to comes only with a new life of the name.
func (m *Machine) aliveProven(now time.Time, a *wire.Alive, s *memberState) bool {
	return m.sigs.ProveAlive(now, a, s != nil && otherLife(m.lifeOf(s), a.Life))
}

// bindsKey takes a signed alive that says what is held about s already,
// at its incarnation, for a name not yet bound to a key: the claim of a
// member that just turned signatures on (SetSignatures). The name is
// bound to its key, and the claim passed on like news, so that every
// member binds it in O(log N) rounds rather than at its next refutation.
func (m *Machine) bindsKey(a *wire.Alive, s *memberState, src mergeSource) bool {
	if !m.signing() || s == nil || len(a.Sig) == 0 || m.sigs.Bound(a.Name) != nil || a.Incarnation != s.inc() || !s.live() ||
		a.Life != m.lifeOf(s) || a.Versions != m.versionsOf(s) || string(a.Meta) != string(m.metaOf(s)) {
		return false
	}
	if addr, err := wire.DecodeAddr(a.Addr); err != nil || addr != m.addrOf(s) {
		return false
	}
	m.sigs.KeepAlive(a)
	if src.passedOn() {
		m.queueNews(a.Name, a)
	}
	return true
}

// proveAlive attaches to a, the alive of s as this member holds it, the
// proof that makes it the member's own word: this member's signature for
// its own, the one held for another's when a is what it signed.
func (m *Machine) proveAlive(s *memberState, a *wire.Alive) {
	if s == m.self {
		m.sigs.ProveOwn(a)
		return
	}
	m.sigs.AttachHeld(a)
}

// leaveProven reports whether a leave d, in the member's own name, is
// signed by the key its name is bound to (signed: it was, and needs no
// check with the member), or may be taken unsigned (counting it when not).
func (m *Machine) leaveProven(d *wire.Dead, s *memberState) (ok, signed bool) {
	return m.sigs.ProveLeave(d.Name, d.Incarnation, m.lifeOf(s), d.Sig)
}

// proveSuspect and proveDead attach the accuser's signature to an
// accusation about to be sent, or the member's own to its leave.
func (m *Machine) proveSuspect(d *wire.Suspect) *wire.Suspect {
	d.Sig = m.sigs.AccusationSig(claims.Accusation{Name: d.Name, From: d.From, Inc: d.Incarnation, Life: d.Life})
	return d
}

func (m *Machine) proveDead(d *wire.Dead) *wire.Dead {
	if d.Left {
		if d.From == d.Name {
			d.Sig = m.sigs.LeaveSig(d.Name, d.Incarnation, d.Life)
		}
		return d
	}
	d.Sig = m.sigs.AccusationSig(claims.Accusation{Name: d.Name, From: d.From, Inc: d.Incarnation, Life: d.Life, Dead: true})
	return d
}

// AccusationsBy returns how many accusations by the member called name
// this member took, and how many it dropped past the accuser's bound, with
// signatures on.
func (m *Machine) AccusationsBy(name string) (taken, limited uint64) {
	return m.sigs.AccusationsBy(name)
}

// ownLifeProven reports whether a claim of this member's name at another
// life may be checked as a second process of the name
// (claims.Table.ProveOwnLife): under its own key, or another one a
// trusted root certifies for the name.
func (m *Machine) ownLifeProven(now time.Time, a *wire.Alive) bool {
	return m.sigs.ProveOwnLife(now, a)
}

// SetCertificate installs a new certificate for this member (a renewal
// before the last one expires) and announces it at once.
func (m *Machine) SetCertificate(now time.Time, cert []byte) error {
	if !m.sigs.HasRoots() {
		return fmt.Errorf("swim: certificate: no Claims.TrustedRoots to check it against")
	}
	if err := m.sigs.SetCertificate(now, cert); err != nil {
		return fmt.Errorf("swim: certificate of %q: %w", m.cfg.Name, err)
	}
	if m.signing() {
		m.broadcastSelfAlive()
	}
	return nil
}

// machineSignatures checks, at now, what a Machine with signatures on
// starts with: an identity, and with roots a certificate that names this
// member's name and key, signed by a trusted root, not expired.
func machineSignatures(c *Config, now time.Time) error {
	if c.Claims.Signatures == SignaturesOff {
		return nil
	}
	if len(c.Claims.Identity) == 0 {
		return &ConfigError{Field: "Claims.Identity", Reason: fmt.Sprintf("is required with Claims.Signatures %v (Memberlist generates one)", c.Claims.Signatures)}
	}
	if len(c.Claims.TrustedRoots) == 0 {
		return nil
	}
	if len(c.Claims.Certificate) == 0 {
		return &ConfigError{Field: "Claims.Certificate", Reason: "is required with Claims.TrustedRoots and Claims.Signatures on"}
	}
	pub := c.Claims.Identity.Public().(ed25519.PublicKey)
	if err := claims.VerifyCertificate(c.Claims.Certificate, c.Name, pub, c.Claims.TrustedRoots, now); err != nil {
		return &ConfigError{Field: "Claims.Certificate", Reason: err.Error()}
	}
	return nil
}
