package wire

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The oracle writes and reads Versions as the one unsigned integer the
// codec packs it into.
func init() {
	msgpack.Register(Versions{},
		func(e *msgpack.Encoder, v reflect.Value) error {
			return e.EncodeUint(v.Interface().(Versions).pack())
		},
		func(d *msgpack.Decoder, v reflect.Value) error {
			u, err := d.DecodeUint64()
			if err != nil {
				return err
			}
			v.Set(reflect.ValueOf(unpackVersions(u)))
			return nil
		})
}

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/wire")

const goldenDir = "../../testdata/wire"

func TestGolden(t *testing.T) {
	for _, tc := range allGoldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := encodeMessages(t, tc.msgs)
			path := filepath.Join(goldenDir, tc.name+".hex")
			if *update {
				require.NoError(t, os.MkdirAll(goldenDir, 0o755))
				require.NoError(t, os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644))
			}
			data, err := os.ReadFile(path)
			require.NoError(t, err, "run: go test ./internal/wire -run Golden -update")
			want := unhex(t, string(data))
			require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got), "encoding changed")

			msgs, err := DecodePacket(want)
			require.NoError(t, err)
			require.Equal(t, tc.msgs, msgs)
		})
	}
}

func TestRoundTrip(t *testing.T) {
	name255 := strings.Repeat("n", MaxNameLen)
	bigMeta := bytes.Repeat([]byte{0xab}, MaxMetaLen)
	many := make([]MemberState, 1000)
	for i := range many {
		many[i] = MemberState{Name: strings.Repeat("x", i%40), Addr: testAddr4, Incarnation: uint64(i) * 1000, State: uint8(i % 4)}
	}
	tests := []struct {
		name string
		msg  Message
	}{
		{"ping zero", &Ping{}},
		{"ping", &Ping{Seq: 1, Target: "a", From: "b"}},
		{"ping max", &Ping{Seq: math.MaxUint32, Target: name255, From: name255}},
		{"pingreq v4", &PingReq{Seq: 5, Target: "t", TargetAddr: testAddr4, From: "f"}},
		{"pingreq v6", &PingReq{Seq: 1 << 20, Target: "t", TargetAddr: testAddr6, From: "f"}},
		{"pingreq no addr", &PingReq{Seq: 5, Target: "t", From: "f"}},
		{"ack 0", &Ack{}},
		{"ack 127", &Ack{Seq: 127}},
		{"ack 128", &Ack{Seq: 128}},
		{"ack 255", &Ack{Seq: 255}},
		{"ack 256", &Ack{Seq: 256}},
		{"ack 65535", &Ack{Seq: 65535}},
		{"ack 65536", &Ack{Seq: 65536}},
		{"ack max", &Ack{Seq: math.MaxUint32}},
		{"nack", &Nack{Seq: 99}},
		{"alive empty", &Alive{}},
		{"alive", &Alive{Name: "node", Addr: testAddr4, Incarnation: 1, Meta: []byte("meta")}},
		{"alive max", &Alive{Name: name255, Addr: testAddr6, Incarnation: math.MaxUint64, Meta: bigMeta}},
		{"suspect", &Suspect{Name: "a", Incarnation: 1 << 33, From: "b"}},
		{"dead", &Dead{Name: "a", Incarnation: 2, From: "b"}},
		{"dead left", &Dead{Name: "a", Incarnation: 2, From: "a", Left: true}},
		{"pushpull empty", &PushPull{From: "a"}},
		{"pushpull join", &PushPull{From: "a", Join: true, Members: []MemberState{{Name: "a", Addr: testAddr4, Incarnation: 1}}}},
		{"pushpull 1000", &PushPull{From: "a", Members: many}},
		{"pushpull 20 bigmeta", &PushPull{From: "a", Members: func() []MemberState {
			ms := make([]MemberState, 20)
			for i := range ms {
				ms[i] = MemberState{Name: name255, Addr: testAddr6, Incarnation: math.MaxUint64, State: 255, Meta: bigMeta}
			}
			return ms
		}()}},
		{"user empty", &User{}},
		{"user", &User{From: "a", Payload: []byte("payload")}},
		{"user large", &User{From: name255, Payload: bytes.Repeat([]byte{7}, 1<<20)}},
		{"broadcast empty", &Broadcast{}},
		{"broadcast", &Broadcast{Origin: "o", Epoch: 1 << 41, Seq: math.MaxUint32, Key: "key", Payload: []byte("p")}},
		{"broadcast max", &Broadcast{Origin: name255, Epoch: math.MaxUint64, Key: strings.Repeat("k", MaxKeyLen), Payload: bytes.Repeat([]byte{1}, 60000)}},
		{"ack payload empty", &AckPayload{}},
		{"ack payload", &AckPayload{Seq: 1 << 31, Payload: []byte("coordinates")}},
		{"heartbeat empty", &Heartbeat{}},
		{"heartbeat", &Heartbeat{From: name255}},
		{"view digest empty", &ViewDigest{}},
		{"view digest", &ViewDigest{Live: math.MaxUint32, Digest: math.MaxUint32}},
		{"ihave", &IHave{IDs: []uint64{0, 1, math.MaxUint64}}},
		{"ihave max", &IHave{IDs: make([]uint64, MaxTreeIDs)}},
		{"graft empty", &Graft{}},
		{"graft", &Graft{IDs: []uint64{42}}},
		{"prune empty", &Prune{}},
		{"prune", &Prune{Origin: strings.Repeat("o", MaxNameLen)}},
		{"compound empty", &Compound{}},
		{"compound", &Compound{Frames: [][]byte{{byte(TypeAck), 0x91, 0x01}, {byte(TypeNack), 0x91, 0x02}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A frame appended after existing bytes leaves them alone.
			prefix := []byte("prefix")
			frame, err := AppendFrame(append([]byte(nil), prefix...), tc.msg)
			require.NoError(t, err)
			require.Equal(t, prefix, frame[:len(prefix)])
			frame = frame[len(prefix):]
			require.Equal(t, byte(tc.msg.Type()), frame[0])

			got, err := DecodeFrame(frame)
			require.NoError(t, err)
			require.Equal(t, tc.msg, got)

			packet, err := AppendPacket(nil, tc.msg)
			require.NoError(t, err)
			require.Equal(t, append([]byte{Version}, frame...), packet)

			if _, ok := tc.msg.(*Compound); ok {
				return // DecodePacket flattens compounds; see TestCompound.
			}
			msgs, err := DecodeStreamPacket(packet)
			require.NoError(t, err)
			require.Equal(t, []Message{tc.msg}, msgs)
			if len(packet) <= MaxPacketSize {
				msgs, err = DecodePacket(packet)
				require.NoError(t, err)
				require.Equal(t, []Message{tc.msg}, msgs)
			}
		})
	}
}

func TestDecodedMessagesDoNotAliasInput(t *testing.T) {
	msgs := []Message{
		&PingReq{Seq: 1, Target: "t", TargetAddr: testAddr4, From: "f"},
		&Alive{Name: "node", Addr: testAddr4, Incarnation: 1, Meta: []byte("meta")},
	}
	packet := encodeMessages(t, msgs)
	got, err := DecodePacket(packet)
	require.NoError(t, err)
	for i := range packet {
		packet[i] = 0xee
	}
	require.Equal(t, msgs, got)

	frame, err := AppendFrame(nil, &Compound{Frames: [][]byte{{3, 0x91, 1}, {4, 0x91, 2}}})
	require.NoError(t, err)
	m, err := DecodeFrame(frame)
	require.NoError(t, err)
	for i := range frame {
		frame[i] = 0xee
	}
	require.Equal(t, &Compound{Frames: [][]byte{{3, 0x91, 1}, {4, 0x91, 2}}}, m)
}

func TestCompound(t *testing.T) {
	ping := &Ping{Seq: 1, Target: "a", From: "b"}
	ack := &Ack{Seq: 2}
	pingFrame, err := AppendFrame(nil, ping)
	require.NoError(t, err)
	ackFrame, err := AppendFrame(nil, ack)
	require.NoError(t, err)

	t.Run("one frame is a plain packet", func(t *testing.T) {
		got := AppendCompound([]byte("x"), [][]byte{pingFrame})
		want, err := AppendPacket([]byte("x"), ping)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
	t.Run("zero frames decode to nothing", func(t *testing.T) {
		p := AppendCompound(nil, nil)
		require.Equal(t, []byte{Version, byte(TypeCompound), 0x90}, p)
		msgs, err := DecodePacket(p)
		require.NoError(t, err)
		require.Empty(t, msgs)
	})
	t.Run("flattened in order", func(t *testing.T) {
		p := AppendCompound(nil, [][]byte{pingFrame, ackFrame, pingFrame})
		require.Equal(t, Version, p[0])
		require.Equal(t, byte(TypeCompound), p[1])
		msgs, err := DecodePacket(p)
		require.NoError(t, err)
		require.Equal(t, []Message{ping, ack, ping}, msgs)
	})
	t.Run("AppendPacket of a Compound matches AppendCompound", func(t *testing.T) {
		frames := [][]byte{pingFrame, ackFrame}
		p, err := AppendPacket(nil, &Compound{Frames: frames})
		require.NoError(t, err)
		require.Equal(t, AppendCompound(nil, frames), p)
	})
	t.Run("max parts", func(t *testing.T) {
		frames := make([][]byte, MaxCompoundParts)
		for i := range frames {
			frames[i] = ackFrame
		}
		msgs, err := DecodePacket(AppendCompound(nil, frames))
		require.NoError(t, err)
		require.Len(t, msgs, MaxCompoundParts)
	})
	t.Run("header and frame overhead bounds", func(t *testing.T) {
		// CompoundHeaderMax and FrameOverheadMax must hold at the largest
		// compound a UDP packet carries.
		frames := make([][]byte, MaxCompoundParts)
		big := make([]byte, 300) // needs a bin16 header
		big[0] = byte(TypeAck)
		total := 0
		for i := range frames {
			frames[i] = big
			total += len(big)
		}
		p := AppendCompound(nil, frames)
		require.LessOrEqual(t, len(p), CompoundHeaderMax+len(frames)*FrameOverheadMax+total)
		small := AppendCompound(nil, [][]byte{ackFrame, ackFrame})
		require.LessOrEqual(t, len(small), CompoundHeaderMax+2*FrameOverheadMax+2*len(ackFrame))
	})
}

// TestEncodeLimits checks that a sender cannot produce what receivers reject.
func TestEncodeLimits(t *testing.T) {
	long := strings.Repeat("n", MaxNameLen+1)
	tests := []struct {
		name string
		msg  Message
		want error
	}{
		{"ping target", &Ping{Target: long}, ErrTooLarge},
		{"ping from", &Ping{From: long}, ErrTooLarge},
		{"pingreq addr", &PingReq{TargetAddr: make([]byte, MaxAddrLen+1)}, ErrTooLarge},
		{"alive name", &Alive{Name: long}, ErrTooLarge},
		{"alive meta", &Alive{Meta: make([]byte, MaxMetaLen+1)}, ErrTooLarge},
		{"suspect from", &Suspect{From: long}, ErrTooLarge},
		{"dead name", &Dead{Name: long}, ErrTooLarge},
		{"pushpull from", &PushPull{From: long}, ErrTooLarge},
		{"pushpull member name", &PushPull{Members: []MemberState{{}, {Name: long}}}, ErrTooLarge},
		{"pushpull member meta", &PushPull{Members: []MemberState{{Meta: make([]byte, MaxMetaLen+1)}}}, ErrTooLarge},
		{"pushpull members", &PushPull{Members: make([]MemberState, MaxPushPullMembers+1)}, ErrTooLarge},
		{"compound parts", &Compound{Frames: make([][]byte, MaxCompoundParts+1)}, ErrTooLarge},
		{"compound empty frame", &Compound{Frames: [][]byte{{}}}, ErrMalformed},
		{"compound nested", &Compound{Frames: [][]byte{{byte(TypeCompound), 0x90}}}, ErrMalformed},
		{"nil", nil, nil},
		{"typed nil", (*Alive)(nil), nil},
		{"foreign message", foreignMessage{}, ErrUnknownType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := AppendFrame(dst, tc.msg)
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			require.Equal(t, []byte("keep"), out, "dst must come back unchanged")
			out, err = AppendPacket(dst, tc.msg)
			require.Error(t, err)
			require.Equal(t, []byte("keep"), out)
		})
	}
}

type foreignMessage struct{}

func (foreignMessage) Type() Type { return 42 }

// TestDecodeRejects feeds each kind of bad input to DecodePacket.
func TestDecodeRejects(t *testing.T) {
	repeat := func(s string, n int) string { return strings.Repeat(s+" ", n) }
	tests := []struct {
		name string
		in   string // hex
		want error
	}{
		{"empty", "", ErrTruncated},
		{"version only", "01", ErrTruncated},
		{"version 0", "00 01 93 2a a1 74 a1 66", ErrVersion},
		{"version 2", "02 01 93 2a a1 74 a1 66", ErrVersion},
		{"lone bad version", "ff", ErrVersion},
		{"type without body", "01 03", ErrTruncated},
		{"trailing byte", "01 01 93 2a a1 74 a1 66 00", ErrTrailingBytes},
		{"fewer fields", "01 01 92 2a a1 74", ErrMalformed},
		{"empty array", "01 03 90", ErrMalformed},
		{"body is a map", "01 03 81 a1 73 2a", ErrMalformed},
		{"body is an int", "01 03 2a", ErrMalformed},
		{"array claims more than input", "01 03 dd ff ff ff ff 00", ErrTruncated},
		{"array16 header cut", "01 03 dc 00", ErrTruncated},
		{"seq as string", "01 03 91 a1 78", ErrMalformed},
		{"seq negative fixint", "01 03 91 ff", ErrMalformed},
		{"seq negative int8", "01 03 91 d0 ff", ErrMalformed},
		{"seq negative int64", "01 03 91 d3 ff ff ff ff ff ff ff ff", ErrMalformed},
		{"seq nil", "01 03 91 c0", ErrMalformed},
		{"seq float", "01 03 91 ca 00 00 00 00", ErrMalformed},
		{"seq over uint32", "01 03 91 cf 00 00 00 01 00 00 00 00", ErrMalformed},
		{"seq cut", "01 03 91 ce 00 00", ErrTruncated},
		{"name too long", "01 05 94 da 01 00" + repeat("61", 256) + "c0 01 c0", ErrTooLarge},
		{"name claims 4 GiB", "01 05 94 db ff ff ff ff", ErrTooLarge},
		{"name cut", "01 05 94 a5 61 61", ErrTruncated},
		{"name as bin", "01 06 93 c4 01 6e 01 a1 66", ErrMalformed},
		{"name as nil", "01 06 93 c0 01 a1 66", ErrMalformed},
		{"addr too long", "01 05 94 a1 6e c4 13" + repeat("00", 19) + "01 c0", ErrTooLarge},
		{"addr claims 4 GiB", "01 05 94 a1 6e c6 ff ff ff ff", ErrTooLarge},
		{"addr as str", "01 05 94 a1 6e a6 00 00 00 00 00 00 01 c0", ErrMalformed},
		{"meta claims 4 GiB", "01 05 94 a1 6e c0 01 c6 ff ff ff ff", ErrTooLarge},
		{"meta over limit", "01 05 94 a1 6e c0 01 c6 00 01 00 01", ErrTooLarge},
		{"meta cut", "01 05 94 a1 6e c0 01 c5 10 00" + repeat("00", 10), ErrTruncated},
		{"left as int", "01 07 94 a1 6e 01 a1 66 01", ErrMalformed},
		{"join as nil", "01 08 93 a1 66 c0 90", ErrMalformed},
		{"members not an array", "01 08 93 a1 66 c2 c0", ErrMalformed},
		{"state over uint8", "01 08 93 a1 66 c2 91 95 a1 6e c0 01 cd 01 00 c0", ErrMalformed},
		{"member fewer fields", "01 08 93 a1 66 c2 91 94 a1 6e c0 01 00", ErrMalformed},
		{"members over limit", "01 08 93 a1 66 c2 dd 00 10 00 01" + repeat("00", 64), ErrTooLarge},
		{"members claim 4G", "01 08 93 a1 66 c2 dd ff ff ff ff" + repeat("00", 64), ErrTooLarge},
		{"members implausible", "01 08 93 a1 66 c2 9a" + repeat("00", 20), ErrTruncated},
		{"reserved code in extras", "01 03 92 00 c1", ErrMalformed},
		{"extra array claims 4G", "01 03 92 00 dd ff ff ff ff", ErrTruncated},
		{"extra map claims more", "01 03 92 00 de 00 05 00 00", ErrTruncated},
		{"extra str cut", "01 03 92 00 a5 61", ErrTruncated},
		{"extra ext cut", "01 03 92 00 c7 05 01 00", ErrTruncated},
		{"extra fixext cut", "01 03 92 00 d8 01 00", ErrTruncated},
		{"extras claimed not present", "01 03 93 00 00", ErrTruncated},
		{"nested compound", "01 09 91 c4 02 09 90", ErrMalformed},
		{"compound over limit", "01 09 dc 01 00" + repeat("c4 03 03 91 00", 256), ErrTooLarge},
		{"compound implausible", "01 09 dc 00 c8 c4 01 03", ErrTruncated},
		{"compound empty frame", "01 09 92 c4 00 c4 03 03 91 00", ErrTruncated},
		{"compound nil frame", "01 09 92 c0 c4 03 03 91 00", ErrTruncated},
		{"compound frame as str", "01 09 92 a3 03 91 00 c4 03 03 91 00", ErrMalformed},
		{"compound not an array", "01 09 c4 03 03 91 00", ErrMalformed},
		{"compound frame cut", "01 09 92 c4 03 03 91 00 c4 03 03 91", ErrTruncated},
		{"compound frame body cut", "01 09 92 c4 02 03 91 c4 03 03 91 00", ErrTruncated},
		{"trailing inside frame", "01 09 92 c4 04 03 91 00 00 c4 03 03 91 00", ErrTrailingBytes},
		{"trailing after compound", "01 09 92 c4 03 03 91 00 c4 03 03 91 00 00", ErrTrailingBytes},
		{"bad field in compound", "01 09 92 c4 03 03 91 ff c4 03 03 91 00", ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := DecodePacket(unhex(t, tc.in))
			require.Nil(t, msgs)
			requireDecodeError(t, err, tc.want)
			require.NotEmpty(t, err.Error())
		})
	}

	t.Run("packet over MaxPacketSize", func(t *testing.T) {
		p := make([]byte, MaxPacketSize+1)
		p[0], p[1] = Version, byte(TypeAck)
		_, err := DecodePacket(p)
		requireDecodeError(t, err, ErrTooLarge)
		_, err = DecodeStreamPacket(p)
		requireDecodeError(t, err, ErrMalformed) // the size is fine on a stream
	})
	t.Run("frame over MaxStreamMessageSize", func(t *testing.T) {
		_, err := DecodeFrame(make([]byte, MaxStreamMessageSize+1))
		requireDecodeError(t, err, ErrTooLarge)
	})
	t.Run("meta over limit with its bytes", func(t *testing.T) {
		f := unhex(t, "05 94 a1 6e c0 01 c6 00 01 00 01")
		f = append(f, make([]byte, MaxMetaLen+1)...)
		_, err := DecodeFrame(f)
		requireDecodeError(t, err, ErrTooLarge)
	})
	t.Run("DecodeFrame", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			in   string
			want error
		}{
			{"empty", "", ErrTruncated},
			{"unknown type", "00 91 00", ErrUnknownType},
			{"trailing", "03 91 00 00", ErrTrailingBytes},
			{"compound nested", "09 91 c4 02 09 90", ErrMalformed},
			{"compound empty frame", "09 91 c4 00", ErrTruncated},
			{"compound over limit", "09 dc 01 00" + repeat("c4 03 03 91 00", 256), ErrTooLarge},
			{"compound trailing", "09 91 c4 03 03 91 00 00", ErrTrailingBytes},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m, err := DecodeFrame(unhex(t, tc.in))
				require.Nil(t, m)
				requireDecodeError(t, err, tc.want)
			})
		}
	})
}

