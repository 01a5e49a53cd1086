package wire

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fuzz targets check the decoders' contract on arbitrary input: no
// panic, failures are *DecodeError, and whatever decodes re-encodes to
// something that decodes to the same value. Regression inputs live in
// testdata/fuzz/<target>.

// seedPackets are the golden vectors plus a few edge shapes.
func seedPackets(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, g := range allGoldenCases() {
		seeds = append(seeds, encodeMessages(t, g.msgs))
	}
	for _, s := range []string{
		"",
		"01",
		"01 09 90",
		"01 09 91 c4 03 03 91 2a",
		"01 03 dc 00 04 2a c0 92 91 90 81 a1 6b c7 01 05 aa",
		"01 05 94 a1 6e c4 00 01 c4 00",
		"01 08 93 a1 66 c3 91 96 a1 6e c0 01 02 c0 a1 78",
	} {
		seeds = append(seeds, unhex(t, s))
	}
	return seeds
}

func FuzzDecodePacket(f *testing.F) {
	for _, s := range seedPackets(f) {
		f.Add(s)
	}
	var mu sync.Mutex
	var reused PacketDecoder // one for all inputs: each decodes into the memory of the last
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodePacket(b)
		mu.Lock()
		viaDecoder, _, errAgain := reused.Decode(b)
		if err == nil {
			require.Equal(t, msgs, viaDecoder, "the PacketDecoder")
		}
		mu.Unlock()
		require.Equal(t, err, errAgain, "the PacketDecoder")
		if err != nil {
			requireDecodeError(t, err, nil)
			return
		}
		require.LessOrEqual(t, len(msgs), MaxCompoundParts)
		// Re-encoding is canonical (smallest ints, nil for empty bytes, no
		// unknown fields), so it is never longer than the input, but for
		// the Versions it adds where a protocol 1 sender left them out, and
		// must decode under the same packet limit. A kind this version
		// does not know (Unknown) cannot be re-encoded: it is left out.
		known := slices.DeleteFunc(slices.Clone(msgs), func(m Message) bool { _, ok := m.(*Unknown); return ok })
		if len(known) == 0 {
			return
		}
		again := encodeMessages(t, known)
		require.LessOrEqual(t, len(again), len(b)+versionsAdded(known))
		msgs2, err := DecodePacket(again)
		require.NoError(t, err)
		require.Equal(t, known, msgs2)
	})
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range seedPackets(f) {
		if len(s) > 1 {
			f.Add(s[1:])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeFrame(b)
		if err != nil {
			requireDecodeError(t, err, nil)
			return
		}
		frame, err := AppendFrame(nil, m)
		require.NoError(t, err)
		require.LessOrEqual(t, len(frame), len(b)+versionsAdded([]Message{m}))
		m2, err := DecodeFrame(frame)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}

// versionsAdded bounds the bytes re-encoding msgs may add to what an
// older sender wrote: a byte for each trailing field it may have left out
// that this version writes, zero as it may be: the Versions and Life of an
// Alive and of each push-pull entry, the Silence and Life of a Suspect,
// the Life of a Dead (array headers stay one byte: none has 15 fields).
func versionsAdded(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		switch m := m.(type) {
		case *Alive, *Suspect:
			n += 2
		case *Dead:
			n++
		case *PushPull:
			n += 2 * len(m.Members)
		}
	}
	return n
}

func FuzzDecodeAddr(f *testing.F) {
	f.Add(testAddr4)
	f.Add(testAddr6)
	f.Add(unhex(f, "00000000000000000000ffff0a0000011f0a"))
	f.Add([]byte{})
	f.Add(make([]byte, 7))
	f.Fuzz(func(t *testing.T, b []byte) {
		ap, err := DecodeAddr(b)
		if err != nil {
			requireDecodeError(t, err, ErrMalformed)
			return
		}
		require.True(t, ap.IsValid())
		enc := EncodeAddr(ap)
		if ap.Addr().Is4() {
			require.Len(t, enc, 6)
		} else {
			require.Len(t, enc, 18)
		}
		ap2, err := DecodeAddr(enc)
		require.NoError(t, err)
		require.Equal(t, ap, ap2)
	})
}

func FuzzReadStreamMessage(f *testing.F) {
	var stream []byte
	for _, p := range seedPackets(f) {
		if len(p) == 0 {
			continue
		}
		stream = binary.BigEndian.AppendUint32(stream, uint32(len(p)))
		stream = append(stream, p...)
		f.Add(stream[len(stream)-4-len(p):], 0)
	}
	f.Add(stream, 0)
	f.Add(stream, 30)
	f.Add([]byte{0, 0, 0, 4, 1, 3, 0x91, 0x2a, 0, 0}, 4)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, -1)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		limit := MaxStreamMessageSize
		if max > 0 && max < limit {
			limit = max
		}
		r := bytes.NewReader(in)
		for {
			p, err := ReadStreamMessage(r, max)
			if err == io.EOF {
				require.Zero(t, r.Len())
				return
			}
			if err != nil {
				var de *DecodeError
				require.True(t, errors.As(err, &de), "%T: %v", err, err)
				return
			}
			require.NotEmpty(t, p)
			require.LessOrEqual(t, len(p), limit)
			// Written back, it reads the same.
			var buf bytes.Buffer
			require.NoError(t, WriteStreamMessage(&buf, p))
			p2, err := ReadStreamMessage(&buf, max)
			require.NoError(t, err)
			require.Equal(t, p, p2)
			// Whatever the stream carried, decoding it must not panic.
			if msgs, err := DecodeStreamPacket(p); err == nil {
				require.NotNil(t, msgs)
			}
		}
	})
}

