package swim

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/certificate"
	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/wire"
)

// mtKey is test peer i's identity key (0: the Machine under test's).
func mtKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("identity of peer %d", i)))
	return ed25519.NewKeyFromSeed(seed[:])
}

func mtPub(i int) ed25519.PublicKey { return mtKey(i).Public().(ed25519.PublicKey) }

// mtForger is the key holder of the forgery tests: a member of the
// cluster, with the cluster key and an identity of its own.
const mtForger = 99

var mtForgerAddr = netip.MustParseAddrPort("10.9.9.9:7946")

// signedConfig is mtConfig with signatures in mode.
func signedConfig(mode SignatureMode) *Config {
	c := mtConfig()
	c.Claims.Signatures = mode
	if mode != SignaturesOff {
		c.Claims.Identity = mtKey(0)
	}
	return c
}

// signAlive signs a as key's holder would (key's public key in it).
func (h *mt) signAlive(a *wire.Alive, key ed25519.PrivateKey) *wire.Alive {
	a.Key = key.Public().(ed25519.PublicKey)
	a.Sig = claims.Sign(key, claims.AppendAlive(nil, h.cfg.Label, a))
	return a
}

// peerAlive is peer i's own alive at inc, life and addr, signed when sign.
func (h *mt) peerAlive(i int, inc uint64, addr netip.AddrPort, meta []byte, sign bool) *wire.Alive {
	a := lifeAlive(i, mtLife(i, 0), addr, inc)
	a.Versions.ProtocolMax = wire.ProtocolSigned
	a.Meta = meta
	if sign {
		h.signAlive(a, mtKey(i))
	}
	return a
}

// exchanges counts n push-pulls started, as far as signed claims tell
// (claims.Table.Exchange): claims taken before are no longer recent.
func (h *mt) exchanges(n int) {
	for range n {
		h.m.sigs.Exchange()
	}
}

// joinSignedPeers joins n peers through a seed whose view carries each
// one's signed alive at incarnation 1.
func (h *mt) joinSignedPeers(n int) {
	h.t.Helper()
	ms := make([]wire.MemberState, 0, n)
	for i := 1; i <= n; i++ {
		a := h.peerAlive(i, 1, mtPeerAddr(i), nil, h.m.signing())
		ms = append(ms, wire.MemberState{Name: a.Name, Addr: a.Addr, Incarnation: a.Incarnation,
			Versions: a.Versions, Life: a.Life, Key: a.Key, Sig: a.Sig})
	}
	h.join(ms...)
	require.Equal(h.t, n+1, h.m.NumMembers())
}

// forgery is one claim a key holder makes about peer 3, and how the test
// shows whether it took effect.
type forgery struct {
	name string
	// forge feeds the forged claim; signed: the forger signs it with
	// its own identity (as a member of a signing cluster would).
	forge func(h *mt, signed bool)
	// silent are the addresses that do not answer meanwhile.
	silent map[netip.AddrPort]bool
	// took reports whether the claim changed the Machine's view.
	took func(h *mt, before Member) bool
}