// TestDecodeRejectsEveryPrefix cuts every valid vector at every length: each
// cut must fail cleanly (an encoding that were its own prefix would be
// ambiguous).
func TestDecodeRejectsEveryPrefix(t *testing.T) {
	for _, tc := range goldenCases() {
		p := encodeMessages(t, tc.msgs)
		for n := range len(p) {
			_, err := DecodePacket(p[:n])
			requireDecodeError(t, err, ErrTruncated)
			if n > 1 {
				_, err = DecodeFrame(p[1:n])
				requireDecodeError(t, err, ErrTruncated)
			}
		}
	}
}

// TestDecodeAccepts covers encodings that another msgpack writer, or a newer
// version, may produce.
func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Message
	}{
		{"uint32 for small seq", "01 03 91 ce 00 00 00 2a", []Message{&Ack{Seq: 42}}},
		{"uint64 for small seq", "01 03 91 cf 00 00 00 00 00 00 00 2a", []Message{&Ack{Seq: 42}}},
		{"int8 for seq", "01 03 91 d0 2a", []Message{&Ack{Seq: 42}}},
		{"int32 for seq", "01 03 91 d2 7f ff ff ff", []Message{&Ack{Seq: math.MaxInt32}}},
		{"array16 header", "01 03 dc 00 01 2a", []Message{&Ack{Seq: 42}}},
		{"str8 for short name", "01 06 93 d9 01 6e 01 a1 66", []Message{&Suspect{Name: "n", Incarnation: 1, From: "f"}}},
		{"empty bin for nil", "01 05 94 a1 6e c4 00 01 c4 00", []Message{&Alive{Name: "n", Incarnation: 1}}},
		{"nil for bin", "01 05 94 a1 6e c0 01 c0", []Message{&Alive{Name: "n", Incarnation: 1}}},
		{"extra fields of every kind", "01 03 dc 00 14 2a" +
			"c0 c2 c3 ff 7f" + // nil, false, true, negative and positive fixint
			"92 91 90 80" + // nested arrays, empty map
			"81 a1 6b 01" + // map
			"d4 01 02  c7 02 05 aa bb  c8 00 01 05 aa  c9 00 00 00 00 05" + // ext forms
			"a3 61 62 63  d9 01 61  c4 01 00  c5 00 00  c6 00 00 00 00" + // str, bin
			"cb 00 00 00 00 00 00 00 00  d3 80 00 00 00 00 00 00 00  cd 01 00",
			[]Message{&Ack{Seq: 42}}},
		{"extra field in a member", "01 08 93 a1 66 c3 91 98 a1 6e c0 01 02 c0 00 00 a1 78",
			[]Message{&PushPull{From: "f", Join: true, Members: []MemberState{{Name: "n", Incarnation: 1, State: 2}}}}},
		{"member without versions (protocol 1)", "01 08 93 a1 66 c3 91 95 a1 6e c0 01 02 c0",
			[]Message{&PushPull{From: "f", Join: true, Members: []MemberState{{Name: "n", Incarnation: 1, State: 2}}}}},
		{"member with versions", "01 08 93 a1 66 c3 91 96 a1 6e c0 01 02 c0 ce 00 04 03 12",
			[]Message{&PushPull{From: "f", Join: true, Members: []MemberState{{Name: "n", Incarnation: 1, State: 2,
				Versions: Versions{ProtocolMin: 1, ProtocolMax: 2, AppMin: 3, AppMax: 4}}}}}},
		{"alive without versions (protocol 1)", "01 05 94 a1 6e c0 07 c0", []Message{&Alive{Name: "n", Incarnation: 7}}},
		{"alive with versions, a life and a field from a newer protocol", "01 05 97 a1 6e c0 07 c0 12 05 a1 78",
			[]Message{&Alive{Name: "n", Incarnation: 7, Versions: Versions{ProtocolMin: 1, ProtocolMax: 2}, Life: 5}}},
		{"alive with versions, no life (protocol 2 to 6)", "01 05 95 a1 6e c0 07 c0 12",
			[]Message{&Alive{Name: "n", Incarnation: 7, Versions: Versions{ProtocolMin: 1, ProtocolMax: 2}}}},
		{"a kind from a newer protocol", "01 3f 91 00", []Message{&Unknown{Kind: 0x3f}}},
		{"type 0", "01 00 91 00", []Message{&Unknown{Kind: 0}}},
		{"a newer kind without body", "01 ff", []Message{&Unknown{Kind: 255}}},
		{"a newer kind in a compound", "01 09 92 c4 03 3f 91 00 c4 03 03 91 2a", []Message{&Unknown{Kind: 0x3f}, &Ack{Seq: 42}}},
		{"extra field in pushpull", "01 08 94 a1 66 c2 90 c3", []Message{&PushPull{From: "f"}}},
		{"compound of one", "01 09 91 c4 03 03 91 2a", []Message{&Ack{Seq: 42}}},
		{"compound with bin16 frame", "01 09 91 c5 00 03 03 91 2a", []Message{&Ack{Seq: 42}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := DecodePacket(unhex(t, tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, msgs)
		})
	}
}

