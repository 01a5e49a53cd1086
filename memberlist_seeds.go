package swim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Seeds: the addresses Join is given, as host:port, an IP alone or a DNS
// name, parsed and looked up here (DefaultPort when none is given), and
// names looked up again while this member is alone (below).

// DefaultPort is the port Join assumes for a seed given without one.
const DefaultPort = 7946

// lookupFunc resolves a host name to its IP addresses, as
// net.Resolver.LookupNetIP(ctx, "ip", host) does.
type lookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// lookupDefault resolves with the system's resolver.
func lookupDefault(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// resolveSeeds turns seed addresses into socket addresses, resolving DNS
// names in parallel with lookup (bounded by ctx). A name stands for every
// address it resolves to. The result has no duplicates and keeps the order
// of addrs; the errors name the address that failed.
func resolveSeeds(ctx context.Context, lookup lookupFunc, addrs []string) ([]netip.AddrPort, []error) {
	resolved := make([][]netip.AddrPort, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { resolved[i], errs[i] = resolveSeedWith(ctx, lookup, addr) })
	}
	wg.Wait()

	var seeds []netip.AddrPort
	var failed []error
	seen := make(map[netip.AddrPort]bool)
	for i := range addrs {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			continue
		}
		for _, ap := range resolved[i] {
			if !seen[ap] {
				seen[ap] = true
				seeds = append(seeds, ap)
			}
		}
	}
	return seeds, failed
}

// resolveSeed resolves one seed address with the system's resolver (see
// resolveSeedWith).
func resolveSeed(ctx context.Context, addr string) ([]netip.AddrPort, error) {
	return resolveSeedWith(ctx, lookupDefault, addr)
}

// resolveSeedWith resolves one seed address: "ip:port", "[ipv6]:port",
// "name:port", or the same without the port (DefaultPort); names with
// lookup.
func resolveSeedWith(ctx context.Context, lookup lookupFunc, addr string) ([]netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return []netip.AddrPort{unmapAddrPort(ap)}, nil
	}
	host, port, err := splitSeed(addr)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), port)}, nil
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("seed %q: %w", addr, err)
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		out = append(out, netip.AddrPortFrom(ip.Unmap(), port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("seed %q: no address", addr)
	}
	return out, nil
}

// isSeedName reports whether addr names its host by a DNS name, which
// may resolve to other addresses later, rather than by an IP address.
// Malformed addresses are not names.
func isSeedName(addr string) bool {
	if _, err := netip.ParseAddrPort(addr); err == nil {
		return false
	}
	host, _, err := splitSeed(addr)
	if err != nil {
		return false
	}
	_, err = netip.ParseAddr(host)
	return err != nil
}

// splitSeed splits a seed address into its host and its port
// (DefaultPort when it has none).
func splitSeed(addr string) (string, uint16, error) {
	host, portStr, err := net.SplitHostPort(addr)
	port := uint64(DefaultPort)
	if err != nil {
		// No port (or an IPv6 literal without brackets): the whole string
		// is the host.
		host = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	} else if port, err = strconv.ParseUint(portStr, 10, 16); err != nil {
		return "", 0, fmt.Errorf("seed %q: bad port %q", addr, portStr)
	}
	if host == "" {
		return "", 0, fmt.Errorf("seed %q: no host", addr)
	}
	return host, uint16(port), nil
}

// Seed names. A seed given by DNS name (a Kubernetes headless Service, a
// round-robin record) may not resolve yet when the member starts: the
// records appear once the pods behind them run, and the first pod of a
// StatefulSet finds none. Or it may resolve to this member alone, when
// every pod starts at once. Join keeps such names and, while this member is
// alone, resolves them again in the background, with a backoff from
// ProbeInterval doubling up to ReconnectInterval, until ReconnectTimeout
// after the Join (the time its seeds are retried for). Addresses not seen
// before become seeds, and this member joins through them; failed lookups
// are counted (MemberlistStats.SeedLookupsFailed) and logged at most once
// per 10 s. With ReconnectInterval 0 nothing is retried.