func forgeries() []forgery {
	p3 := mtPeer(3)
	after := func(h *mt) Member { mb, _ := h.m.Member(p3); return mb }
	forgedAlive := func(h *mt, signed bool, inc uint64, addr netip.AddrPort, meta []byte) {
		a := h.peerAlive(3, inc, addr, meta, false)
		if signed {
			h.signAlive(a, mtKey(mtForger))
		}
		h.feed(mtForgerAddr, a)
	}
	return []forgery{
		{
			// The forger moves p3 to its own address while p3 is out
			// of reach for a moment: the move check finds the forger
			// answering at the new address and p3 silent at the old.
			name:   "address",
			forge:  func(h *mt, signed bool) { forgedAlive(h, signed, 2, mtForgerAddr, nil) },
			silent: map[netip.AddrPort]bool{mtPeerAddr(3): true},
			took:   func(h *mt, before Member) bool { return after(h).Addr != before.Addr },
		},
		{
			name:  "metadata",
			forge: func(h *mt, signed bool) { forgedAlive(h, signed, 2, mtPeerAddr(3), []byte("evil")) },
			took:  func(h *mt, before Member) bool { return string(after(h).Meta) == "evil" },
		},
		{
			// A leave in p3's name, from p3's own address (spoofed): a
			// leave is final for the applications.
			name: "leave",
			forge: func(h *mt, signed bool) {
				d := &wire.Dead{Name: p3, Incarnation: 1, From: p3, Left: true, Life: mtLife(3, 0)}
				if signed {
					d.Sig = claims.Sign(mtKey(mtForger), claims.AppendLeave(nil, h.cfg.Label, p3, 1, mtLife(3, 0)))
				}
				h.feed(mtPeerAddr(3), d)
			},
			took: func(h *mt, before Member) bool { return after(h).State == StateLeft },
		},
		{
			// An incarnation raised far ahead: p3's own refutations
			// then lose to the forger's claims until it catches up.
			name:  "incarnation",
			forge: func(h *mt, signed bool) { forgedAlive(h, signed, 1<<31, mtPeerAddr(3), nil) },
			took:  func(h *mt, before Member) bool { return after(h).Incarnation != before.Incarnation },
		},
	}
}

// A member holding the cluster key forges a claim of each kind about p3:
// without signatures the claim takes effect; with them (unsigned, or
// signed with the forger's own key) it is refused, counted and changes
// nothing: no event about p3, p3 as before.
func TestForgedClaimsRefused(t *testing.T) {
	for _, f := range forgeries() {
		t.Run(f.name, func(t *testing.T) {
			t.Run("unsigned cluster: takes effect", func(t *testing.T) {
				h := newMT(t, signedConfig(SignaturesOff))
				h.joinSignedPeers(6)
				before, _ := h.m.Member(mtPeer(3))
				f.forge(h, false)
				h.run(h.now.Add(2*h.cfg.ProbeInterval), f.silent)
				require.True(t, f.took(h, before), "the forgery did not take effect: the test shows nothing")
			})
			for _, signed := range []bool{false, true} {
				t.Run(fmt.Sprintf("signatures required, forger signs %v", signed), func(t *testing.T) {
					h := newMT(t, signedConfig(SignaturesRequired))
					h.joinSignedPeers(6)
					before, _ := h.m.Member(mtPeer(3))
					st := h.m.Stats()
					f.forge(h, signed)
					out := h.run(h.now.Add(2*h.cfg.ProbeInterval), f.silent)
					require.False(t, f.took(h, before))
					mb, _ := h.m.Member(mtPeer(3))
					require.Equal(t, before.Addr, mb.Addr)
					require.Equal(t, before.Incarnation, mb.Incarnation)
					require.Equal(t, string(before.Meta), string(mb.Meta))
					require.Equal(t, StateAlive, mb.State)
					require.Empty(t, out.eventsAbout(mtPeer(3)))
					after := h.m.Stats()
					refused := after.Claims.Unsigned + after.Claims.Forged + after.Claims.KeyConflicts + after.Claims.FromStrangers -
						st.Claims.Unsigned - st.Claims.Forged - st.Claims.KeyConflicts - st.Claims.FromStrangers
					require.Equal(t, uint64(1), refused, "refused and counted once")
				})
			}
		})
	}
}

