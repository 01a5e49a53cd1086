package plumtree

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The tree's bookkeeping past its bounds is counted: a link's per-origin
// trees cleared when an origin past the bound comes (an origin invented by
// a forger costs an entry, not a lasting one).
func TestTreeBoundsCounted(t *testing.T) {
	var forgot uint64
	b := ownBound{limit: 2, forgot: &forgot}
	p := &peer{}
	p.setOwn("a", false, b)
	p.setOwn("b", false, b)
	p.setOwn("a", true, b)
	require.Zero(t, forgot, "an origin already held costs no room")
	p.setOwn("c", false, b)
	require.Equal(t, uint64(1), forgot)
	require.Equal(t, map[string]bool{"c": false}, p.own, "the others follow the shared tree again")
	require.True(t, p.eagerFor("a"))
}

// The windows of delivered broadcasts: in order, out of order, too old, a
// restarted origin (a later epoch), and a forged far-later epoch, which
// does not silence the origin's real broadcasts.
func TestSeenWindows(t *testing.T) {
	var ws seenWindows
	require.True(t, ws.mark(100, 1))
	require.False(t, ws.mark(100, 1))
	require.True(t, ws.mark(100, 3))
	require.True(t, ws.mark(100, 2), "out of order")
	require.False(t, ws.mark(100, 2))
	require.True(t, ws.mark(100, 300))
	require.True(t, ws.mark(100, 250), "within the span behind the top")
	require.False(t, ws.mark(100, 3), "beyond the span: taken as seen")
	for seq := uint32(301); seq < 301+200; seq += 7 {
		require.True(t, ws.mark(100, seq))
	}
	for seq := uint32(301); seq < 301+200; seq += 7 {
		require.False(t, ws.mark(100, seq), "seq %d, across word boundaries", seq)
	}
	require.True(t, ws.mark(100, 302))

	require.True(t, ws.mark(1<<62, 1), "a forged far-later epoch")
	require.True(t, ws.mark(100, 600), "the real epoch keeps its window")
	require.False(t, ws.mark(100, 302))
	require.True(t, ws.mark(200, 1), "the origin restarted")
	require.False(t, ws.mark(100, 601), "older than both windows")
	require.False(t, ws.mark(200, 1))
	require.False(t, ws.mark(50, 1))
}

// Pinned to the origin's first epoch, the windows keep it whatever later
// epochs claim: two forged far-later epochs took both unpinned windows,
// and every real broadcast after them was taken as seen.
func TestSeenWindowsPinned(t *testing.T) {
	var unpinned seenWindows
	require.True(t, unpinned.mark(100, 1))
	require.True(t, unpinned.mark(^uint64(0), 1))
	require.True(t, unpinned.mark(^uint64(0)-1, 1))
	require.False(t, unpinned.mark(100, 2), "unpinned, two forged epochs silence the real one")

	var ws seenWindows
	require.True(t, ws.mark(100, 1))
	ws.pin(100)
	require.False(t, ws.mark(100, 1), "pinning keeps what the window held")
	require.True(t, ws.mark(^uint64(0), 1))
	require.False(t, ws.mark(^uint64(0)-1, 5), "older than the latest other epoch")
	require.True(t, ws.mark(100, 2), "the first epoch keeps its window")
	require.False(t, ws.mark(100, 2))

	// Pinned before anything was seen, and after the pinned epoch moved
	// to the later slot.
	var fresh seenWindows
	fresh.pin(7)
	require.True(t, fresh.mark(7, 1))
	require.True(t, fresh.mark(9, 1))
	require.True(t, fresh.mark(7, 2))
	var moved seenWindows
	require.True(t, moved.mark(5, 1))
	require.True(t, moved.mark(7, 1))
	moved.pin(7)
	require.False(t, moved.mark(7, 1))
	require.True(t, moved.mark(8, 1))
	require.True(t, moved.mark(7, 2))
}

// One neighbor (or a forger in its name) announcing ids nobody sent filled
// every entry of the missing broadcasts, so that a broadcast another
// neighbor announced, really missing, was refused and never grafted. One
// neighbor's announcements hold at most MaxMissingPerPeer entries; the
// rest are refused and counted, and another neighbor's are tracked.
func TestAnnouncementFloodBounded(t *testing.T) {
	w := &world{}
	require.NoError(t, w.init(parseArgs([]string{"n=4"})))
	flood := make([]uint64, 0, 3*MaxMissing)
	for i := range 3 * MaxMissing {
		flood = append(flood, uint64(i)+1<<40)
	}
	w.tree.IHave(w.now, From{ID: 1, OK: true}, flood)
	require.Equal(t, MaxMissingPerPeer, len(w.tree.missing))
	require.Equal(t, uint64(3*MaxMissing-MaxMissingPerPeer), w.tree.Stats().Refused)

	real := ID("p3", 1, 1)
	w.tree.IHave(w.now, From{ID: 2, OK: true}, []uint64{real})
	require.Contains(t, w.tree.missing, real, "another neighbor's announcement is tracked")

	// Entries abandoned give the neighbor its room back.
	for id, mb := range w.tree.missing {
		if mb.first == 1 {
			mb.tries = GraftTries
			w.tree.GraftDue(w.now, id)
		}
	}
	require.Zero(t, w.tree.missingBy[1])
	w.tree.IHave(w.now, From{ID: 1, OK: true}, flood[:10])
	require.Equal(t, 10, w.tree.missingBy[1])
}
