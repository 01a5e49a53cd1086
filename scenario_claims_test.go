package swim

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/swim-go/swim/certificate"
	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/wire"
)

// The scenarios' names for what the new mechanisms put on the wire, which
// would print as long numbers or bytes otherwise: identities (Ed25519
// keys named by scripts or after Machines), signatures (ok or bad against
// the key the claim must carry), certificates, lives, broadcast epochs and
// broadcast identifiers. Signatures are made and checked here from the
// claim encoding of internal/claims, written out again: a script whose
// signed claims stop verifying shows the encoding changed.

// scenMillis is mtStart in milliseconds since the Unix epoch: lives and
// broadcast epochs at or after it print as offsets from it ("@1h").
var scenMillis = uint64(mtStart.UnixMilli())

// scenIdentity is the Ed25519 key of an identity seeded with seed.
func scenIdentity(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte("scenario identity " + seed))
	return ed25519.NewKeyFromSeed(s[:])
}

// addIdentity declares the identity name with key.
func (w *scenWorld) addIdentity(name string, key ed25519.PrivateKey) {
	w.ids[name] = key
	w.idNames[string(key.Public().(ed25519.PublicKey))] = name
}

// identity is the key of the identity name, declared by identity or
// given to a Machine.
func (w *scenWorld) identity(name string) (ed25519.PrivateKey, error) {
	k, ok := w.ids[name]
	if !ok {
		return nil, fmt.Errorf("no identity %q (declare it: identity NAME seed=N)", name)
	}
	return k, nil
}

// pubOf is the public key of the identity name, nil if there is none.
func (w *scenWorld) pubOf(name string) ed25519.PublicKey {
	if k, ok := w.ids[name]; ok {
		return k.Public().(ed25519.PublicKey)
	}
	return nil
}

// The claims a member signs (internal/claims): a domain, the kind, the
// cluster label, the name, the incarnation and the life, then what the
// kind adds.
const (
	scenClaimDomain = "swim claim v1\x00"
	scenClaimAlive  = 'A'
	scenClaimLeave  = 'L'
	scenClaimSusp   = 'S'
	scenClaimDead   = 'D'
)

func scenField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

func (w *scenWorld) claimHead(kind byte, name string, inc, life uint64) []byte {
	b := append([]byte(scenClaimDomain), kind)
	b = scenField(b, []byte(w.label))
	b = scenField(b, []byte(name))
	b = binary.BigEndian.AppendUint64(b, inc)
	return binary.BigEndian.AppendUint64(b, life)
}

// aliveClaim is what an alive's signature covers: all but the signature
// and the certificate.
func (w *scenWorld) aliveClaim(name string, addr []byte, inc, life uint64, meta []byte, v wire.Versions, key []byte) []byte {
	b := w.claimHead(scenClaimAlive, name, inc, life)
	b = scenField(b, addr)
	b = scenField(b, meta)
	b = append(b, v.ProtocolMin, v.ProtocolMax, v.AppMin, v.AppMax)
	return scenField(b, key)
}

func (w *scenWorld) leaveClaim(name string, inc, life uint64) []byte {
	return w.claimHead(scenClaimLeave, name, inc, life)
}

func (w *scenWorld) accusationClaim(name, from string, inc, life uint64, dead bool) []byte {
	kind := byte(scenClaimSusp)
	if dead {
		kind = scenClaimDead
	}
	return scenField(w.claimHead(kind, name, inc, life), []byte(from))
}

// fmtKey prints " key=NAME" for a known identity's public key, the first
// bytes in hex for another.
func (w *scenWorld) fmtKey(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	if name, ok := w.idNames[string(key)]; ok {
		return " key=" + name
	}
	return fmt.Sprintf(" key=%x", key[:min(len(key), 4)])
}

// fmtSig prints " sig=ok" when sig is key's signature of claim, " sig=bad"
// when it is not, " sig=?" when there is no key to check it with.
func fmtSig(key, claim, sig []byte) string {
	switch {
	case len(sig) == 0:
		return ""
	case len(key) != ed25519.PublicKeySize:
		return " sig=?"
	case claims.Verify(key, claim, sig):
		return " sig=ok"
	}
	return " sig=bad"
}

// fmtCert prints " cert=ROOT" for a certificate a declared identity
// signed binding name to key, valid now; " cert=bad" for any other.
func (w *scenWorld) fmtCert(cert []byte, name string, key []byte) string {
	if len(cert) == 0 {
		return ""
	}
	c, err := certificate.Parse(cert)
	if err != nil {
		return " cert=bad"
	}
	for root, k := range w.ids {
		pub := k.Public().(ed25519.PublicKey)
		if bytes.Equal(pub[:8], c.Root[:]) && certificate.Verify(cert, name, key, []ed25519.PublicKey{pub}, w.now) == nil {
			return " cert=" + root
		}
	}
	return " cert=bad"
}