// The life: a key holder claims this member's name at an earlier life, at
// its own address, and answers for that life. Without signatures this
// member takes it for a second process started before it and yields its
// name (it leaves); with them the claim, under a key that is not its own
// and not from a seed it joined through, is dropped and counted, and it
// keeps its name.
func TestForgedEarlierLifeRefused(t *testing.T) {
	forge := func(h *mt, signed bool) {
		a := &wire.Alive{Name: mtSelf, Addr: wire.EncodeAddr(mtForgerAddr), Incarnation: 5,
			Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: wire.ProtocolSigned}, Life: 1}
		if signed {
			h.signAlive(a, mtKey(mtForger))
		}
		h.feed(mtPeerAddr(1), a)
		h.run(h.now.Add(2*h.cfg.ProbeInterval), nil)
	}
	t.Run("unsigned cluster: yields", func(t *testing.T) {
		h := newMT(t, signedConfig(SignaturesOff))
		h.joinSignedPeers(4)
		forge(h, false)
		require.True(t, h.m.Status().NameYielded, "the forgery did not take effect: the test shows nothing")
		require.Equal(t, StateLeft, h.m.LocalMember().State)
	})
	for _, signed := range []bool{false, true} {
		t.Run(fmt.Sprintf("signatures required, forger signs %v", signed), func(t *testing.T) {
			h := newMT(t, signedConfig(SignaturesRequired))
			h.joinSignedPeers(4)
			forge(h, signed)
			require.False(t, h.m.Status().NameYielded)
			require.Equal(t, StateAlive, h.m.LocalMember().State)
			st := h.m.Stats()
			require.Equal(t, uint64(1), st.Claims.Unsigned+st.Claims.KeyConflicts)
			require.Zero(t, st.Lives.NameConflicts)
		})
	}
}

// The member's own signed claims are taken, and relayed unchanged: its
// new metadata, and its leave, which needs no check with it when signed.
func TestSignedClaimsTakenAndRelayed(t *testing.T) {
	h := newMT(t, signedConfig(SignaturesRequired))
	h.joinSignedPeers(6)
	a := h.peerAlive(3, 2, mtPeerAddr(3), []byte("v2"), true)
	h.feed(mtPeerAddr(1), a)
	mb, _ := h.m.Member(mtPeer(3))
	require.Equal(t, "v2", string(mb.Meta))
	relayed := false
	for _, msg := range h.piggyback() {
		if r, ok := msg.(*wire.Alive); ok && r.Name == mtPeer(3) {
			require.Equal(t, a.Sig, r.Sig, "relayed with the member's signature")
			require.Equal(t, a.Key, r.Key)
			relayed = true
		}
	}
	require.True(t, relayed)

	verified := h.m.Stats().Claims.SignaturesVerified
	h.feed(mtPeerAddr(2), a)
	require.Equal(t, verified, h.m.Stats().Claims.SignaturesVerified, "a stale copy is not verified again")

	d := &wire.Dead{Name: mtPeer(4), Incarnation: 1, From: mtPeer(4), Left: true, Life: mtLife(4, 0)}
	d.Sig = claims.Sign(mtKey(4), claims.AppendLeave(nil, h.cfg.Label, mtPeer(4), 1, mtLife(4, 0)))
	h.feed(mtPeerAddr(1), d) // relayed by p1, not from p4's address
	mb, _ = h.m.Member(mtPeer(4))
	require.Equal(t, StateLeft, mb.State)
	require.Zero(t, h.m.Stats().LeaveChecks, "a signed leave needs no check")
}

