package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/swim-go/swim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lossy drops a share of the packets its NetTransport sends (streams are
// TCP: they retransmit), at random.
type lossy struct {
	*swim.NetTransport
	mu   sync.Mutex
	rng  *rand.Rand
	loss float64
}

func (l *lossy) WriteTo(b []byte, to netip.AddrPort) error {
	l.mu.Lock()
	drop := l.rng.Float64() < l.loss
	l.mu.Unlock()
	if drop {
		return nil
	}
	return l.NetTransport.WriteTo(b, to)
}

type kvMember struct {
	name  string
	store *Store
	ml    *swim.Memberlist
}

func startKV(t *testing.T, name string, seed uint64, join string) *kvMember {
	t.Helper()
	return startKVWith(t, name, seed, join, nil)
}

// startKVWith starts a member as startKV does, with its config (and its
// transport's loss) changed by tune first.
func startKVWith(t *testing.T, name string, seed uint64, join string, tune func(*swim.Config, *lossy)) *kvMember {
	t.Helper()
	nt, err := swim.NewNetTransport(&swim.NetTransportConfig{BindAddr: "127.0.0.1"})
	require.NoError(t, err)
	cfg := swim.DefaultLocalConfig()
	cfg.Name = name
	cfg.PushPullInterval = time.Second
	tr := &lossy{NetTransport: nt, rng: rand.New(rand.NewPCG(seed, 1)), loss: 0.10}
	cfg.Transport = tr
	if tune != nil {
		tune(cfg, tr)
	}
	store := NewStore(name)
	cfg.Messages, cfg.State = store, store
	ml, err := swim.New(cfg)
	require.NoError(t, err)
	store.Attach(ml)
	if join != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := ml.Join(ctx, join)
		require.NoError(t, err)
	}
	return &kvMember{name: name, store: store, ml: ml}
}

// Five members, 1,000 keys written at random members under 10% packet
// loss, some twice, one member stopped during the writes and started
// again (empty, under the same name) after them: every member ends with
// the map the writes made, the returned one included.
func TestStoreConvergesUnderLossAndCatchesUp(t *testing.T) {
	members := []*kvMember{startKV(t, "kv-0", 1, "")}
	seed := members[0].ml.LocalMember().Addr.String()
	for i := 1; i < 5; i++ {
		members = append(members, startKV(t, fmt.Sprintf("kv-%d", i), uint64(i+1), seed))
	}
	defer func() {
		for _, m := range members {
			_ = m.ml.Shutdown()
		}
	}()
	require.Eventually(t, func() bool {
		for _, m := range members {
			if m.ml.NumMembers() != 5 {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "the cluster did not form")

	rng := rand.New(rand.NewPCG(42, 42))
	want := make(map[string]string)
	const keys = 1000
	for i := range keys {
		if i == 300 {
			require.NoError(t, members[4].ml.Shutdown()) // away for the rest of the writes
		}
		// kv-4 writes nothing: what a member writes just before it
		// stops is lost with it if it had no time to send it, as with
		// any store that acknowledges a write before replicating it.
		w := members[rng.IntN(4)]
		key, value := fmt.Sprintf("key-%04d", i), fmt.Sprintf("%s-%d", w.name, i)
		require.NoError(t, w.store.Put(context.Background(), key, value))
		want[key] = value
		if i%50 == 0 {
			// Some keys are written twice: the later write wins everywhere.
			again := fmt.Sprintf("key-%04d", rng.IntN(i+1))
			require.NoError(t, w.store.Put(context.Background(), again, value+"-again"))
			want[again] = value + "-again"
		}
	}
	members[4] = startKV(t, "kv-4", 99, seed)

	converged := func() bool {
		for _, m := range members {
			if !maps.Equal(m.store.Snapshot(), want) {
				return false
			}
		}
		return true
	}
	if !assert.Eventually(t, converged, 60*time.Second, 50*time.Millisecond) {
		for _, m := range members {
			snap := m.store.Snapshot()
			diff := 0
			for k, v := range want {
				if snap[k] != v {
					diff++
				}
			}
			st := m.ml.Stats()
			t.Logf("%s: %d keys, %d differ from the writes; push-pulls %d (%d failed), states too large %d, refused %d, merge errors %d",
				m.name, len(snap), diff, st.PushPulls, st.PushPullsFailed, st.StatesTooLarge, st.StatesRefused, st.StateMergeErrors)
		}
		t.Fatal("the members' maps did not converge")
	}
}

// Eight members each writing 50 keys a second for 4 s, 400 writes a
// second for the cluster: about twenty times what gossip carries to every
// member at this size (with the local defaults each member sends a
// broadcast on about RetransmitMult·log N of its 30 gossip packets a
// second, a few broadcasts each: some 15 to 20 broadcasts a second for the
// cluster; docs/figures.md measures it). The anti-entropy push-pull is
// off, so every write reaches every member by broadcast or not at all;
// every member must end with every write, each delivered once.
func TestStoreCarriesWhatGossipCannot(t *testing.T) {
	const n, perMember, rate = 8, 200, 50 // writes a second per member
	noPushPull := func(c *swim.Config, tr *lossy) {
		c.PushPullInterval = 0
		tr.loss = 0
	}
	members := []*kvMember{startKVWith(t, "kv-0", 1, "", noPushPull)}
	defer func() {
		for _, m := range members {
			_ = m.ml.Shutdown()
		}
	}()
	seed := members[0].ml.LocalMember().Addr.String()
	for i := 1; i < n; i++ {
		members = append(members, startKVWith(t, fmt.Sprintf("kv-%d", i), uint64(i+1), seed, noPushPull))
	}
	require.Eventually(t, func() bool {
		for _, m := range members {
			if m.ml.NumMembers() != n {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "the cluster did not form")

	want := make(map[string]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	for _, m := range members {
		wg.Go(func() {
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			for i := range perMember {
				<-tick.C
				key, value := fmt.Sprintf("%s/%03d", m.name, i), fmt.Sprint(i)
				if err := m.store.Put(ctx, key, value); err != nil {
					t.Errorf("%s: %v", m.name, err)
					return
				}
				mu.Lock()
				want[key] = value
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wrote := time.Since(start)
	require.Len(t, want, n*perMember)
	converged := func() bool {
		for _, m := range members {
			if len(m.store.Snapshot()) != len(want) {
				return false
			}
		}
		return true
	}
	require.Eventually(t, converged, 30*time.Second, 20*time.Millisecond, "some writes never reached some member")
	t.Logf("%d writes in %v (%.0f a second), every member has all %v after the last",
		len(want), wrote.Round(time.Millisecond), float64(len(want))/wrote.Seconds(), time.Since(start)-wrote)
	for _, m := range members {
		require.Equal(t, want, m.store.Snapshot(), m.name)
		st := m.ml.Stats()
		require.Equal(t, uint64((n-1)*perMember), st.Broadcasts.Delivered, "%s: every other member's write, delivered once", m.name)
	}
}

func TestEntryOrder(t *testing.T) {
	a := entry{Version: 2, Writer: "a"}
	require.True(t, a.newerThan(entry{Version: 1, Writer: "z"}))
	require.True(t, entry{Version: 2, Writer: "b"}.newerThan(a), "a tie goes to the greater writer")
	require.False(t, a.newerThan(a))
}
