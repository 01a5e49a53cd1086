package sim

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// harness is a Cluster of fake nodes with access to every incarnation of
// each fake.
type harness struct {
	*Cluster
	t       *testing.T
	period  time.Duration            // default ping period of new fakes
	periods map[string]time.Duration // per-name override
	jitter  bool
	fakes   map[string][]*fake // every incarnation, oldest first
	trace   []string           // what every fake saw, in order
}

func newHarness(t *testing.T, opts Options) *harness {
	h := &harness{t: t, periods: make(map[string]time.Duration), fakes: make(map[string][]*fake)}
	opts.NodeFactory = func(name string, addr netip.AddrPort, rng *rand.Rand, now time.Time) (Node, error) {
		period := h.period
		if p, ok := h.periods[name]; ok {
			period = p
		}
		f := &fake{
			name: name, addr: addr, rng: rng, born: now,
			period: period, jitter: h.jitter, next: now.Add(period),
			heard: make(map[netip.AddrPort]bool), trace: &h.trace,
		}
		h.fakes[name] = append(h.fakes[name], f)
		return f, nil
	}
	h.Cluster = New(opts)
	h.LogSeedOnFailure(t)
	return h
}

func (h *harness) add(names ...string) {
	h.t.Helper()
	for _, name := range names {
		_, err := h.AddNode(name)
		require.NoError(h.t, err, h)
	}
}

// fake returns the current incarnation of name.
func (h *harness) fake(name string) *fake {
	all := h.fakes[name]
	return all[len(all)-1]
}

// do runs fn on the current fake called name through Cluster.Do.
func (h *harness) do(name string, fn func(f *fake, now time.Time)) {
	h.t.Helper()
	require.NoError(h.t, h.Do(name, func(n Node, now time.Time) { fn(n.(*fake), now) }), h)
}

// target makes from ping the named nodes every period.
func (h *harness) target(from string, to ...string) {
	h.t.Helper()
	addrs := make([]netip.AddrPort, len(to))
	for i, name := range to {
		addrs[i] = h.Addr(name)
	}
	h.do(from, func(f *fake, _ time.Time) { f.targets = addrs })
}

// send makes from ping to count times now.
func (h *harness) send(from, to string, count int) {
	h.t.Helper()
	addr := h.Addr(to)
	h.do(from, func(f *fake, now time.Time) {
		for range count {
			f.ping(now, addr)
		}
	})
}

// at is the virtual time d after Epoch.
func at(d time.Duration) time.Time { return Epoch.Add(d) }