// TestDecodeAllocationIsBounded decodes hostile inputs that claim huge
// lengths and counts, and checks that the memory allocated stays small.
func TestDecodeAllocationIsBounded(t *testing.T) {
	inputs := []string{
		"01 05 94 db ff ff ff ff",                          // name claims 4 GiB
		"01 05 94 a1 6e c6 ff ff ff ff",                    // addr claims 4 GiB
		"01 05 94 a1 6e c0 01 c6 7f ff ff ff",              // meta claims 2 GiB
		"01 08 93 a1 66 c2 dd 00 0f ff ff",                 // a million members
		"01 08 93 a1 66 c2 dd 00 00 ff ff" + "00 00 00 00", // 65535 members, few bytes
		"01 09 dd ff ff ff ff",                             // 4G compound parts
		"01 03 92 00 dd ff ff ff ff",                       // extra array of 4G
		"01 03 92 00 c9 7f ff ff ff 01",                    // extra ext of 2 GiB
	}
	deep := append(unhex(t, "01 03 92 00"), bytes.Repeat([]byte{0x91}, MaxPacketSize-5)...)
	deep = append(deep, 0)
	for _, in := range inputs {
		b := unhex(t, in)
		allocated := bytesAllocated(func() {
			_, err := DecodePacket(b)
			require.Error(t, err)
		})
		require.Less(t, allocated, uint64(16<<10), "input %s", in)
	}
	// A 65 KB tower of nested arrays as an extra field decodes without
	// recursion or memory.
	allocated := bytesAllocated(func() {
		msgs, err := DecodePacket(deep)
		require.NoError(t, err)
		require.Equal(t, []Message{&Ack{}}, msgs)
	})
	require.Less(t, allocated, uint64(16<<10))
}