// fmtProof prints the key, signature and certificate of an alive claim
// (an Alive, or an alive push-pull entry).
func (w *scenWorld) fmtProof(name string, addr []byte, inc, life uint64, meta []byte, v wire.Versions, key, sig, cert []byte) string {
	if !w.fields["sig"] {
		return ""
	}
	s := w.fmtKey(key)
	s += fmtSig(key, w.aliveClaim(name, addr, inc, life, meta, v, key), sig)
	return s + w.fmtCert(cert, name, key)
}

// signArg reads the sig= of a claim: "ok" signs it with the key of signer
// (the identity the claim must be signed by), "bad" with a claim of
// another kind (a signature that verifies for nothing), and an identity's
// name with that identity's key (a key holder's forgery).
func (w *scenWorld) signArg(a *scenArgs, signer string, claim []byte) ([]byte, error) {
	v, ok := a.get("sig")
	if !ok {
		return nil, nil
	}
	by := v
	switch v {
	case "ok":
		by = signer
	case "bad":
		by = signer
		claim = append(bytes.Clone(claim), 0)
	}
	if _, known := w.ids[by]; !known {
		if k, err := w.autoIdentity(by); err == nil {
			return claims.Sign(k, claim), nil
		}
	}
	k, err := w.identity(by)
	if err != nil {
		return nil, fmt.Errorf("sig=%s: %w", v, err)
	}
	return claims.Sign(k, claim), nil
}

// signerOf is the identity whose key an alive carries: the one that
// signs it with sig=ok.
func (w *scenWorld) signerOf(key []byte, name string) string {
	if by, ok := w.idNames[string(key)]; ok {
		return by
	}
	return name
}

// autoIdentity gives a scripted peer that signs without a declared
// identity one seeded with its name.
func (w *scenWorld) autoIdentity(name string) (ed25519.PrivateKey, error) {
	if _, ok := w.addrOf(name); !ok {
		return nil, fmt.Errorf("no identity %q", name)
	}
	k := scenIdentity(name)
	w.addIdentity(name, k)
	return k, nil
}

// keyArg reads key= (an identity's name), defaulting to name's identity
// when the claim is signed (sig= given).
func (w *scenWorld) keyArg(a *scenArgs, name string) ([]byte, error) {
	v, ok := a.get("key")
	if !ok {
		if _, signed := a.kv["sig"]; !signed {
			return nil, nil
		}
		v = name
	}
	if _, known := w.ids[v]; !known {
		if _, err := w.autoIdentity(v); err != nil {
			return nil, fmt.Errorf("key=%s: %w", v, err)
		}
	}
	return w.pubOf(v), nil
}

// certArg reads cert=ROOT: a certificate the identity ROOT signs for name
// and key, valid for a day from mtStart.
func (w *scenWorld) certArg(a *scenArgs, name string, key []byte) ([]byte, error) {
	v, ok := a.get("cert")
	if !ok {
		return nil, nil
	}
	root, err := w.identity(v)
	if err != nil {
		return nil, fmt.Errorf("cert=%s: %w", v, err)
	}
	return certificate.New(root, name, key, mtStart.Add(24*time.Hour))
}

// fmtLife prints a life: a Machine's as NAME.k (the kth Machine of that
// name in the scenario), one that started at or after mtStart as its
// start's offset ("@1h", "@1h/7" with its low bits), any other as its
// number.
func (w *scenWorld) fmtLife(life uint64) string {
	if name, ok := w.lifeNames[life]; ok {
		return name
	}
	if start := life >> 16; start >= scenMillis {
		s := "@" + (time.Duration(start-scenMillis) * time.Millisecond).String()
		if low := life & 0xffff; low != 0 {
			s += "/" + strconv.FormatUint(low, 10)
		}
		return s
	}
	return strconv.FormatUint(life, 10)
}

// parseLife reads what fmtLife prints.
func (w *scenWorld) parseLife(s string) (uint64, error) {
	for life, name := range w.lifeNames {
		if name == s {
			return life, nil
		}
	}
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		ds, lows, _ := strings.Cut(rest, "/")
		d, err := time.ParseDuration(ds)
		if err != nil {
			return 0, fmt.Errorf("life %s: %w", s, err)
		}
		var low uint64
		if lows != "" {
			if low, err = strconv.ParseUint(lows, 10, 16); err != nil {
				return 0, fmt.Errorf("life %s: %w", s, err)
			}
		}
		return (scenMillis+uint64(d/time.Millisecond))<<16 | low, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("life %s: not NAME.k, @T[/LOW] or a number", s)
	}
	return n, nil
}