// Accusations are signed by their accuser: an unsigned one, or one whose
// signature is not the accuser's, is dropped; each accuser's are counted
// and bounded.
func TestAccusationsAccountable(t *testing.T) {
	h := newMT(t, signedConfig(SignaturesRequired))
	h.joinSignedPeers(60)
	accuse := func(name, from string, key ed25519.PrivateKey, life uint64) *wire.Suspect {
		s := &wire.Suspect{Name: name, Incarnation: 1, From: from, Life: life}
		if key != nil {
			s.Sig = claims.Sign(key, claims.AppendAccusation(nil, h.cfg.Label, claims.Accusation{Name: name, From: from, Inc: 1, Life: life}))
		}
		return s
	}
	h.feed(mtPeerAddr(1), accuse(mtPeer(3), mtPeer(1), nil, mtLife(3, 0)))
	h.feed(mtPeerAddr(1), accuse(mtPeer(3), mtPeer(2), mtKey(1), mtLife(3, 0))) // p1 signs as p2
	mb, _ := h.m.Member(mtPeer(3))
	require.Equal(t, StateAlive, mb.State)
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.Claims.Unsigned)
	require.Equal(t, uint64(1), st.Claims.Forged)

	s := accuse(mtPeer(3), mtPeer(1), mtKey(1), mtLife(3, 0))
	h.feed(mtPeerAddr(1), s)
	mb, _ = h.m.Member(mtPeer(3))
	require.Equal(t, StateSuspect, mb.State)
	relayed := false
	for _, msg := range h.piggyback() {
		if r, ok := msg.(*wire.Suspect); ok && r.Name == mtPeer(3) {
			require.Equal(t, mtPeer(1), r.From)
			require.Equal(t, s.Sig, r.Sig, "relayed with the accuser's signature")
			relayed = true
		}
	}
	require.True(t, relayed)
	h.feed(mtPeerAddr(2), s) // a copy
	taken, limited := h.m.AccusationsBy(mtPeer(1))
	require.Equal(t, uint64(1), taken)

	// p1 accuses everyone at once: past its bound, dropped and counted.
	for i := 4; i <= 60; i++ {
		h.feed(mtPeerAddr(1), accuse(mtPeer(i), mtPeer(1), mtKey(1), mtLife(i, 0)))
	}
	taken, limited = h.m.AccusationsBy(mtPeer(1))
	require.Equal(t, uint64(claims.AccuserBurst), taken)
	require.Equal(t, uint64(57+1-claims.AccuserBurst), limited)
	require.Equal(t, limited, h.m.Stats().Claims.AccusationsLimited)
	// Refilled with time: one per probe interval.
	h.tick(h.now.Add(3 * h.cfg.ProbeInterval))
	h.feed(mtPeerAddr(1), accuse(mtPeer(60), mtPeer(1), mtKey(1), mtLife(60, 0)))
	taken, _ = h.m.AccusationsBy(mtPeer(1))
	require.Equal(t, uint64(claims.AccuserBurst+1), taken)
}

// With SignaturesSign, unsigned claims about members not known to sign
// are taken (the members not switched yet), but not about one that signs.
func TestSignModeTakesUnsignedFromUnswitched(t *testing.T) {
	h := newMT(t, signedConfig(SignaturesSign))
	ms := []wire.MemberState{}
	for i := 1; i <= 4; i++ {
		a := h.peerAlive(i, 1, mtPeerAddr(i), nil, i <= 2) // p1, p2 sign
		ms = append(ms, wire.MemberState{Name: a.Name, Addr: a.Addr, Incarnation: 1, Versions: a.Versions, Life: a.Life, Key: a.Key, Sig: a.Sig})
	}
	h.join(ms...)
	h.feed(mtPeerAddr(3), h.peerAlive(3, 2, mtPeerAddr(3), []byte("m"), false))
	mb, _ := h.m.Member(mtPeer(3))
	require.Equal(t, "m", string(mb.Meta), "an unswitched member's claim")
	h.feed(mtPeerAddr(1), h.peerAlive(1, 2, mtPeerAddr(1), []byte("m"), false))
	mb, _ = h.m.Member(mtPeer(1))
	require.Empty(t, mb.Meta, "an unsigned claim about a member that signs")
	require.Equal(t, uint64(1), h.m.Stats().Claims.Unsigned)
}