func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestEncodedSizes pins the cost of the messages that dominate traffic. The
// dissemination budget (1400 bytes by default) is spent in these units.
func TestEncodedSizes(t *testing.T) {
	const name = "node-00001" // 10 characters, a typical short member name
	const from = "node-00002"
	// The versions every member of this release announces: one byte.
	current := Versions{ProtocolMin: ProtocolMin, ProtocolMax: ProtocolMax}
	// A life as members make them: a start time in milliseconds, shifted
	// over 16 random bits (9 bytes on the wire).
	const life = 1796171455000<<16 | 0x2f1d
	tests := []struct {
		name   string
		msg    Message
		packet int // as a packet of its own: version + type + body
	}{
		{"ping (seq 1)", &Ping{Seq: 1, Target: name, From: from}, 26},
		{"ping (seq 1000)", &Ping{Seq: 1000, Target: name, From: from}, 28},
		{"ack (seq 1)", &Ack{Seq: 1}, 4},
		{"heartbeat", &Heartbeat{From: from}, 14},
		{"view digest (64 members)", &ViewDigest{Live: 64, Digest: 0x1234abcd}, 9},
		{"ack (seq 100000)", &Ack{Seq: 100000}, 8},
		{"nack (seq 1)", &Nack{Seq: 1}, 4},
		{"alive (inc 1, IPv4, no meta)", &Alive{Name: name, Addr: testAddr4, Incarnation: 1, Versions: current}, 26},
		{"alive (inc 200, IPv4, no meta)", &Alive{Name: name, Addr: testAddr4, Incarnation: 200, Versions: current}, 27},
		{"alive (inc 1, IPv6, no meta)", &Alive{Name: name, Addr: testAddr6, Incarnation: 1, Versions: current}, 38},
		{"alive (inc 1, IPv4, no meta, an application range)", &Alive{Name: name, Addr: testAddr4, Incarnation: 1,
			Versions: Versions{ProtocolMin: ProtocolMin, ProtocolMax: ProtocolMax, AppMin: 1, AppMax: 2}}, 30},
		{"alive (inc 1, IPv4, no meta, a life)", &Alive{Name: name, Addr: testAddr4, Incarnation: 1, Versions: current, Life: life}, 34},
		{"suspect (inc 1)", &Suspect{Name: name, Incarnation: 1, From: from}, 28},
		{"suspect (inc 1, a life)", &Suspect{Name: name, Incarnation: 1, From: from, Life: life}, 36},
		{"dead (inc 1)", &Dead{Name: name, Incarnation: 1, From: from}, 28},
		{"dead left (inc 1, a life)", &Dead{Name: name, Incarnation: 1, From: name, Left: true, Life: life}, 36},
		{"ping asking for a life", &Ping{Seq: 1, Target: name, From: from, TargetLife: life}, 35},
		// Signed claims (ProtocolSigned): a key and a signature add 100
		// bytes (two bin8 headers, 32 and 64 bytes), a certificate its
		// length plus its header.
		{"alive (inc 1, a life, signed)", &Alive{Name: name, Addr: testAddr4, Incarnation: 1, Versions: current, Life: life,
			Key: make([]byte, KeyLen), Sig: make([]byte, SigLen)}, 134},
		{"suspect (inc 1, a life, signed)", &Suspect{Name: name, Incarnation: 1, From: from, Life: life, Sig: make([]byte, SigLen)}, 102},
		{"dead left (inc 1, a life, signed)", &Dead{Name: name, Incarnation: 1, From: name, Left: true, Life: life, Sig: make([]byte, SigLen)}, 102},
	}
	for _, tc := range tests {
		p, err := AppendPacket(nil, tc.msg)
		require.NoError(t, err)
		f, err := AppendFrame(nil, tc.msg)
		require.NoError(t, err)
		piggyback := len(f) + 2 // bin8 header in a compound
		t.Logf("%-32s packet %3d bytes, frame %3d, in a compound %3d", tc.name, len(p), len(f), piggyback)
		require.Equal(t, tc.packet, len(p), tc.name)
		require.Equal(t, len(p)-1, len(f))
	}
	frames := [][]byte{}
	for range 10 {
		f, err := AppendFrame(nil, &Alive{Name: name, Addr: testAddr4, Incarnation: 1, Versions: current})
		require.NoError(t, err)
		frames = append(frames, f)
	}
	pf, err := AppendFrame(nil, &Ping{Seq: 1, Target: name, From: from})
	require.NoError(t, err)
	p := AppendCompound(nil, append([][]byte{pf}, frames...))
	t.Logf("ping + 10 alive deltas in one compound: %d bytes", len(p))
	require.Equal(t, 3+(25+2)+10*(25+2), len(p))
}