// Keys and labels of the envelope fuzz targets: which of them a run uses
// comes from the fuzzed byte cfg.
var (
	fuzzLabels = []string{"", "swim"}
)

func fuzzKeys(t testing.TB) [][]cipher.AEAD {
	k1, k2 := testAEAD(t, 16, 1), testAEAD(t, 32, 2)
	return [][]cipher.AEAD{nil, {k1}, {k2, k1}}
}

// seedEnvelopes are valid envelopes of every shape (plain, labelled,
// sealed under either key, either kind) around the seed packets, with a
// few cut short, each with the cfg that opens it.
func seedEnvelopes(t testing.TB) (envs [][]byte, cfgs []uint8) {
	keys := fuzzKeys(t)
	for i, p := range seedPackets(t) {
		if i%3 != 0 && len(p) > 0 {
			continue // a third of them is variety enough
		}
		for _, kind := range []EnvelopeKind{PacketEnvelope, StreamEnvelope} {
			for li, label := range fuzzLabels {
				for ki, key := range []cipher.AEAD{nil, keys[1][0], keys[2][0]} {
					env, err := AppendEnvelope(nil, kind, label, key, p)
					require.NoError(t, err)
					// Key set ki (none, {k1}, {k2, k1}) opens what key ki
					// sealed.
					cfg := uint8(kind-1) | uint8(li)<<1 | uint8(ki)<<2 | boolBit(key == nil)<<4
					envs, cfgs = append(envs, env), append(cfgs, cfg)
					if len(env) > 3 {
						envs, cfgs = append(envs, env[:len(env)/2]), append(cfgs, cfg)
					}
				}
			}
		}
	}
	return envs, cfgs
}

func boolBit(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// FuzzOpenEnvelope: on any input and any receiver settings OpenEnvelope
// does not panic, fails only with an *EnvelopeError, and what it opens
// comes out of AppendEnvelope again: plaintext byte for byte, sealed
// envelopes sealed anew under the receiver's first key.
func FuzzOpenEnvelope(f *testing.F) {
	envs, cfgs := seedEnvelopes(f)
	for i := range envs {
		f.Add(envs[i], cfgs[i])
	}
	f.Add([]byte{LabelMarker, 4, 's', 'w', 'i', 'm', SealedPacketMarker}, uint8(0b01110))
	f.Add([]byte{SealedStreamMarker}, uint8(0b00101))
	keySets := fuzzKeys(f)
	f.Fuzz(func(t *testing.T, b []byte, cfg uint8) {
		kind := EnvelopeKind(cfg&1) + PacketEnvelope
		label := fuzzLabels[cfg>>1&1]
		keys := keySets[int(cfg>>2&3)%len(keySets)]
		plain := cfg>>4&1 == 1
		var dst []byte // nil: in place when there is one key
		if cfg>>5&1 == 1 {
			dst = make([]byte, 0, 4)
		}
		in := bytes.Clone(b)
		out, err := OpenEnvelope(dst, in, kind, label, keys, plain)
		if err != nil {
			var ee *EnvelopeError
			require.True(t, errors.As(err, &ee), "%T: %v", err, err)
			require.Equal(t, kind, ee.Kind)
			require.Nil(t, out)
			return
		}
		_, rest, err := CutLabel(b)
		require.NoError(t, err)
		if rest[0] != kind.marker() {
			require.True(t, plain, "plaintext accepted while refused")
			again, err := AppendEnvelope(nil, kind, label, nil, out)
			require.NoError(t, err)
			require.Equal(t, b, again)
			return
		}
		require.NotEmpty(t, keys)
		require.Equal(t, len(b)-EnvelopeOverhead(len(label)), len(out))
		again, err := AppendEnvelope(nil, kind, label, keys[0], out)
		require.NoError(t, err)
		require.Equal(t, len(b), len(again))
		out2, err := OpenEnvelope(nil, again, kind, label, keys[:1], false)
		require.NoError(t, err)
		require.True(t, bytes.Equal(out, out2), "%x, then %x", out, out2)
	})
}

// FuzzCutLabel: CutLabel does not panic, fails only with an
// *EnvelopeError about the label header, and a header it accepts is
// written back byte for byte by AppendLabel.
func FuzzCutLabel(f *testing.F) {
	envs, _ := seedEnvelopes(f)
	for _, e := range envs {
		f.Add(e)
	}
	f.Add([]byte{LabelMarker})
	f.Add([]byte{LabelMarker, 0})
	f.Add([]byte{LabelMarker, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		label, rest, err := CutLabel(b)
		if err != nil {
			var ee *EnvelopeError
			require.True(t, errors.As(err, &ee), "%T: %v", err, err)
			require.True(t, ee.Label)
			return
		}
		if label == nil {
			require.Equal(t, b, rest)
			return
		}
		require.NotEmpty(t, label)
		hdr, err := AppendLabel(nil, string(label))
		require.NoError(t, err)
		require.Equal(t, b, append(hdr, rest...))
	})
}