// A restart under a fresh identity (a new life, a new key) is refused
// under trust on first use, whatever the held life's silence: the name
// stays bound to its key (the known-hosts model) and no check of the held
// life is even started. Once the operator rebinds the name, the new key's
// new life is checked and taken as any restart.
func TestRestartWithNewKey(t *testing.T) {
	h := newMT(t, signedConfig(SignaturesRequired))
	h.joinSignedPeers(4)
	a := lifeAlive(3, mtLife(3, 1), mtPeerAddr(3), 0)
	a.Versions.ProtocolMax = wire.ProtocolSigned
	h.signAlive(a, mtKey(103))
	answerLifeChecks := func(out mtOut) {
		// The held life's ping goes unanswered; the new life's is
		// answered.
		for _, p := range out.Packets {
			for _, msg := range p.Msgs {
				if ping, ok := msg.(*wire.Ping); ok && ping.Target == mtPeer(3) && ping.TargetLife == a.Life {
					h.feed(mtPeerAddr(3), &wire.Ack{Seq: ping.Seq})
				}
			}
		}
	}
	h.feed(mtPeerAddr(3), a)
	out := h.ready()
	require.Zero(t, h.m.Stats().Lives.Checks, "no check: the key is refused first")
	answerLifeChecks(out)
	mb, _ := h.m.Member(mtPeer(3))
	require.NotEqual(t, mtLife(3, 1), mb.Life)
	require.Equal(t, []byte(mtPub(3)), h.m.sigs.Bound(mtPeer(3)))
	require.Equal(t, uint64(1), h.m.Stats().Claims.KeyConflicts)

	require.True(t, h.m.Rebind(mtPeer(3)))
	require.False(t, h.m.Rebind(mtPeer(3)), "no binding left to forget")
	h.feed(mtPeerAddr(3), a)
	answerLifeChecks(h.ready())
	mb, _ = h.m.Member(mtPeer(3))
	require.Equal(t, mtLife(3, 1), mb.Life)
	require.Equal(t, []byte(mtPub(103)), h.m.sigs.Bound(mtPeer(3)))
}

