package sim

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/wire"
)

// The attacks of a key holder: a member of the cluster, with the cluster's
// key and an identity of its own, that says what it may not
// (docs/security.md, "Threats"). Each test runs the attack in every
// signature mode where it applies.

var allModes = []swim.SignatureMode{swim.SignaturesOff, swim.SignaturesSign, swim.SignaturesRequired}

// identityOf is the key signedConfig gives the member called name.
func identityOf(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("sim identity " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// accusation is accuser's accusation of member, as observer holds the
// member, signed by the accuser's identity when mode signs.
func (s *scenario) accusation(mode swim.SignatureMode, observer, accuser, member string, dead bool) wire.Message {
	s.t.Helper()
	mb, ok := s.view(observer, member)
	require.True(s.t, ok)
	k := claims.Accusation{Name: member, From: accuser, Inc: mb.Incarnation, Life: mb.Life, Dead: dead}
	var sig []byte
	if mode != swim.SignaturesOff {
		sig = claims.Sign(identityOf(accuser), claims.AppendAccusation(nil, "", k))
	}
	if dead {
		return &wire.Dead{Name: member, Incarnation: k.Inc, From: accuser, Life: k.Life, Sig: sig}
	}
	// The longest silence an accuser may claim: its anchor as early as
	// any suspicion may be (handleSuspect caps it).
	return &wire.Suspect{Name: member, Incarnation: k.Inc, From: accuser, Life: k.Life, Sig: sig, Silence: 1 << 30}
}

// deathsOfSince counts the members that declared member dead or left
// since since.
func (s *scenario) deathsOfSince(since time.Time, member string) int {
	seen := map[string]bool{}
	for _, r := range s.Log().Kind(swim.EventLeave) {
		if r.Event.Member.Name == member && !r.At.Before(since) {
			seen[r.Observer] = true
		}
	}
	return len(seen)
}

// TestOneAccusationKillsNoPausedMember: a member paused for 2 s (under the
// 5 s PauseTolerance) while one key holder accuses it to every other
// member is declared dead by none, in every mode and whichever way the
// accusation comes: a death (checked with the accused, who does not
// answer while paused), a suspicion claiming the longest silence, or a
// suspicion followed a probe interval later by a death.
func TestOneAccusationKillsNoPausedMember(t *testing.T) {
	const n = 16
	ways := map[string][]bool{"death": {true}, "suspicion": {false}, "suspicion then death": {false, true}}
	for _, mode := range allModes {
		for way, dead := range ways {
			t.Run(fmt.Sprintf("%v/%s", mode, way), func(t *testing.T) {
				s := newScenario(t, 21, n, signedConfig(mode), true)
				require.True(t, s.RunUntil(s.converged, time.Minute))
				s.Run(10 * time.Second)
				victim, accuser := s.names[5], s.names[1]
				start := s.Now()
				require.NoError(t, s.Pause(victim, 2*time.Second))
				s.Run(100 * time.Millisecond)
				for i, d := range dead {
					if i > 0 {
						s.Run(swim.DefaultLANConfig().ProbeInterval)
					}
					for _, o := range without(s.names, victim, accuser) {
						s.inject(o, accuser, s.accusation(mode, o, accuser, victim, d))
					}
					require.Zero(t, s.deathsOfSince(start, victim), "the test shows nothing: dead before the accusation")
				}
				s.Run(30 * time.Second)
				require.Zero(t, s.deathsOfSince(start, victim), "members declared the paused member dead on one accusation")
				require.True(t, s.converged())
			})
		}
	}
}

// newImpostorScenario is newScenario with signatures required and no
// trusted roots (trust on first use), where the node called "impostor"
// runs under the name victim with an identity of its own: a key holder
// claiming another member's name.
func newImpostorScenario(t *testing.T, seed uint64, n int, victim string) *scenario {
	reg := swim.NewRegistry()
	config := signedConfig(swim.SignaturesRequired)
	factory := func(name string, addr netip.AddrPort, rng *rand.Rand, now time.Time) (Node, error) {
		cfg := *config(name)
		cfg.Name = name
		if name == "impostor" {
			cfg.Name = victim
		}
		return reg.NewMachine(&cfg, addr, rng, now)
	}
	return newScenarioWith(t, Options{Seed: seed, NodeFactory: factory}, n, true)
}

// holders counts the members, other than the processes running under
// name, that route name to addr.
func (s *scenario) holders(name string, addr netip.AddrPort) int {
	n := 0
	for _, o := range without(s.upNames(), name, "impostor") {
		if mb, ok := s.view(o, name); ok && mb.Addr == addr && mb.State != swim.StateDead && mb.State != swim.StateLeft {
			n++
		}
	}
	return n
}

// TestNameStaysWithItsKey: under trust on first use with signatures
// required, a key holder that claims a member's name under its own key,
// while the member is paused for 2 s or after it crashed, takes the name
// from no one: the claim is refused while the cluster remembers the name
// (Claims.KeyConflicts), the impostor's join is refused, and the real
// member, back or restarted with its key, keeps its name.
func TestNameStaysWithItsKey(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			const n = 16
			victim := "m5"
			s := newImpostorScenario(t, 31, n, victim)
			require.True(t, s.RunUntil(s.converged, time.Minute))
			s.Run(10 * time.Second)
			real := s.Addr(victim)
			if crash {
				require.NoError(t, s.Crash(victim))
			} else {
				require.NoError(t, s.Pause(victim, 2*time.Second))
			}
			imp, err := s.AddNode("impostor")
			require.NoError(t, err)
			s.join("impostor", s.Addr(s.names[0]))
			s.Run(20 * time.Second)
			if crash {
				require.NoError(t, s.Restart(victim))
				s.join(victim, s.Addr(s.names[0]))
				s.Run(20 * time.Second)
			}
			require.Zero(t, s.holders(victim, imp.Addr()), "members route the name to the impostor")
			require.Equal(t, n-1, s.holders(victim, real), "members that route the name to its own process")
			var conflicts uint64
			for _, o := range without(s.names, victim) {
				conflicts += s.machine(o).Stats().Claims.KeyConflicts
			}
			require.Positive(t, conflicts, "the impostor's claims are counted")
		})
	}
}

