package swim

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/swim-go/swim/certificate"
)

// Scenario commands that set a scenario up: new (Machines), peer
// (scripted peers) and reset.

// cmdNew: new NAME... [seed=N] [Field=value...] creates Machines with
// mtConfig and the Config fields given. The kth Machine created draws from
// PCG(k, 2) unless seed= says otherwise (the first from PCG(1, 2), as
// newMT does).
func (w *scenWorld) cmdNew(a *scenArgs, _ []string) error {
	names := a.words
	a.words = nil
	if len(names) == 0 {
		return errors.New("new: no names")
	}
	seed, err := a.num("seed", 0)
	if err != nil {
		return err
	}
	for _, name := range names {
		if w.byName[name] != nil {
			return fmt.Errorf("%s exists", name)
		}
		cfg := mtConfig()
		cfg.Name = name
		for k := range a.kv {
			if k == "seed" {
				continue
			}
			v, _ := a.get(k)
			if err := w.setClaimField(cfg, k, v); err != errNotClaimField {
				if err != nil {
					return err
				}
				continue
			}
			if err := setConfigField(cfg, k, v); err != nil {
				return err
			}
		}
		if err := w.giveIdentity(cfg, a); err != nil {
			return err
		}
		if cfg.Label != "" {
			w.label = cfg.Label
		}
		addr, ok := w.addrOf(name)
		switch {
		case name == mtSelf:
			addr = mtSelfAddr
		case !ok:
			addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + len(w.nodes))}), 7946)
		}
		s := seed
		if s == 0 {
			s = uint64(len(w.nodes) + 1)
		}
		m, err := NewMachine(cfg, addr, rand.New(rand.NewPCG(s, 2)), w.now)
		if err != nil {
			return err
		}
		n := &scenNode{name: name, addr: addr, m: m, cfg: cfg}
		w.nodes = append(w.nodes, n)
		w.byName[name] = n
		w.made[name]++
		w.lifeNames[m.LocalMember().Life] = fmt.Sprintf("%s.%d", name, w.made[name])
	}
	return nil
}

// setConfigField sets the Config field named k from its text: a field of
// Config, a dotted path into its groups ("Detection.FinalCheck"), or the
// one field of that name in a group, so that the scripts read the same
// however Config groups its fields.
func setConfigField(cfg *Config, k, v string) error {
	f := namedField(reflect.ValueOf(cfg).Elem(), k)
	if !f.IsValid() {
		return fmt.Errorf("no Config field %s", k)
	}
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetInt(int64(n))
	case f.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetFloat(x)
	case f.Kind() == reflect.String:
		f.SetString(v)
	case f.Type() == reflect.TypeOf([]byte(nil)):
		f.SetBytes([]byte(v))
	default:
		return fmt.Errorf("Config field %s: type %s not supported", k, f.Type())
	}
	return nil
}

// cmdPeer: peer NAME [addr=A] declares a scripted peer (pNNN, seed and
// stranger need no declaration).
func (w *scenWorld) cmdPeer(a *scenArgs, _ []string) error {
	if len(a.words) != 1 {
		return errors.New("peer NAME [addr=A]")
	}
	name := a.words[0]
	a.words = nil
	v, ok := a.get("addr")
	if !ok {
		return errors.New("peer: addr= missing")
	}
	addr, err := netip.ParseAddrPort(v)
	if err != nil {
		return err
	}
	w.peers[name] = addr
	return nil
}

// cmdReset: reset starts a new scenario in the same file.
func (w *scenWorld) cmdReset(*scenArgs, []string) error {
	*w = *newScenWorld(w.t)
	return nil
}

// errNotClaimField says a Config field is not one setClaimField sets.
var errNotClaimField = errors.New("not a field of signed claims")