// The Machine hands its SignatureMode to internal/claims as a number: the
// two must name the same modes.
func TestSignatureModesAreClaimsModes(t *testing.T) {
	for mode, want := range map[SignatureMode]claims.Mode{
		SignaturesOff: claims.ModeOff, SignaturesSign: claims.ModeSign, SignaturesRequired: claims.ModeRequired,
	} {
		require.Equal(t, want, claims.Mode(mode), mode.String())
		m, err := NewMachine(signedConfig(mode), mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
		require.NoError(t, err)
		require.Equal(t, mode, m.Signatures())
	}
}

func TestSignaturesConfig(t *testing.T) {
	c := signedConfig(SignaturesRequired)
	c.Claims.Identity = nil
	_, err := NewMachine(c, mtSelfAddr, nil, mtStart)
	require.ErrorContains(t, err, "Claims.Identity")
	c = signedConfig(SignaturesRequired)
	c.Claims.Identity = c.Claims.Identity[:10]
	require.ErrorContains(t, c.Validate(), "Claims.Identity")
	c = signedConfig(SignaturesRequired)
	c.Claims.Signatures = 7
	require.ErrorContains(t, c.Validate(), "Claims.Signatures")
	m, err := ParseSignatureMode("required")
	require.NoError(t, err)
	require.Equal(t, SignaturesRequired, m)
	_, err = ParseSignatureMode("yes")
	require.Error(t, err)
}

// A certificate that expired by the seed's clock: the seed refuses the
// join and says why, and the joiner's join fails with that reason; one
// from a root the seed does not trust likewise. A certified joiner joins.
func TestCertificateJoinRefusedAtTheSeed(t *testing.T) {
	rootPub, root, _ := ed25519.GenerateKey(nil)
	otherPub, other, _ := ed25519.GenerateKey(nil)
	certified := func(name string, key int, issuer ed25519.PrivateKey, roots []ed25519.PublicKey, notAfter time.Time) *Config {
		c := signedConfig(SignaturesRequired)
		c.Name = name
		c.Claims.Identity = mtKey(key)
		c.Claims.TrustedRoots = roots
		cert, err := certificate.New(issuer, name, mtPub(key), notAfter)
		require.NoError(t, err)
		c.Claims.Certificate = cert
		return c
	}
	trusted := []ed25519.PublicKey{rootPub}
	seed, err := NewMachine(certified("seed", 1, root, trusted, mtStart.Add(24*time.Hour)), mtSeedAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
	require.NoError(t, err)
	join := func(cfg *Config, at time.Time) error {
		_, err := joinSeed(t, seed, cfg, at)
		return err
	}
	err = join(certified("soon", 2, root, trusted, mtStart.Add(time.Hour)), mtStart.Add(2*time.Hour))
	require.ErrorIs(t, err, ErrJoinRefused)
	require.ErrorContains(t, err, `certificate of "soon": certificate expired at`)
	err = join(certified("foreign", 3, other, []ed25519.PublicKey{rootPub, otherPub}, mtStart.Add(time.Hour)), mtStart)
	require.ErrorIs(t, err, ErrJoinRefused)
	require.ErrorContains(t, err, "not signed by a trusted root")
	require.Equal(t, uint64(2), seed.Stats().Claims.CertificatesRefused)
	require.Equal(t, 1, seed.NumMembers())
	require.NoError(t, join(certified("good", 4, root, trusted, mtStart.Add(time.Hour)), mtStart))
}

// Push-pulls carry a proof only where the peer may lack the claim: a
// request, for claims taken in the sender's last exchanges and its own
// entry; a reply, where the request showed an older view. An entry whose
// proof a signing sender left out is not news to take.
func TestPushPullProofsWhereNeeded(t *testing.T) {
	h := newMT(t, signedConfig(SignaturesRequired))
	h.joinSignedPeers(6)
	h.exchanges(claims.RecentExchanges) // the join's claims are no longer recent
	h.feed(mtPeerAddr(3), h.peerAlive(3, 2, mtPeerAddr(3), []byte("v2"), true))
	signed := func(data []byte) map[string]bool {
		pp, err := wire.ParsePushPullLimit(data, 100)
		require.NoError(t, err)
		out := map[string]bool{}
		var v wire.MemberView
		for c := pp.Cursor(); c.Next(&v); {
			out[string(v.Name)] = len(v.Sig) > 0
		}
		return out
	}
	req, err := h.m.encodeState(false, "", peerView{})
	require.NoError(t, err)
	got := signed(req)
	require.True(t, got[mtSelf], "its own entry")
	require.True(t, got[mtPeer(3)], "a claim taken lately")
	require.False(t, got[mtPeer(4)], "a claim from before the last exchanges")
	full := len(req)

	h.exchanges(claims.RecentExchanges)
	req, err = h.m.encodeState(false, "", peerView{})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{mtSelf: true, mtPeer(1): false, mtPeer(2): false, mtPeer(3): false,
		mtPeer(4): false, mtPeer(5): false, mtPeer(6): false}, signed(req))
	require.Less(t, len(req), full-90, "one proof fewer")

	// p1 asks with a view that misses p3's new claim and p5: the reply
	// carries those two proofs.
	var theirs []wire.MemberState
	for i := 1; i <= 6; i++ {
		if i == 5 {
			continue
		}
		a := h.peerAlive(i, 1, mtPeerAddr(i), nil, i == 1)
		theirs = append(theirs, wire.MemberState{Name: a.Name, Addr: a.Addr, Incarnation: 1, Versions: a.Versions, Life: a.Life, Key: a.Key, Sig: a.Sig})
	}
	self, _ := h.m.Member(mtSelf)
	theirs = append(theirs, wire.MemberState{Name: mtSelf, Addr: wire.EncodeAddr(self.Addr), Incarnation: self.Incarnation,
		Versions: h.m.versionsOf(h.m.self), Life: self.Life})
	request, err := wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(1), Members: theirs})
	require.NoError(t, err)
	reply, err := h.m.HandleStream(h.now, mtPeerAddr(1), bytes.Clone(request))
	require.NoError(t, err)
	got = signed(reply)
	require.True(t, got[mtPeer(3)], "p1 holds p3's older claim")
	require.True(t, got[mtPeer(5)], "p1 does not hold p5")
	require.False(t, got[mtPeer(4)], "p1 holds p4 as it is")
	require.False(t, got[mtPeer(2)])

	// p1 turned signatures on lately (its key is bound here since this
	// member's last exchange): the reply gives it every proof, so that
	// it binds the keys of the members it holds already.
	h.m.sigs.Forget(mtPeer(1))
	h.m.sigs.KeepAlive(h.peerAlive(1, 1, mtPeerAddr(1), nil, true))
	reply, err = h.m.HandleStream(h.now, mtPeerAddr(1), request)
	require.NoError(t, err)
	for name, s := range signed(reply) {
		require.True(t, s, "%s's proof, for a member bound lately", name)
	}

	// p2 signs its own entry and leaves p6's proof out: p6's claim at
	// incarnation 9 is not taken, and not counted as unsigned.
	before := h.m.Stats()
	a2 := h.peerAlive(2, 1, mtPeerAddr(2), nil, true)
	a6 := h.peerAlive(6, 9, mtPeerAddr(6), nil, false)
	request, err = wire.AppendPacket(nil, &wire.PushPull{From: mtPeer(2), Members: []wire.MemberState{
		{Name: a2.Name, Addr: a2.Addr, Incarnation: 1, Versions: a2.Versions, Life: a2.Life, Key: a2.Key, Sig: a2.Sig},
		{Name: a6.Name, Addr: a6.Addr, Incarnation: 9, Versions: a6.Versions, Life: a6.Life},
	}})
	require.NoError(t, err)
	_, err = h.m.HandleStream(h.now, mtPeerAddr(2), request)
	require.NoError(t, err)
	mb, _ := h.m.Member(mtPeer(6))
	require.Equal(t, uint64(1), mb.Incarnation)
	require.Equal(t, before.Claims.Unsigned, h.m.Stats().Claims.Unsigned)
}

