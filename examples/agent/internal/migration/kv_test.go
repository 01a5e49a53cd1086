package migration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeFunc is an io.Writer.
type writeFunc func(p []byte) (int, error)

func (f writeFunc) Write(p []byte) (int, error) { return f(p) }

// TestKVPrintsUnderItsLock: a key's value is set once per run (its
// repeats change nothing and print nothing), so the last kv line must be
// the whole map, and it is what the process test reads as the map. The
// broadcast handler, the state merge and the process's own value set keys
// on goroutines of their own; a line printed after the map's lock is let
// go can leave after a later, larger map's line, and stay the last for
// good. Each line must be printed while the map it shows is held.
func TestKVPrintsUnderItsLock(t *testing.T) {
	store := &kv{m: map[string]entry{}, name: "self"}
	var writes, unlocked int
	store.out = &out{enc: json.NewEncoder(writeFunc(func(p []byte) (int, error) {
		writes++
		if store.mu.TryLock() {
			unlocked++
			store.mu.Unlock()
		}
		return len(p), nil
	}))}
	store.set("a", entry{V: "1", Ver: 1})
	store.set("b", entry{V: "1", Ver: 1})
	require.NoError(t, store.MergeRemoteState([]byte(`{"c":{"v":"1","ver":1}}`), false))
	require.Equal(t, 3, writes)
	require.Zero(t, unlocked, "kv lines printed with the map's lock let go")
}
