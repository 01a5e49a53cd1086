package swim

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// totalAlloc is the bytes this process has allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// compoundOfPushPulls builds a stream message of about size bytes: a
// compound of wire.MaxCompoundParts push-pull frames, each of as many
// members as fit, each member as short as the wire allows (a one-byte name,
// no address, no metadata: 7 bytes), which decoded take a dozen times the
// message's size.
func compoundOfPushPulls(t *testing.T, size int) []byte {
	t.Helper()
	const perMember = 7
	count := (size/wire.MaxCompoundParts - 16) / perMember
	w := wire.NewPushPullWriter(nil, "attacker", false, count)
	for range count {
		w.Add("a", netip.AddrPort{}, 0, uint8(StateAlive), nil)
	}
	pkt, err := w.Bytes()
	require.NoError(t, err)
	frames := make([][]byte, wire.MaxCompoundParts)
	for i := range frames {
		frames[i] = pkt[1:] // a frame is a packet without its version byte
	}
	return wire.AppendCompound(nil, frames)
}

// TestStreamCompoundOfPushPullsRejectedBeforeDecoding: a compound of
// push-pull frames, as a stream request or as the reply to a push-pull or
// a TCP ping, is rejected without being decoded, for far less allocation
// than its size: by its size at 30 MiB (decoding it took 12 times that),
// by its frames' types at 60 KiB. Not parallel: it measures the process's
// allocation.
func TestStreamCompoundOfPushPullsRejectedBeforeDecoding(t *testing.T) {
	for _, size := range []int{30 << 20, 60 << 10} {
		msg := compoundOfPushPulls(t, size)
		require.Greater(t, len(msg), size*9/10)
		require.LessOrEqual(t, len(msg), wire.MaxStreamMessageSize)
		want := wire.ErrTooLarge
		if len(msg) <= wire.MaxSmallStreamSize {
			want = wire.ErrMalformed
		}
		measure := func(t *testing.T, f func() error) {
			t.Helper()
			runtime.GC()
			alloc := totalAlloc()
			err := f()
			used := totalAlloc() - alloc
			t.Logf("%d-byte compound of push-pulls: %d bytes allocated: %v", len(msg), used, err)
			require.ErrorIs(t, err, want)
			require.Less(t, used, uint64(min(1<<20, len(msg)/8)), "allocated %d bytes for a message of %d", used, len(msg))
		}
		t.Run(fmt.Sprintf("%d bytes", len(msg)), func(t *testing.T) {
			t.Run("request", func(t *testing.T) {
				h := newMT(t, mtConfig())
				measure(t, func() error {
					_, err := h.m.HandleStream(h.now, mtPeerAddr(1), msg)
					return err
				})
				require.Equal(t, 1, h.m.NumMembers())
			})
			t.Run("push-pull reply", func(t *testing.T) {
				h := newMT(t, mtConfig())
				ids := h.m.Join(h.now, []netip.AddrPort{mtSeedAddr})
				measure(t, func() error { return h.m.HandleStreamResponse(h.now, ids[0], msg, nil) })
				require.Equal(t, uint64(1), h.m.Stats().PushPullsFailed)
				require.Equal(t, 1, h.m.NumMembers())
			})
			t.Run("TCP ping reply", func(t *testing.T) {
				h := newMT(t, mtConfig())
				h.joinPeers(1, 1)
				target := h.m.lookup(mtPeer(1))
				id := h.m.startStreamPing(target, &wire.Ping{Seq: 7, Target: mtPeer(1), From: mtSelf}, time.Second)
				h.m.Ready()
				measure(t, func() error { return h.m.HandleStreamResponse(h.now, id, msg, nil) })
				require.Equal(t, uint64(1), h.m.Stats().TCPPingsFailed)
				require.Equal(t, 2, h.m.NumMembers())
			})
		})
	}
}