// joinSeed starts a Machine of cfg at mtSelfAddr at mtStart that joins
// through seed at mtSeedAddr at at, and returns it with the outcome of its
// join.
func joinSeed(t *testing.T, seed *Machine, cfg *Config, at time.Time) (*Machine, error) {
	t.Helper()
	j, err := NewMachine(cfg, mtSelfAddr, rand.New(rand.NewPCG(3, 4)), mtStart)
	require.NoError(t, err)
	ids := j.Join(at, []netip.AddrPort{mtSeedAddr})
	require.Len(t, ids, 1)
	req := j.Ready().Streams[0]
	reply, err := seed.HandleStream(at, mtSelfAddr, req.Data)
	require.NoError(t, err)
	return j, j.HandleStreamResponse(at, ids[0], reply, nil)
}

// A process that lost its key (a new identity under a name the seed holds
// bound to another) is refused at the seed under trust on first use, and
// its join says why; with the old identity it joins.
func TestJoinUnderAnotherKeyRefused(t *testing.T) {
	cfgOf := func(name string, key int) *Config {
		c := signedConfig(SignaturesRequired)
		c.Name = name
		c.Claims.Identity = mtKey(key)
		return c
	}
	seed, err := NewMachine(cfgOf("seed", 1), mtSeedAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
	require.NoError(t, err)
	join := func(cfg *Config, at time.Time) error {
		j, err := joinSeed(t, seed, cfg, at)
		if err != nil {
			return err
		}
		// The seed checks the newcomer at its address before it takes
		// its word: deliver the packets both ways a few times.
		for range 3 {
			for _, p := range seed.Ready().Packets {
				if p.To == mtSelfAddr {
					require.NoError(t, j.HandlePacket(at, mtSeedAddr, p.Data))
				}
			}
			for _, p := range j.Ready().Packets {
				if p.To == mtSeedAddr {
					require.NoError(t, seed.HandlePacket(at, mtSelfAddr, p.Data))
				}
			}
		}
		return nil
	}
	require.NoError(t, join(cfgOf("worker", 2), mtStart))
	require.Equal(t, []byte(mtPub(2)), seed.sigs.Bound("worker"))

	err = join(cfgOf("worker", 3), mtStart.Add(time.Minute))
	require.ErrorIs(t, err, ErrJoinRefused)
	require.ErrorContains(t, err, `name "worker" is bound to another key`)
	require.Equal(t, uint64(1), seed.Stats().Claims.KeyConflicts)
	require.NoError(t, join(cfgOf("worker", 2), mtStart.Add(2*time.Minute)))
}

// A name stays bound to its key while its tombstone remembers it (the
// member forgotten after GossipToDeadTime, ReconnectTimeout more), and is
// free once the tombstone is reaped.
func TestBindingOutlivesTheEntry(t *testing.T) {
	cfg := signedConfig(SignaturesRequired)
	cfg.GossipToDeadTime = 30 * time.Second
	cfg.ReconnectTimeout = time.Hour
	h := newMT(t, cfg)
	h.joinSignedPeers(4)
	s := h.m.lookup(mtPeer(3))
	h.m.declareDead(h.now, s, s.inc(), h.m.selfName, false)
	h.tick(h.now.Add(time.Minute))
	_, held := h.m.Member(mtPeer(3))
	require.False(t, held, "forgotten from the table")
	require.Equal(t, []byte(mtPub(3)), h.m.sigs.Bound(mtPeer(3)), "still bound: the tombstone remembers the name")
	h.tick(h.now.Add(time.Hour))
	require.Nil(t, h.m.sigs.Bound(mtPeer(3)), "free once the tombstone is reaped")
}

// junkAlive is an alive of name at addr and inc, with the key of identity
// key and a signature of nothing it says.
func junkAlive(name string, addr netip.AddrPort, inc uint64, key int) *wire.Alive {
	return &wire.Alive{
		Name: name, Addr: wire.EncodeAddr(addr), Incarnation: inc,
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: wire.ProtocolSigned},
		Key:      mtPub(key), Sig: make([]byte, ed25519.SignatureSize),
	}
}

