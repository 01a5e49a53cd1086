package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckSmallStreamPacket(t *testing.T) {
	frame := func(m Message) []byte {
		f, err := AppendFrame(nil, m)
		require.NoError(t, err)
		return f
	}
	ping := frame(&Ping{Seq: 1, Target: "b", From: "a"})
	suspect := frame(&Suspect{Name: "b", Incarnation: 3, From: "a"})
	pushPull := frame(&PushPull{From: "a", Members: []MemberState{{Name: "b", Addr: testAddr4}}})
	largest := frame(&Alive{Name: string(make([]byte, MaxNameLen)), Addr: testAddr6, Incarnation: 1<<64 - 1, Meta: make([]byte, MaxMetaLen)})
	single := func(f []byte) []byte { return append([]byte{Version}, f...) }

	ok := []struct {
		name string
		b    []byte
	}{
		{"TCP ping", AppendCompound(nil, [][]byte{ping, suspect})},
		{"TCP ping reply with the largest alive", AppendCompound(nil, [][]byte{frame(&Ack{Seq: 1}), largest})},
		{"single ping", single(ping)},
		{"empty compound", AppendCompound(nil, nil)},
		// Left for DecodeStreamPacket, which refuses them unallocated.
		{"empty", nil},
		{"wrong version", []byte{Version + 1, byte(TypeCompound), 0x91}},
		{"unknown type", []byte{Version, 0xee}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, CheckSmallStreamPacket(tc.b))
		})
	}

	bad := []struct {
		name string
		b    []byte
		want error
	}{
		{"push-pull", single(pushPull), ErrMalformed},
		{"push-pull frame first", AppendCompound(nil, [][]byte{pushPull, ping}), ErrMalformed},
		{"push-pull frame last", AppendCompound(nil, [][]byte{ping, suspect, pushPull}), ErrMalformed},
		{"over the bound", append(AppendCompound(nil, [][]byte{ping}), make([]byte, MaxSmallStreamSize)...), ErrTooLarge},
		{"truncated frame list", AppendCompound(nil, [][]byte{ping, suspect})[:20], ErrTruncated},
		{"nested compound", AppendCompound(nil, [][]byte{ping, AppendCompound(nil, [][]byte{ping, pushPull})[1:]}), ErrMalformed},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSmallStreamPacket(tc.b)
			require.ErrorIs(t, err, tc.want)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
		})
	}
}

func TestCheckSmallStreamPacketAllocatesNothing(t *testing.T) {
	f, err := AppendFrame(nil, &Ping{Seq: 1, Target: "b", From: "a"})
	require.NoError(t, err)
	b := AppendCompound(nil, [][]byte{f, f, f})
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = CheckSmallStreamPacket(b) }))
}

func FuzzCheckSmallStreamPacket(f *testing.F) {
	ping, err := AppendFrame(nil, &Ping{Seq: 1, Target: "b", From: "a"})
	require.NoError(f, err)
	f.Add(AppendCompound(nil, [][]byte{ping}))
	f.Add([]byte{Version, byte(TypeCompound), 0xdc, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckSmallStreamPacket(b)
		if err != nil {
			return
		}
		// What passes decodes to no push-pull.
		msgs, err := DecodeStreamPacket(b)
		if err != nil {
			return
		}
		for _, m := range msgs {
			if _, ok := m.(*PushPull); ok {
				t.Fatalf("push-pull passed the check: %x", b)
			}
		}
	})
}
