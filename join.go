package swim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
)

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