// TestMsgpackCodes checks that this package's format constants match the
// msgpack library's.
func TestMsgpackCodes(t *testing.T) {
	pairs := []struct {
		ours, lib byte
	}{
		{mpPosFixIntMax, msgpcode.PosFixedNumHigh}, {mpFixMap, msgpcode.FixedMapLow},
		{mpFixArray, msgpcode.FixedArrayLow}, {mpFixStr, msgpcode.FixedStrLow},
		{mpNil, msgpcode.Nil}, {mpFalse, msgpcode.False}, {mpTrue, msgpcode.True},
		{mpBin8, msgpcode.Bin8}, {mpBin16, msgpcode.Bin16}, {mpBin32, msgpcode.Bin32},
		{mpExt8, msgpcode.Ext8}, {mpExt16, msgpcode.Ext16}, {mpExt32, msgpcode.Ext32},
		{mpFloat32, msgpcode.Float}, {mpFloat64, msgpcode.Double},
		{mpUint8, msgpcode.Uint8}, {mpUint16, msgpcode.Uint16}, {mpUint32, msgpcode.Uint32}, {mpUint64, msgpcode.Uint64},
		{mpInt8, msgpcode.Int8}, {mpInt16, msgpcode.Int16}, {mpInt32, msgpcode.Int32}, {mpInt64, msgpcode.Int64},
		{mpFixExt1, msgpcode.FixExt1}, {mpFixExt2, msgpcode.FixExt2}, {mpFixExt4, msgpcode.FixExt4},
		{mpFixExt8, msgpcode.FixExt8}, {mpFixExt16, msgpcode.FixExt16},
		{mpStr8, msgpcode.Str8}, {mpStr16, msgpcode.Str16}, {mpStr32, msgpcode.Str32},
		{mpArray16, msgpcode.Array16}, {mpArray32, msgpcode.Array32},
		{mpMap16, msgpcode.Map16}, {mpMap32, msgpcode.Map32}, {mpNegFixIntMin, msgpcode.NegFixedNumLow},
	}
	for _, p := range pairs {
		require.Equal(t, p.lib, p.ours)
	}
}