// TestRepeatAccusationsWait: a key holder that accuses a healthy member
// to every other member at its current incarnation every 250 ms for 60 s
// (each accusation within the accuser's bucket once it refills, each one
// refuted) made 1,144 suspect events; a repeat accusation by an accuser
// whose last accusation of the member was refuted lately waits, longer
// each time, so each observer reports at most a handful.
func TestRepeatAccusationsWait(t *testing.T) {
	for _, mode := range []swim.SignatureMode{swim.SignaturesOff, swim.SignaturesRequired} {
		t.Run(mode.String(), func(t *testing.T) {
			const n = 16
			s := newScenario(t, 41, n, signedConfig(mode), true)
			require.True(t, s.RunUntil(s.converged, time.Minute))
			s.Run(10 * time.Second)
			victim, accuser := s.names[5], s.names[1]
			start := s.Now()
			for s.Now().Sub(start) < time.Minute {
				for _, o := range without(s.names, victim, accuser) {
					s.inject(o, accuser, s.accusation(mode, o, accuser, victim, false))
				}
				s.Run(250 * time.Millisecond)
			}
			s.Run(10 * time.Second)
			events := 0
			for _, r := range s.Log().Kind(swim.EventSuspect) {
				if r.Event.Member.Name == victim && !r.At.Before(start) {
					events++
				}
			}
			t.Logf("%v: %d suspect events about the victim in 60 s", mode, events)
			require.LessOrEqual(t, events, 6*(n-2), "suspect events about a healthy member from one accuser")
			require.Zero(t, s.deathsOfSince(start, victim))
			var held uint64
			for _, o := range without(s.names, victim, accuser) {
				held += s.machine(o).Stats().AccusationsWaited
			}
			require.Positive(t, held, "the accusations that waited are counted")
		})
	}
}

// TestOriginCannotBeSilenced: two broadcasts forged in a member's name at
// the two highest epochs, sent to every member, took both windows of that
// origin's delivered broadcasts, so that none of its next 300 broadcasts
// was delivered, for good. An origin's epochs start at its life's start,
// and its window of that epoch is kept whatever later epochs claim; an
// epoch before its life or after the receiver's clock is implausible.
func TestOriginCannotBeSilenced(t *testing.T) {
	const n = 16
	l := newTreeLoad()
	s := newScenarioWith(t, Options{Seed: 51, NodeFactory: MachineFactory(lanConfig), OnMessage: l.onMessage}, n, true)
	l.s = s
	require.True(t, s.RunUntil(s.converged, time.Minute))
	s.Run(5 * time.Second)
	origin, forger := s.names[3], s.names[7]
	for _, epoch := range []uint64{^uint64(0), ^uint64(0) - 1} {
		forged := &wire.Broadcast{Origin: origin, Epoch: epoch, Seq: 1, Payload: []byte("forged")}
		for _, o := range without(s.names, origin, forger) {
			s.inject(o, forger, forged)
		}
	}
	s.Run(time.Second)
	l.run(t, []string{origin}, 30, 10*time.Second)
	s.Run(5 * time.Second)
	l.check(t)
	require.GreaterOrEqual(t, len(l.sentAt), 300)
	var implausible uint64
	for _, o := range without(s.names, origin, forger) {
		implausible += s.machine(o).Stats().Broadcasts.Implausible
	}
	require.Positive(t, implausible, "the forged epochs are counted")
}