// TestJunkSignaturesCheapBeforeCostly: on a cluster that signs, a
// stranger's junk-signed claims (invented members, and news of members
// held at their own addresses) reach no signature verification: the first
// are left to the newcomer check, which refuses news not the newcomer's
// own, the second dropped (Claims.FromStrangers). A member's junk reaches
// the verifier within its source's budget, and no further
// (Claims.OverBudget). Each signature cost about 50 µs, and one source's
// 3.8 MB/s of them pinned a core.
func TestJunkSignaturesCheapBeforeCostly(t *testing.T) {
	h := newMT(t, signedConfig(SignaturesRequired))
	h.joinSignedPeers(4)
	before := h.m.Stats().Claims.SignaturesVerified
	for i := range 200 {
		invented := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 250, byte(i >> 8), byte(i)}), 7946)
		h.feed(mtStranger, junkAlive(fmt.Sprintf("invented-%03d", i), invented, 1, 200+i))
		h.feed(mtStranger, junkAlive(mtPeer(1+i%3), mtPeerAddr(1+i%3), uint64(2+i), 1+i%3))
	}
	for i := range 100 {
		h.feed(mtStranger, &wire.Suspect{Name: mtPeer(1 + i%3), Incarnation: 1, From: mtPeer(4), Sig: make([]byte, ed25519.SignatureSize)})
	}
	st := h.m.Stats()
	require.Equal(t, before, st.Claims.SignaturesVerified, "a stranger reached the verifier")
	require.Equal(t, uint64(300), st.Claims.FromStrangers)
	require.Equal(t, uint64(200), st.Admission.NewcomersRefused)

	for i := range 2000 {
		h.feed(mtPeerAddr(1), junkAlive(mtPeer(2), mtPeerAddr(2), uint64(10_000+i), 2))
	}
	st = h.m.Stats()
	require.LessOrEqual(t, st.Claims.SignaturesVerified-before, uint64(verifyBurst+1), "one member's junk verified past its budget")
	require.Equal(t, uint64(2000-verifyBurst), st.Claims.OverBudget)
	mb, _ := h.m.Member(mtPeer(2))
	require.Equal(t, uint64(1), mb.Incarnation)
}
