package swim

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// TestRegistryNameHashCollision: two names under one hash are both found,
// and freeing either leaves the other. A real collision of the seeded
// 64-bit hash cannot be produced, so the second name's slot is taken by
// hand first.
func TestRegistryNameHashCollision(t *testing.T) {
	r := NewRegistry()
	a := r.acquireName("a")
	r.byHash[maphash.String(r.seed, "b")] = a // "b" now collides with "a"
	b := r.acquireName("b")
	require.NotEqual(t, a, b)
	require.Contains(t, r.collided, "b")
	for _, name := range []string{"a", "b"} {
		id, ok := r.lookup(name)
		require.True(t, ok, name)
		require.Equal(t, name, r.name(id))
		id2, ok := r.lookupBytes([]byte(name))
		require.True(t, ok, name)
		require.Equal(t, id, id2)
	}
	require.Equal(t, b, r.acquireName("b"), "a second holder of the colliding name")
	r.releaseName(b)
	r.releaseName(b)
	_, ok := r.lookup("b")
	require.False(t, ok)
	require.Empty(t, r.collided)
	id, ok := r.lookup("a")
	require.True(t, ok)
	require.Equal(t, a, id)
	require.Equal(t, 1, r.Names())
}

// TestRegistryZonedAddresses: an IPv6 address with a zone, which the
// pointer-free address form cannot hold, keeps its zone, and is told apart
// from the same address without one.
func TestRegistryZonedAddresses(t *testing.T) {
	r := NewRegistry()
	zoned := netip.MustParseAddrPort("[fe80::1%eth0]:7946")
	bare := netip.MustParseAddrPort("[fe80::1]:7946")
	v4 := netip.MustParseAddrPort("10.0.0.1:7946")
	mapped := netip.MustParseAddrPort("[::ffff:10.0.0.1]:7946")
	ids := map[netip.AddrPort]uint32{}
	vers := map[netip.AddrPort]uint32{}
	for i, a := range []netip.AddrPort{zoned, bare, v4, mapped, {}} {
		id := r.acquireName(fmt.Sprintf("m%d", i))
		ids[a], vers[a] = id, r.acquireVersion(id, a, nil, wire.Versions{}, 0)
	}
	for a, v := range vers {
		require.Equal(t, a, r.addr(v), "round trip of %v", a)
		require.True(t, r.sameAddr(v, a))
		got, ok := r.idAt(a)
		require.True(t, ok, "%v", a)
		require.Equal(t, ids[a], got, "%v", a)
	}
	require.False(t, r.sameAddr(vers[zoned], bare))
	require.False(t, r.sameAddr(vers[v4], mapped))
	r.releaseVersion(vers[zoned])
	_, ok := r.idAt(zoned)
	require.False(t, ok)
	require.Empty(t, r.verZone)
	got, ok := r.idAt(bare)
	require.True(t, ok)
	require.Equal(t, ids[bare], got)
}

// TestRegistryArenasCompact: under churn the arenas stay within a few times
// what is live, and a name or metadata handed out before a compaction still
// reads the same after it.
func TestRegistryArenasCompact(t *testing.T) {
	r := NewRegistry()
	addr := netip.MustParseAddrPort("10.0.0.1:7946")
	meta := make([]byte, 100)
	keepID := r.acquireName("kept")
	keepV := r.acquireVersion(keepID, addr, []byte("kept-meta"), wire.Versions{}, 0)
	name, m := r.name(keepID), r.meta(keepV)
	for i := range 20000 {
		id := r.acquireName(fmt.Sprintf("churn-%08d", i))
		meta[0] = byte(i)
		v := r.acquireVersion(id, addr, meta, wire.Versions{}, 0)
		r.releaseVersion(v)
		r.releaseName(id)
	}
	require.Less(t, len(r.names.buf), 3*(64<<10), "names arena")
	require.Less(t, len(r.metas.buf), 3*(64<<10), "metadata arena")
	require.Equal(t, "kept", name)
	require.Equal(t, "kept", r.name(keepID))
	require.Equal(t, []byte("kept-meta"), m)
	require.Equal(t, []byte("kept-meta"), r.meta(keepV))
	id, ok := r.lookup("kept")
	require.True(t, ok)
	require.Equal(t, keepID, id)
	require.Equal(t, 1, r.Names())
}

// TestRegistryTakesTheWireMaximums: the longest name and metadata a packet
// may carry fit the arenas' spans (the panic in arena.add stays out of a
// remote peer's reach).
func TestRegistryTakesTheWireMaximums(t *testing.T) {
	r := NewRegistry()
	name := string(bytes.Repeat([]byte{'n'}, wire.MaxNameLen))
	meta := bytes.Repeat([]byte{'m'}, wire.MaxMetaLen)
	id := r.acquireName(name)
	v := r.acquireVersion(id, netip.MustParseAddrPort("10.0.0.1:7946"), meta, wire.Versions{}, 0)
	require.Equal(t, name, r.name(id))
	require.Equal(t, meta, r.meta(v))
}