// fmtLifeField prints " life=L" when lives are printed and life is said.
func (w *scenWorld) fmtLifeField(life uint64) string {
	if life == 0 || !w.fields["life"] {
		return ""
	}
	return " life=" + w.fmtLife(life)
}

// lifeArg reads life= (0 when absent).
func (w *scenWorld) lifeArg(a *scenArgs) (uint64, error) {
	v, ok := a.get("life")
	if !ok {
		return 0, nil
	}
	return w.parseLife(v)
}

// fmtVersions prints " ver=MAX" (protocols 1 to MAX, no application
// range) or " ver=MIN-MAX app=A-B" when versions are printed.
func (w *scenWorld) fmtVersions(v wire.Versions) string {
	if v == (wire.Versions{}) || !w.fields["ver"] {
		return ""
	}
	s := fmt.Sprintf(" ver=%d", v.ProtocolMax)
	if v.ProtocolMin != 1 {
		s = fmt.Sprintf(" ver=%d-%d", v.ProtocolMin, v.ProtocolMax)
	}
	if v.AppMin != 0 || v.AppMax != 0 {
		s += fmt.Sprintf(" app=%d-%d", v.AppMin, v.AppMax)
	}
	return s
}

// versionsArg reads ver=MAX or ver=MIN-MAX, and app=A-B.
func versionsArg(a *scenArgs) (wire.Versions, error) {
	var v wire.Versions
	if s, ok := a.get("ver"); ok {
		lo, hi, ranged := strings.Cut(s, "-")
		if !ranged {
			lo, hi = "1", s
		}
		mn, err1 := strconv.ParseUint(lo, 10, 4)
		mx, err2 := strconv.ParseUint(hi, 10, 4)
		if err1 != nil || err2 != nil {
			return v, fmt.Errorf("ver=%s: want MAX or MIN-MAX", s)
		}
		v.ProtocolMin, v.ProtocolMax = uint8(mn), uint8(mx)
	}
	if s, ok := a.get("app"); ok {
		lo, hi, _ := strings.Cut(s, "-")
		mn, err1 := strconv.ParseUint(lo, 10, 8)
		mx, err2 := strconv.ParseUint(hi, 10, 8)
		if err1 != nil || err2 != nil {
			return v, fmt.Errorf("app=%s: want A-B", s)
		}
		v.AppMin, v.AppMax = uint8(mn), uint8(mx)
	}
	return v, nil
}

// fmtEpoch prints a broadcast epoch: an origin's start at or after
// mtStart as its offset ("@0s"), any other as its number.
func fmtEpoch(e uint64) string {
	if e >= scenMillis {
		return "@" + (time.Duration(e-scenMillis) * time.Millisecond).String()
	}
	return strconv.FormatUint(e, 10)
}

func parseEpoch(s string) (uint64, error) {
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("epoch %s: %w", s, err)
		}
		return scenMillis + uint64(d/time.Millisecond), nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// bcastName names the broadcast (origin, epoch, seq) as ihave and graft
// print its TreeID: ORIGIN/EPOCH/SEQ, remembered from the broadcasts
// printed or sent.
func (w *scenWorld) bcastName(origin string, epoch uint64, seq uint32) string {
	s := fmt.Sprintf("%s/%s/%d", origin, fmtEpoch(epoch), seq)
	w.bcastIDs[TreeID(origin, epoch, seq)] = s
	return s
}

// fmtTreeID prints a TreeID by the broadcast's name, or in hex if no
// broadcast of that identifier was seen.
func (w *scenWorld) fmtTreeID(id uint64) string {
	if s, ok := w.bcastIDs[id]; ok {
		return s
	}
	return fmt.Sprintf("%016x", id)
}

// parseTreeID reads ORIGIN/EPOCH/SEQ or a TreeID in hex.
func (w *scenWorld) parseTreeID(s string) (uint64, error) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return strconv.ParseUint(s, 16, 64)
	}
	j := strings.LastIndexByte(s[:i], '/')
	if j < 0 {
		return 0, fmt.Errorf("broadcast %s: want ORIGIN/EPOCH/SEQ", s)
	}
	epoch, err := parseEpoch(s[j+1 : i])
	if err != nil {
		return 0, err
	}
	seq, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("broadcast %s: %w", s, err)
	}
	w.bcastName(s[:j], epoch, uint32(seq))
	return TreeID(s[:j], epoch, uint32(seq)), nil
}

// fmtTree prints a tree a graft or prune names: its origin, or * for the
// shared tree ("").
func fmtTree(origin string) string {
	if origin == "" {
		return "*"
	}
	return origin
}

func parseTree(s string) string {
	if s == "*" {
		return ""
	}
	return s
}
