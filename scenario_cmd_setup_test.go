package swim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strconv"
	"time"
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
			if err := setConfigField(cfg, k, v); err != nil {
				return err
			}
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
		n := &scenNode{name: name, addr: addr, m: m}
		w.nodes = append(w.nodes, n)
		w.byName[name] = n
	}
	return nil
}

// setConfigField sets the Config field named k from its text.
func setConfigField(cfg *Config, k, v string) error {
	f := reflect.ValueOf(cfg).Elem().FieldByName(k)
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
