package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"hash"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

var rewriteDigests = flag.Bool("rewrite-digests", false, "rewrite testdata/digests.txt from this run")

// recordingNode wraps a Machine and folds every byte it emits (packets,
// stream requests and replies, events) into a shared hash, so that a run's
// digest changes when anything a Machine sends changes, not only when the
// timing or size of a packet does.
type recordingNode struct {
	*swim.Machine
	h hash.Hash
}

func (r *recordingNode) HandleStream(now time.Time, from netip.AddrPort, req []byte) ([]byte, error) {
	resp, err := r.Machine.HandleStream(now, from, req)
	r.h.Write(resp)
	return resp, err
}

func (r *recordingNode) Ready() swim.Ready {
	rd := r.Machine.Ready()
	var n [8]byte
	for _, p := range rd.Packets {
		r.h.Write([]byte(p.To.String()))
		binary.BigEndian.PutUint64(n[:], uint64(len(p.Data)))
		r.h.Write(n[:])
		r.h.Write(p.Data)
	}
	for _, s := range rd.Streams {
		fmt.Fprintf(r.h, "stream %d %s %s ", s.ID, s.To, s.Timeout)
		r.h.Write(s.Data)
	}
	for _, e := range rd.Events {
		fmt.Fprintf(r.h, "event %v %s %s %d ", e.Kind, e.Member.Name, e.Member.State, e.Member.Incarnation)
	}
	for _, m := range rd.Messages {
		fmt.Fprintf(r.h, "message %s %x ", m.From, m.Payload)
	}
	return rd
}

// goldenRun is one seeded simulator run whose digest is kept in
// testdata/digests.txt.
type goldenRun struct {
	name   string
	n      int
	config func() *swim.Config
	script func(t *testing.T, c *Cluster, names []string)
}

func goldenRuns() []goldenRun {
	crashOne := func(t *testing.T, c *Cluster, names []string) {
		c.Run(20 * time.Second)
		require.NoError(t, c.Crash(names[len(names)/2]))
		c.Run(30 * time.Second)
	}
	return []goldenRun{
		{name: "lan-crash", n: 24, config: swim.DefaultLANConfig, script: crashOne},
		{name: "randomized-crash", n: 24, config: func() *swim.Config {
			cfg := swim.DefaultLANConfig()
			cfg.AlignedProbing, cfg.PairedProbing = false, false
			return cfg
		}, script: crashOne},
		{name: "faults", n: 20, config: swim.DefaultLANConfig, script: func(t *testing.T, c *Cluster, names []string) {
			c.Run(15 * time.Second)
			c.SetLoss(0.2)
			require.NoError(t, c.Pause(names[3], 3*time.Second))
			require.NoError(t, c.Starve(names[5], 20*time.Millisecond, 500*time.Millisecond, 10*time.Second))
			require.NoError(t, c.BlockOneWay(names[7], names[8]))
			c.Run(15 * time.Second)
			require.NoError(t, c.Partition(names[:10], names[10:]))
			c.Run(10 * time.Second)
			c.Heal()
			c.SetLoss(0.01)
			require.NoError(t, c.Restart(names[3]))
			require.NoError(t, c.Do(names[9], func(n Node, now time.Time) {
				require.NoError(t, n.(*recordingNode).Leave(now))
			}))
			c.Run(40 * time.Second)
		}},
		{name: "messaging", n: 16, config: swim.DefaultLANConfig, script: func(t *testing.T, c *Cluster, names []string) {
			c.Run(10 * time.Second)
			for i := range 20 {
				require.NoError(t, c.Do(names[i%len(names)], func(n Node, now time.Time) {
					m := n.(*recordingNode).Machine
					_, err := m.Broadcast(now, fmt.Sprintf("k%d", i%5), []byte(strings.Repeat("x", 50+i)))
					require.NoError(t, err)
					require.NoError(t, m.SendBestEffort(now, names[(i+1)%len(names)], []byte("hello")))
					_, err = m.SendReliable(now, names[(i+2)%len(names)], []byte("reliable"), 5*time.Second)
					require.NoError(t, err)
					require.NoError(t, m.UpdateMeta(now, []byte(fmt.Sprintf("meta-%d", i))))
				}))
				c.Run(500 * time.Millisecond)
			}
			c.Run(10 * time.Second)
		}},
	}
}

func (g goldenRun) digest(t *testing.T, seed uint64) string {
	h := sha256.New()
	reg := swim.NewRegistry()
	c := New(Options{
		Seed: seed,
		Loss: 0.01,
		NodeFactory: func(name string, addr netip.AddrPort, rng *rand.Rand, now time.Time) (Node, error) {
			cfg := g.config()
			cfg.Name = name
			m, err := reg.NewMachine(cfg, addr, rng, now)
			if err != nil {
				return nil, err
			}
			return &recordingNode{Machine: m, h: h}, nil
		},
	})
	c.LogSeedOnFailure(t)
	nodes, err := c.AddNodes("m", g.n)
	require.NoError(t, err)
	names := make([]string, len(nodes))
	for i, sn := range nodes {
		names[i] = sn.Name()
	}
	seeds := []netip.AddrPort{nodes[0].Addr()}
	for _, sn := range nodes[1:] {
		require.NoError(t, c.Do(sn.Name(), func(n Node, now time.Time) { n.(*recordingNode).Join(now, seeds) }))
	}
	g.script(t, c, names)
	for _, r := range c.Log() {
		fmt.Fprintln(h, r.String())
	}
	t.Logf("%s seed=%d: %+v, %d events logged", g.name, seed, c.Counters(), len(c.Log()))
	fmt.Fprintf(h, "%+v %d", c.Counters(), c.Digest())
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestDigestsUnchanged runs a few seeded clusters (aligned and paired
// probing, randomized probing, loss, pauses, starvation, one-way links, a
// partition, a restart, a leave, the applications' messages) and compares
// a hash of every byte the Machines sent and every event they reported
// with testdata/digests.txt. A change of the protocol's behaviour changes
// a digest; a refactoring must not. After a deliberate change, rewrite the
// file with -rewrite-digests and say why in the commit.
func TestDigestsUnchanged(t *testing.T) {
	path := filepath.Join("testdata", "digests.txt")
	var got strings.Builder
	for _, g := range goldenRuns() {
		for _, seed := range []uint64{1, 2} {
			fmt.Fprintf(&got, "%s seed=%d %s\n", g.name, seed, g.digest(t, seed))
		}
	}
	if *rewriteDigests {
		require.NoError(t, os.WriteFile(path, []byte(got.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got.String(), "the simulator's runs changed; if deliberately, rerun with -rewrite-digests")
}