// TestMsgpackLibraryInterop checks the hand-written codec against
// vmihailenco/msgpack/v5 in both directions: our bodies are byte-for-byte
// what the library writes for the same struct as an array with compact ints,
// the library reads ours back, and we read the library's non-compact output.
func TestMsgpackLibraryInterop(t *testing.T) {
	var msgs []Message
	for _, g := range allGoldenCases() {
		msgs = append(msgs, g.msgs...)
	}
	msgs = append(msgs,
		&Ping{Seq: math.MaxUint32, Target: strings.Repeat("t", 200), From: ""},
		&Alive{Name: strings.Repeat("n", 40), Addr: testAddr4, Incarnation: math.MaxUint64, Meta: make([]byte, 300)},
		&PushPull{From: "f", Members: make([]MemberState, 20)},
	)
	for _, m := range msgs {
		t.Run(m.Type().String(), func(t *testing.T) {
			frame, err := AppendFrame(nil, m)
			require.NoError(t, err)

			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			enc.UseArrayEncodedStructs(true)
			enc.UseCompactInts(true)
			require.NoError(t, enc.Encode(oracleShape(m)))
			require.Equal(t, hex.EncodeToString(buf.Bytes()), hex.EncodeToString(frame[1:]))

			shape := oracleShape(m)
			back := reflect.New(reflect.TypeOf(shape).Elem()).Interface()
			require.NoError(t, msgpack.Unmarshal(frame[1:], back))
			require.Equal(t, shape, back)

			buf.Reset()
			enc = msgpack.NewEncoder(&buf)
			enc.UseArrayEncodedStructs(true) // fixed-width ints this time
			require.NoError(t, enc.Encode(shape))
			got, err := DecodeFrame(append([]byte{byte(m.Type())}, buf.Bytes()...))
			require.NoError(t, err)
			require.Equal(t, m, got)
		})
	}
}

