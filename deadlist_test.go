package swim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// The count of failed members in the dead list follows every transition:
// a failure, a leave, a failure becoming a leave, a comeback.
func TestDeadListCountsFailed(t *testing.T) {
	cfg := mtConfig()
	cfg.ReconnectInterval = 1e9
	h := newMT(t, cfg)
	h.joinPeers(4, 1)
	failed := func() int {
		n := 0
		for _, d := range h.m.dead {
			if h.m.entry(d.id).state() == StateDead {
				n++
			}
		}
		require.Equal(t, n, h.m.deadFailed, "the count matches the list")
		return n
	}
	h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 1, From: mtPeer(2)})
	h.feed(mtPeerAddr(3), &wire.Dead{Name: mtPeer(3), Incarnation: 2, From: mtPeer(3), Left: true})
	h.m.Ready()
	require.Equal(t, failed(), 1)
	require.True(t, h.m.hasDeadToRetry())
	h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(1), Incarnation: 2, From: mtPeer(1), Left: true})
	require.Equal(t, 0, failed(), "a failure that became a leave")
	require.False(t, h.m.hasDeadToRetry())
	h.feed(mtPeerAddr(2), &wire.Dead{Name: mtPeer(2), Incarnation: 1, From: mtPeer(4)})
	require.Equal(t, 1, failed())
	h.feed(mtPeerAddr(2), &wire.Alive{Name: mtPeer(2), Addr: wire.EncodeAddr(mtPeerAddr(2)), Incarnation: 3})
	require.Equal(t, 0, failed(), "back alive")
}

// BenchmarkPacketAfterMassLeave is the cost of one ping and NextDeadline,
// the work of every packet, in a table of 2,048 members of which none,
// or 10%, just left gracefully: the second must cost no more than the
// first (before the count, NextDeadline scanned the dead list for a
// reconnect target on every packet).
func BenchmarkPacketAfterMassLeave(b *testing.B) {
	for _, share := range []int{0, 10} {
		b.Run(fmt.Sprintf("left=%d%%", share), func(b *testing.B) {
			t := &testing.T{}
			cfg := mtConfig()
			cfg.ReconnectInterval = 1e9
			cfg.MaxMembers = 4096
			h := newMT(t, cfg)
			h.joinPeers(2048, 1)
			for i := 1; i <= 2048*share/100; i++ {
				h.feed(mtPeerAddr(i), &wire.Dead{Name: mtPeer(i), Incarnation: 2, From: mtPeer(i), Left: true})
			}
			// Past the first reconnect round: with no target, the
			// reconnect timer is dropped, and NextDeadline asks again
			// after every packet whether it is wanted.
			h.tick(mtStart.Add(3 * cfg.ReconnectInterval))
			h.m.Ready()
			pkt := mtPacket(t, &wire.Ping{Seq: 7, Target: mtSelf, From: mtPeer(2000)})
			b.ReportAllocs()
			for b.Loop() {
				if err := h.m.HandlePacket(h.now, mtPeerAddr(2000), pkt); err != nil {
					b.Fatal(err)
				}
				h.m.NextDeadline()
				h.m.Ready()
			}
		})
	}
}
