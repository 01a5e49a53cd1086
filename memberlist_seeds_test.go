package swim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeDNS answers seed lookups from a table the test changes while the
// members run, and counts the lookups.
type fakeDNS struct {
	mu      sync.Mutex
	records map[string][]netip.Addr
	lookups int
}

func (d *fakeDNS) set(host string, addrs ...netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.records == nil {
		d.records = map[string][]netip.Addr{}
	}
	d.records[host] = addrs
}

func (d *fakeDNS) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lookups
}

func (d *fakeDNS) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	if addrs, ok := d.records[host]; ok && len(addrs) > 0 {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var loopback = netip.MustParseAddr("127.0.0.1")

// TestSeedNameResolvedLater: a seed name that does not resolve when Join
// is called (a headless Service before its pods run) is looked up again in
// the background, and the member joins through it once it resolves; the
// failed lookups are counted.
func TestSeedNameResolvedLater(t *testing.T) {
	dns := &fakeDNS{}
	b := startMember(t, testConfig("b"))
	cfg := testConfig("a")
	a := startMember(t, cfg)
	a.seedLookup = dns.lookup // before Join, which starts the lookups

	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	seed := fmt.Sprintf("swim.test:%d", b.LocalMember().Addr.Port())
	_, err := a.Join(ctx, seed)
	require.Error(t, err, "nothing resolved: Join reports it")
	require.Equal(t, uint64(1), a.Stats().SeedLookupsFailed)

	// A few more failures, then the record appears.
	require.Eventually(t, func() bool { return dns.count() >= 3 }, formTimeout, pollEvery, "the name is not looked up again")
	require.Equal(t, 1, a.NumMembers())
	dns.set("swim.test", loopback)
	require.Eventually(t, func() bool { return a.NumMembers() == 2 && b.NumMembers() == 2 }, formTimeout, pollEvery,
		"the member did not join through the name once it resolved")
	require.GreaterOrEqual(t, a.Stats().SeedLookupsFailed, uint64(3))
}

// TestSeedNameResolvedToSelfFirst: pods started together behind one name
// may each find only themselves there at first (one port, one address
// each: here 127.0.0.1 and 127.0.0.2, both on the loopback interface). The
// member keeps looking while alone and joins once the name also resolves
// to the other.
func TestSeedNameResolvedToSelfFirst(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs 127.0.0.2 on the loopback interface, as Linux has")
	}
	dns := &fakeDNS{}
	cfg := testConfig("a")
	a := startMember(t, cfg)
	a.seedLookup = dns.lookup // before Join, which starts the lookups
	port := a.LocalMember().Addr.Port()
	other := netip.MustParseAddr("127.0.0.2")
	bcfg := testConfig("b")
	bcfg.BindAddr, bcfg.BindPort = other.String(), int(port)
	b := startMember(t, bcfg)
	dns.set("swim.test", loopback)

	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := a.Join(ctx, fmt.Sprintf("swim.test:%d", port))
	require.Error(t, err, "the name resolved to this member alone")
	require.Eventually(t, func() bool { return dns.count() >= 3 }, formTimeout, pollEvery, "the name is not looked up again")
	require.Equal(t, 1, a.NumMembers())
	dns.set("swim.test", loopback, other)
	require.Eventually(t, func() bool { return a.NumMembers() == 2 && b.NumMembers() == 2 }, formTimeout, pollEvery,
		"the member did not join once the name resolved to another")
	require.Zero(t, a.Stats().SeedLookupsFailed, "lookups that found only this member did not fail")
}

// TestSeedNameRetriesBounded: lookups that keep failing stop
// ReconnectTimeout after the Join, backing off meanwhile; a member with
// company does not look its names up.
func TestSeedNameRetriesBounded(t *testing.T) {
	dns := &fakeDNS{}
	cfg := testConfig("a")
	cfg.ReconnectTimeout = 1500 * time.Millisecond
	a := startMember(t, cfg)
	a.seedLookup = dns.lookup // before Join, which starts the lookups
	_, err := a.Join(context.Background(), "swim.test")
	require.Error(t, err)
	running := func() bool {
		a.seedMu.Lock()
		defer a.seedMu.Unlock()
		return a.seedNames.running
	}
	require.True(t, running())
	require.Eventually(t, func() bool { return !running() }, formTimeout, pollEvery, "the lookups did not stop")
	// From 200ms (ProbeInterval) doubling, at most 25% early each time:
	// 150, 300, 600 and 1200ms ahead of the next, so at most four
	// retries fit in 1.5s, and the Join's own lookup makes five.
	n := dns.count()
	require.GreaterOrEqual(t, n, 3, "too few retries")
	require.LessOrEqual(t, n, 5, "the retries do not back off")
	require.Equal(t, uint64(n), a.Stats().SeedLookupsFailed, "every failed lookup is counted")
}