// oracleShape is the struct the library encodes as m is written: a Ping
// that asks for no life is written without its fourth field, and claims
// without their trailing proof fields when unsigned (a Cert only when
// set).
func oracleShape(m Message) any {
	switch m := m.(type) {
	case *Ping:
		if m.TargetLife == 0 {
			return &struct {
				Seq          uint32
				Target, From string
			}{m.Seq, m.Target, m.From}
		}
	case *Alive:
		switch proofFields(m.Key, m.Sig, m.Cert) {
		case 0:
			return &aliveShape{m.Name, m.Addr, m.Incarnation, m.Meta, m.Versions, m.Life}
		case 2:
			return &struct {
				aliveShape
				Key, Sig []byte
			}{aliveShape{m.Name, m.Addr, m.Incarnation, m.Meta, m.Versions, m.Life}, m.Key, m.Sig}
		}
	case *Suspect:
		if len(m.Sig) == 0 {
			return &struct {
				Name        string
				Incarnation uint64
				From        string
				Silence     uint32
				Life        uint64
			}{m.Name, m.Incarnation, m.From, m.Silence, m.Life}
		}
	case *Dead:
		if len(m.Sig) == 0 {
			return &struct {
				Name        string
				Incarnation uint64
				From        string
				Left        bool
				Life        uint64
			}{m.Name, m.Incarnation, m.From, m.Left, m.Life}
		}
	case *PushPull:
		unsigned := true
		for _, ms := range m.Members {
			unsigned = unsigned && proofFields(ms.Key, ms.Sig, ms.Cert) == 0
		}
		if unsigned {
			ms := make([]memberShape, len(m.Members))
			for i, x := range m.Members {
				ms[i] = memberShape{x.Name, x.Addr, x.Incarnation, x.State, x.Meta, x.Versions, x.Life}
			}
			return &struct {
				From    string
				Join    bool
				Members []memberShape
			}{m.From, m.Join, ms}
		}
	}
	return m
}

type aliveShape struct {
	Name        string
	Addr        []byte
	Incarnation uint64
	Meta        []byte
	Versions    Versions
	Life        uint64
}

type memberShape struct {
	Name        string
	Addr        []byte
	Incarnation uint64
	State       uint8
	Meta        []byte
	Versions    Versions
	Life        uint64
}

func TestTypeString(t *testing.T) {
	require.Equal(t, "ping", TypePing.String())
	require.Equal(t, "pingReq", TypePingReq.String())
	require.Equal(t, "pushPull", TypePushPull.String())
	require.Equal(t, "Type(42)", Type(42).String())
	err := &DecodeError{Type: TypeAlive, Field: "Name", Err: ErrTooLarge}
	require.Equal(t, "wire: decode alive Name: exceeds size limit", err.Error())
	require.Equal(t, "wire: decode: input truncated", (&DecodeError{Err: ErrTruncated}).Error())
}

// TestGoldenProtocol1: what members that predate versioning send (their
// Alive and push-pull entries carry no Versions) still decodes to the same
// messages, with Versions zero.
func TestGoldenProtocol1(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(goldenDir, "protocol1", tc.name+".hex"))
			require.NoError(t, err)
			msgs, err := DecodePacket(unhex(t, string(data)))
			require.NoError(t, err)
			require.Equal(t, tc.msgs, msgs)
		})
	}
}