// setClaimField sets the Config fields of signed claims, which name
// identities: Signatures=off|sign|required, Identity=NAME,
// TrustedRoots=NAME,... and Certificate=ROOT (a certificate ROOT signs
// for the Machine's name and identity, valid for a day from mtStart).
// Certificate is set by giveIdentity, once the identity is known.
func (w *scenWorld) setClaimField(cfg *Config, k, v string) error {
	switch k {
	case "Signatures":
		mode, err := ParseSignatureMode(v)
		cfg.Claims.Signatures = mode
		return err
	case "Identity":
		key, err := w.identity(v)
		cfg.Claims.Identity = key
		return err
	case "TrustedRoots":
		for _, r := range strings.Split(v, ",") {
			if _, err := w.identity(r); err != nil {
				return err
			}
			cfg.Claims.TrustedRoots = append(cfg.Claims.TrustedRoots, w.pubOf(r))
		}
		return nil
	case "Certificate":
		_, err := w.identity(v)
		return err
	}
	return errNotClaimField
}

// giveIdentity gives a Machine that signs and has no Identity= the
// identity of its name (declared, or seeded with the name), declares
// the Machine's identity under its name, and makes its Certificate=.
func (w *scenWorld) giveIdentity(cfg *Config, a *scenArgs) error {
	if cfg.Claims.Identity == nil && (cfg.Claims.Signatures != SignaturesOff || a.kv["Certificate"] != "") {
		key, err := w.keyOf(cfg.Name)
		if err != nil {
			return err
		}
		cfg.Claims.Identity = key
	}
	if cfg.Claims.Identity != nil {
		if _, ok := w.ids[cfg.Name]; !ok {
			w.addIdentity(cfg.Name, cfg.Claims.Identity)
		}
	}
	if root := a.kv["Certificate"]; root != "" {
		rk, _ := w.identity(root)
		cert, err := certificate.New(rk, cfg.Name, cfg.Claims.Identity.Public().(ed25519.PublicKey), mtStart.Add(24*time.Hour))
		if err != nil {
			return err
		}
		cfg.Claims.Certificate = cert
	}
	return nil
}

// keyOf is the key of the identity name, made (seeded with the name) if
// it was not declared.
func (w *scenWorld) keyOf(name string) (ed25519.PrivateKey, error) {
	if k, ok := w.ids[name]; ok {
		return k, nil
	}
	k := scenIdentity(name)
	w.addIdentity(name, k)
	return k, nil
}

// cmdIdentity: identity NAME [seed=N] declares an Ed25519 identity, its
// key seeded with N (default: the name), for scripted peers' signed
// claims (key=NAME sig=ok), certificates (cert=NAME) and Machines
// (Identity=NAME, TrustedRoots=NAME).
func (w *scenWorld) cmdIdentity(a *scenArgs, _ []string) error {
	if len(a.words) != 1 {
		return errors.New("identity NAME [seed=N]")
	}
	name := a.words[0]
	a.words = nil
	w.addIdentity(name, scenIdentity(a.str("seed", name)))
	return nil
}

// cmdFields: fields FIELD... makes messages print these optional fields
// from now on, until reset: life (lives and a ping's target life), ver
// (protocol versions), sig (keys, signatures and certificates), sent (a
// broadcast's send time).
func (w *scenWorld) cmdFields(a *scenArgs, _ []string) error {
	for _, f := range a.words {
		if !slices.Contains([]string{"life", "ver", "sig", "sent"}, f) {
			return fmt.Errorf("fields: %s is not life, ver, sig or sent", f)
		}
		w.fields[f] = true
	}
	a.words = nil
	return nil
}

// cmdRestart: restart NODE [addr=A] replaces NODE's Machine by a new one
// of the same Config, started now (a new life, NAME.k for the kth
// Machine of the name), at A or the same address, knowing nobody: the
// process restarted with its state lost. It draws from PCG(100+k, 2).
func (w *scenWorld) cmdRestart(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	if v, ok := a.get("addr"); ok {
		if n.addr, err = netip.ParseAddrPort(v); err != nil {
			return err
		}
	}
	w.made[n.name]++
	m, err := NewMachine(n.cfg, n.addr, rand.New(rand.NewPCG(uint64(100+w.made[n.name]), 2)), w.now)
	if err != nil {
		return err
	}
	n.m, n.delivered = m, nil
	w.lifeNames[m.LocalMember().Life] = fmt.Sprintf("%s.%d", n.name, w.made[n.name])
	return nil
}
