package wire

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func testPushPull(n int) *PushPull {
	pp := &PushPull{From: "node-0", Join: true}
	for i := range n {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 7946)
		if i%3 == 0 {
			ap = netip.MustParseAddrPort(fmt.Sprintf("[2001:db8::%x]:7946", i))
		}
		ms := MemberState{Name: fmt.Sprintf("node-%d", i), Addr: EncodeAddr(ap), Incarnation: uint64(i) << (i % 40), State: uint8(i % 4)}
		if i%5 == 0 {
			ms.Meta = []byte(fmt.Sprintf("meta %d", i))
		}
		pp.Members = append(pp.Members, ms)
	}
	return pp
}

// The streaming writer produces AppendPacket's bytes, and the view decoder
// reads back what DecodeStreamPacket does.
func TestPushPullWriterAndViewsMatchTheMessageCodec(t *testing.T) {
	for _, n := range []int{0, 1, 300} {
		pp := testPushPull(n)
		want, err := AppendPacket(nil, pp)
		require.NoError(t, err)

		w := NewPushPullWriter([]byte("prefix"), pp.From, pp.Join, len(pp.Members))
		for _, ms := range pp.Members {
			ap, err := DecodeAddr(ms.Addr)
			require.NoError(t, err)
			w.Add(ms.Name, ap, ms.Incarnation, ms.State, ms.Meta, ms.Versions)
		}
		got, err := w.Bytes()
		require.NoError(t, err)
		require.Equal(t, "prefix", string(got[:6]))
		require.Equal(t, want, got[6:])

		var seen []MemberState
		view, err := ParsePushPull(want)
		require.NoError(t, err)
		from, join := view.From, view.Join
		view.Each(func(v *MemberView) {
			ms := MemberState{Name: string(v.Name), Addr: append([]byte(nil), v.Addr...), Incarnation: v.Incarnation, State: v.State}
			if v.Meta != nil {
				ms.Meta = append([]byte(nil), v.Meta...)
			}
			seen = append(seen, ms)
		})
		require.Equal(t, pp.From, from)
		require.Equal(t, pp.Join, join)
		if n == 0 {
			require.Empty(t, seen)
		} else {
			require.Equal(t, pp.Members, seen)
		}
	}
}

func TestPushPullWriterChecksItsCount(t *testing.T) {
	w := NewPushPullWriter(nil, "a", false, 2)
	w.Add("b", netip.MustParseAddrPort("10.0.0.1:1"), 1, 0, nil, Versions{})
	_, err := w.Bytes()
	require.ErrorIs(t, err, ErrMalformed)

	w = NewPushPullWriter(nil, "a", false, 1)
	w.Add(string(make([]byte, MaxNameLen+1)), netip.MustParseAddrPort("10.0.0.1:1"), 1, 0, nil, Versions{})
	_, err = w.Bytes()
	require.ErrorIs(t, err, ErrTooLarge)
}

// A packet damaged anywhere is rejected whole, before any member is read.
func TestParsePushPullRejectsDamage(t *testing.T) {
	good, err := AppendPacket(nil, testPushPull(50))
	require.NoError(t, err)
	for _, cut := range []int{len(good) - 1, len(good) / 2, 3} {
		_, err := ParsePushPull(good[:cut])
		require.Error(t, err)
		requireDecodeError(t, err, nil)
	}
	_, err = ParsePushPull(append(good, 0))
	require.ErrorIs(t, err, ErrTrailingBytes)
	ping, err := AppendPacket(nil, &Ping{Seq: 1, Target: "a", From: "b"})
	require.NoError(t, err)
	require.False(t, IsPushPull(ping))
	_, err = ParsePushPull(ping)
	require.ErrorIs(t, err, ErrMalformed)
}

// FuzzParsePushPull: the view decoder accepts exactly what
// DecodeStreamPacket accepts for a push-pull, with the same members.
func FuzzParsePushPull(f *testing.F) {
	for _, n := range []int{0, 1, 7} {
		b, err := AppendPacket(nil, testPushPull(n))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var views []MemberState
		view, err := ParsePushPull(b)
		msgs, err2 := DecodeStreamPacket(b)
		if !IsPushPull(b) {
			require.Error(t, err)
			return
		}
		if err2 != nil {
			require.Error(t, err, "the view decoder accepted what the message decoder refused: %v", err2)
			return
		}
		require.NoError(t, err)
		view.Each(func(v *MemberView) {
			ms := MemberState{Name: string(v.Name), Addr: append([]byte(nil), v.Addr...), Incarnation: v.Incarnation, State: v.State}
			if len(ms.Addr) == 0 {
				ms.Addr = nil
			}
			if v.Meta != nil {
				ms.Meta = append([]byte(nil), v.Meta...)
			}
			views = append(views, ms)
		})
		pp := msgs[0].(*PushPull)
		require.Equal(t, pp.From, view.From)
		require.Equal(t, pp.Join, view.Join)
		require.Len(t, views, len(pp.Members))
		for i := range views {
			require.Equal(t, pp.Members[i], views[i])
		}
	})
}