// A Broadcast from a release that predates Sent (five fields) still
// decodes, with Sent zero: the delay of its delivery is not known.
func TestBroadcastWithoutSent(t *testing.T) {
	msg, err := DecodeFrame(unhex(t, "0b 95 aa 6e6f64652d3030303032 cf 000001a234295d69 07 a3 6b2f31 c4 01 76"))
	require.NoError(t, err)
	require.Equal(t, &Broadcast{Origin: "node-00002", Epoch: 1796171455849, Seq: 7, Key: "k/1", Payload: []byte("v")}, msg)
}

// A newer peer's trailing fields are skipped and counted per message; a
// newer kind is an Unknown.
func TestDecodePacketCounted(t *testing.T) {
	packet := unhex(t, "01 09 93"+
		" c4 0b 05 97 a1 6e c0 07 c0 12 00 a1 78"+ // an alive with a field after Life
		" c4 03 3f 91 00"+ // a kind from a newer protocol
		" c4 04 03 92 2a 00") // an ack with a second field
	msgs, unknownFields, err := DecodePacketCounted(packet)
	require.NoError(t, err)
	require.Equal(t, 2, unknownFields)
	require.Equal(t, []Message{
		&Alive{Name: "n", Incarnation: 7, Versions: Versions{ProtocolMin: 1, ProtocolMax: 2}},
		&Unknown{Kind: 0x3f},
		&Ack{Seq: 42},
	}, msgs)
	_, unknownFields, err = DecodePacketCounted(unhex(t, "01 03 91 2a"))
	require.NoError(t, err)
	require.Zero(t, unknownFields)
}

// A PacketDecoder decodes what DecodePacketCounted does, packet after
// packet into the same memory, and allocates only the messages' strings
// and byte fields.
func TestPacketDecoderReusesItsMemory(t *testing.T) {
	var pd PacketDecoder
	var packets [][]byte
	for _, g := range allGoldenCases() {
		packets = append(packets, encodeMessages(t, g.msgs))
	}
	for round := range 2 {
		for i, b := range packets {
			want, wantUnknown, wantErr := DecodePacketCounted(b)
			got, gotUnknown, gotErr := pd.Decode(b)
			require.Equal(t, wantErr, gotErr, "round %d, packet %d", round, i)
			require.Equal(t, want, got, "round %d, packet %d", round, i)
			require.Equal(t, wantUnknown, gotUnknown)
		}
	}

	var alives []Message
	for i := range 10 {
		alives = append(alives, &Alive{Name: fmt.Sprintf("member-%d", i), Addr: []byte{1, 2, 3, 4, 0x1e, 0x61}, Incarnation: uint64(i)})
	}
	compound := encodeMessages(t, alives)
	fresh := testing.AllocsPerRun(100, func() { _, _, _ = DecodePacketCounted(compound) })
	reused := testing.AllocsPerRun(100, func() { _, _, _ = pd.Decode(compound) })
	t.Logf("a compound of 10 alives: %.0f allocations, %.0f with a PacketDecoder", fresh, reused)
	require.Equal(t, float64(len(alives)), reused, "one per alive, for its name and address")
	require.Less(t, reused, fresh)
}

// TestTreeIDsBounded: an IHave or Graft over MaxTreeIDs is refused on both
// ends, and a count its bytes cannot hold is refused before allocation.
func TestTreeIDsBounded(t *testing.T) {
	_, err := AppendFrame(nil, &IHave{IDs: make([]uint64, MaxTreeIDs+1)})
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = AppendFrame(nil, &Graft{IDs: make([]uint64, MaxTreeIDs+1)})
	require.ErrorIs(t, err, ErrTooLarge)

	// Hand-built: an array of MaxTreeIDs+1 zeros.
	body := []byte{byte(TypeIHave), 0x91, mpArray16, byte((MaxTreeIDs + 1) >> 8), byte((MaxTreeIDs + 1) & 0xff)}
	body = append(body, make([]byte, MaxTreeIDs+1)...)
	_, err = DecodeFrame(body)
	require.ErrorIs(t, err, ErrTooLarge)

	// A count of 1000 with two bytes behind it.
	short := []byte{byte(TypeGraft), 0x91, mpArray16, 0x03, 0xe8, 0x01, 0x02}
	_, err = DecodeFrame(short)
	require.Error(t, err)
}

// TestGraftOriginsBounded: a Graft naming more than MaxGraftOrigins
// origins, or an origin longer than a name, is refused on both ends; a
// Graft of the first form (identifiers only) still decodes.
func TestGraftOriginsBounded(t *testing.T) {
	_, err := AppendFrame(nil, &Graft{Origins: make([]string, MaxGraftOrigins+1)})
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = AppendFrame(nil, &Graft{Origins: []string{strings.Repeat("o", MaxNameLen+1)}})
	require.ErrorIs(t, err, ErrTooLarge)

	body := []byte{byte(TypeGraft), 0x92, mpNil, 0xdc, 0, MaxGraftOrigins + 1}
	for range MaxGraftOrigins + 1 {
		body = append(body, 0xa0) // ""
	}
	_, err = DecodeFrame(body)
	require.ErrorIs(t, err, ErrTooLarge)

	long := []byte{byte(TypeGraft), 0x92, mpNil, 0x91, mpStr16, 0x01, 0x00}
	long = append(long, make([]byte, 256)...)
	_, err = DecodeFrame(long)
	require.ErrorIs(t, err, ErrTooLarge)

	first, err := DecodeFrame([]byte{byte(TypeGraft), 0x91, 0x91, 0x07})
	require.NoError(t, err)
	require.Equal(t, &Graft{IDs: []uint64{7}}, first)
}
