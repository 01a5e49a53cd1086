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
	nt, err := swim.NewNetTransport(&swim.NetTransportConfig{BindAddr: "127.0.0.1"})
	require.NoError(t, err)
	cfg := swim.DefaultLocalConfig()
	cfg.Name = name
	cfg.PushPullInterval = time.Second
	cfg.Transport = &lossy{NetTransport: nt, rng: rand.New(rand.NewPCG(seed, 1)), loss: 0.10}
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
		require.NoError(t, w.store.Put(key, value))
		want[key] = value
		if i%50 == 0 {
			// Some keys are written twice: the later write wins everywhere.
			again := fmt.Sprintf("key-%04d", rng.IntN(i+1))
			require.NoError(t, w.store.Put(again, value+"-again"))
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

func TestEntryOrder(t *testing.T) {
	a := entry{Version: 2, Writer: "a"}
	require.True(t, a.newerThan(entry{Version: 1, Writer: "z"}))
	require.True(t, entry{Version: 2, Writer: "b"}.newerThan(a), "a tie goes to the greater writer")
	require.False(t, a.newerThan(a))
}