// seedNames is what the background resolver works from. Guarded by
// Memberlist.seedMu.
type seedNames struct {
	names   []string  // the seed addresses of the last Join that are DNS names
	until   time.Time // when they are forgotten
	running bool      // the resolver goroutine runs
}

// rememberSeedNames keeps the names among addrs for the background
// resolver, replacing those of an earlier Join, and starts it if it does
// not run. failed says how many of them did not resolve in Join itself.
func (ml *Memberlist) rememberSeedNames(addrs []string, failed int) {
	ml.seedLookupsFailed.Add(uint64(failed))
	if ml.cfg.ReconnectInterval <= 0 {
		return
	}
	var names []string
	for _, a := range addrs {
		if isSeedName(a) {
			names = append(names, a)
		}
	}
	if len(names) == 0 {
		return
	}
	ml.seedMu.Lock()
	defer ml.seedMu.Unlock()
	ml.seedNames.names = names
	ml.seedNames.until = time.Now().Add(ml.cfg.ReconnectTimeout)
	if ml.seedNames.running {
		return
	}
	// Shutdown waits for ml.wg once it has set closed under ml.mu, so a
	// goroutine added under the read lock while not closed is waited for.
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	if ml.closed {
		return
	}
	ml.seedNames.running = true
	ml.wg.Go(ml.resolveSeedNames)
}

// resolveSeedNames is the background resolver: see Seed names above.
func (ml *Memberlist) resolveSeedNames() {
	first := ml.cfg.ProbeInterval
	delay := first
	timer := time.NewTimer(jittered(delay))
	defer timer.Stop()
	for {
		select {
		case <-ml.stop:
			ml.stopResolving()
			return
		case <-timer.C:
		}
		ml.seedMu.Lock()
		names, until := ml.seedNames.names, ml.seedNames.until
		if !time.Now().Before(until) {
			ml.seedNames = seedNames{}
			ml.seedMu.Unlock()
			return
		}
		ml.seedMu.Unlock()

		if !ml.alone() {
			// Nothing to do while the member has company; ask again
			// promptly once it is alone again (its peers all gone, as in
			// a cluster restarted with new addresses).
			delay = first
			timer.Reset(jittered(ml.cfg.ReconnectInterval))
			continue
		}
		ctx, cancel := context.WithTimeout(ml.ctx, ml.cfg.StreamTimeout)
		addrs, errs := resolveSeeds(ctx, ml.lookup(), names)
		cancel()
		if ml.isShutdown() {
			ml.stopResolving()
			return
		}
		delay = min(delay*2, ml.cfg.ReconnectInterval)
		if len(errs) > 0 {
			ml.seedLookupsFailed.Add(uint64(len(errs)))
			ml.refusals.WarnEvery("seed lookup", "seed name did not resolve; retrying while alone",
				zap.Errors("errors", errs), zap.Duration("next_in", delay))
		}
		if len(addrs) > 0 {
			var started int
			if err := ml.input(func(now time.Time) { started = ml.machine.AddSeeds(now, addrs, until) }); err != nil {
				ml.stopResolving()
				return
			}
			if started > 0 {
				ml.logger.Info("seed name resolved to new addresses; joining through them",
					zap.Strings("names", names), zap.Int("joins", started))
			}
		}
		timer.Reset(jittered(delay))
	}
}

// stopResolving notes that the resolver goroutine ended early (Shutdown).
func (ml *Memberlist) stopResolving() {
	ml.seedMu.Lock()
	ml.seedNames.running = false
	ml.seedMu.Unlock()
}

// alone reports whether this member is alive and knows no other live one.
func (ml *Memberlist) alone() bool {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return !ml.closed && ml.machine.LocalMember().State == StateAlive && ml.machine.NumMembers() == 1
}

// lookup is the resolver of seed names.
func (ml *Memberlist) lookup() lookupFunc {
	if ml.seedLookup != nil {
		return ml.seedLookup
	}
	return lookupDefault
}

// jittered spreads d over [0.75d, 1.25d), so that members started together
// do not ask the DNS server in step.
func jittered(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}
