package wire

import (
	"bytes"
	"crypto/cipher"
	"fmt"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

var benchAlive = &Alive{Name: "node-00001", Addr: testAddr4, Incarnation: 1}

func BenchmarkEncodePing(b *testing.B) {
	ping := &Ping{Seq: 1234, Target: "node-00001", From: "node-00002"}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = AppendPacket(buf[:0], ping)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEncodeAlive(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = AppendFrame(buf[:0], benchAlive)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// benchCompound is what a probe usually looks like: a ping carrying ten
// alive deltas.
func benchCompound(b *testing.B) []byte {
	msgs := []Message{&Ping{Seq: 1234, Target: "node-00001", From: "node-00002"}}
	for i := range 10 {
		msgs = append(msgs, &Alive{Name: "node-0001" + string(rune('0'+i)), Addr: testAddr4, Incarnation: uint64(i + 1)})
	}
	return encodeMessages(b, msgs)
}

func BenchmarkEncodeCompound(b *testing.B) {
	ping := &Ping{Seq: 1234, Target: "node-00001", From: "node-00002"}
	frames := make([][]byte, 11)
	for i := range frames {
		frames[i] = make([]byte, 0, 32)
	}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		frames[0], _ = AppendFrame(frames[0][:0], ping)
		for i := 1; i < len(frames); i++ {
			frames[i], _ = AppendFrame(frames[i][:0], benchAlive)
		}
		buf = AppendCompound(buf[:0], frames)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodePacketCompound(b *testing.B) {
	p := benchCompound(b)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePacket(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAck(b *testing.B) {
	p, _ := AppendPacket(nil, &Ack{Seq: 1234})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePacket(p); err != nil {
			b.Fatal(err)
		}
	}
}

func benchPushPull(n int) *PushPull {
	pp := &PushPull{From: "node-00001", Members: make([]MemberState, n)}
	for i := range pp.Members {
		pp.Members[i] = MemberState{Name: "node-00001", Addr: testAddr4, Incarnation: uint64(i), State: uint8(i % 4)}
	}
	return pp
}

func BenchmarkEncodePushPull1000(b *testing.B) {
	pp := benchPushPull(1000)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendPacket(buf[:0], pp)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodePushPull1000(b *testing.B) {
	p, _ := AppendPacket(nil, benchPushPull(1000))
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeStreamPacket(p); err != nil {
			b.Fatal(err)
		}
	}
}

// The library's reflection path, for comparison with the hand-written codec.

func BenchmarkLibraryMarshalAlive(b *testing.B) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseArrayEncodedStructs(true)
	enc.UseCompactInts(true)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(benchAlive); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLibraryUnmarshalAlive(b *testing.B) {
	f, _ := AppendFrame(nil, benchAlive)
	body := f[1:]
	b.ReportAllocs()
	for b.Loop() {
		var a Alive
		if err := msgpack.Unmarshal(body, &a); err != nil {
			b.Fatal(err)
		}
	}
}

// benchEnvelopePacket is a full packet at the default budget.
var benchEnvelopePacket = bytes.Repeat([]byte{Version}, 1400)

// BenchmarkSealEnvelope: sealing a 1,400-byte packet with an 8-byte label,
// per key size, into a reused buffer (as the runtime does per packet).
func BenchmarkSealEnvelope(b *testing.B) {
	for _, n := range []int{16, 32} {
		b.Run(fmt.Sprintf("aes%d", n*8), func(b *testing.B) {
			k := testAEAD(b, n, 1)
			dst := make([]byte, 0, len(benchEnvelopePacket)+EnvelopeOverhead(8))
			b.SetBytes(int64(len(benchEnvelopePacket)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := AppendEnvelope(dst[:0], PacketEnvelope, "cluster8", k, benchEnvelopePacket); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenEnvelope: opening it into a reused buffer, with the key
// that sealed it first, and second (a key rotation in progress).
func BenchmarkOpenEnvelope(b *testing.B) {
	for _, n := range []int{16, 32} {
		k, other := testAEAD(b, n, 1), testAEAD(b, n, 2)
		env, err := AppendEnvelope(nil, PacketEnvelope, "cluster8", k, benchEnvelopePacket)
		if err != nil {
			b.Fatal(err)
		}
		for name, keys := range map[string][]cipher.AEAD{"first": {k}, "second": {other, k}} {
			b.Run(fmt.Sprintf("aes%d/%s", n*8, name), func(b *testing.B) {
				dst := make([]byte, 0, len(env))
				b.SetBytes(int64(len(benchEnvelopePacket)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := OpenEnvelope(dst[:0], env, PacketEnvelope, "cluster8", keys, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
