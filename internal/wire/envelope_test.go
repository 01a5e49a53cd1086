package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testAEAD returns AES-GCM under a key of n bytes filled with fill.
func testAEAD(t testing.TB, n int, fill byte) cipher.AEAD {
	t.Helper()
	block, err := aes.NewCipher(bytes.Repeat([]byte{fill}, n))
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	return aead
}

// testPacket is a plain packet as the Machine sends it.
func testPacket(t testing.TB) []byte {
	return encodeMessages(t, []Message{
		&Ping{Seq: 7, Target: "node-00001", From: "node-00002"},
		&Alive{Name: "node-00004", Addr: testAddr4, Incarnation: 2},
	})
}

// requireEnvelopeError checks that err is an *EnvelopeError of kind
// wrapping want, about the label header or not.
func requireEnvelopeError(t *testing.T, err error, kind EnvelopeKind, want error, label bool) {
	t.Helper()
	var ee *EnvelopeError
	require.True(t, errors.As(err, &ee), "want *EnvelopeError, got %T: %v", err, err)
	require.ErrorIs(t, err, want)
	require.Equal(t, kind, ee.Kind)
	require.Equal(t, label, ee.Label, "Label of %v", err)
}

func TestEnvelopeMarkersAreNotVersion(t *testing.T) {
	for _, m := range []byte{LabelMarker, SealedPacketMarker, SealedStreamMarker} {
		require.NotEqual(t, Version, m)
	}
	require.NotEqual(t, SealedPacketMarker, SealedStreamMarker)
	require.NotEqual(t, LabelMarker, SealedPacketMarker)
	require.NotEqual(t, LabelMarker, SealedStreamMarker)
}

// TestEnvelopeRoundTrip: every combination of label, key and kind opens to
// the packet it sealed, and its size is the packet's plus at most
// EnvelopeOverhead (exactly, when sealed).
func TestEnvelopeRoundTrip(t *testing.T) {
	k16, k24, k32 := testAEAD(t, 16, 1), testAEAD(t, 24, 2), testAEAD(t, 32, 3)
	pkt := testPacket(t)
	for _, kind := range []EnvelopeKind{PacketEnvelope, StreamEnvelope} {
		for _, label := range []string{"", "a", "prod-eu", strings.Repeat("x", MaxLabelLen)} {
			for name, key := range map[string]cipher.AEAD{"plain": nil, "aes128": k16, "aes192": k24, "aes256": k32} {
				t.Run(fmt.Sprintf("%s/%s/label%d", kind, name, len(label)), func(t *testing.T) {
					env, err := AppendEnvelope(nil, kind, label, key, pkt)
					require.NoError(t, err)
					want := len(pkt)
					if label != "" {
						want += 2 + len(label)
					}
					if key != nil {
						want += 1 + NonceSize + TagSize
						require.Equal(t, len(pkt)+EnvelopeOverhead(len(label)), len(env))
					}
					require.Equal(t, want, len(env))
					require.LessOrEqual(t, len(env), len(pkt)+EnvelopeOverhead(len(label)))
					if label == "" && key == nil {
						require.Equal(t, pkt, env, "no label, no key: no envelope")
					} else {
						require.NotEqual(t, Version, env[0], "an envelope must not look like a plain packet")
					}
					// Undecodable by a decoder that knows no envelope,
					// unless there is no envelope at all.
					if label != "" || key != nil {
						_, err := DecodePacket(env)
						requireDecodeError(t, err, ErrVersion)
					}

					keys := []cipher.AEAD{k16, k24, k32}
					got, err := OpenEnvelope(nil, bytes.Clone(env), kind, label, keys, key == nil)
					require.NoError(t, err)
					require.Equal(t, pkt, got)
					if key != nil {
						// In place, with the one key that opens it.
						got, err = OpenEnvelope(nil, bytes.Clone(env), kind, label, []cipher.AEAD{key}, false)
						require.NoError(t, err)
						require.Equal(t, pkt, got)
						// Into a buffer of the caller's.
						got, err = OpenEnvelope(make([]byte, 0, 8), env, kind, label, keys, false)
						require.NoError(t, err)
						require.Equal(t, pkt, got)
					}
				})
			}
		}
	}
}

// TestEnvelopeRefusals: each way an envelope can be wrong is refused with
// its own error, counted against the label header or the rest.
func TestEnvelopeRefusals(t *testing.T) {
	k1, k2 := testAEAD(t, 16, 1), testAEAD(t, 32, 2)
	pkt := testPacket(t)
	seal := func(kind EnvelopeKind, label string, key cipher.AEAD) []byte {
		env, err := AppendEnvelope(nil, kind, label, key, pkt)
		require.NoError(t, err)
		return env
	}
	sealedL := seal(PacketEnvelope, "L", k1)
	tests := []struct {
		name   string
		in     []byte
		kind   EnvelopeKind
		label  string
		keys   []cipher.AEAD
		plain  bool
		want   error
		inHead bool // the fault is in the label header
	}{
		{"plaintext refused", pkt, PacketEnvelope, "", []cipher.AEAD{k1}, false, ErrPlaintext, false},
		{"labelled plaintext refused", seal(PacketEnvelope, "L", nil), PacketEnvelope, "L", []cipher.AEAD{k1}, false, ErrPlaintext, false},
		{"label missing", pkt, PacketEnvelope, "L", nil, true, ErrLabelMissing, true},
		{"label missing, sealed", seal(PacketEnvelope, "", k1), PacketEnvelope, "L", []cipher.AEAD{k1}, false, ErrLabelMissing, true},
		{"another label", seal(PacketEnvelope, "M", nil), PacketEnvelope, "L", nil, true, ErrLabelMismatch, true},
		{"a longer label", seal(PacketEnvelope, "LL", nil), PacketEnvelope, "L", nil, true, ErrLabelMismatch, true},
		{"another label, sealed", seal(PacketEnvelope, "M", k1), PacketEnvelope, "L", []cipher.AEAD{k1}, false, ErrLabelMismatch, true},
		{"unexpected label", seal(PacketEnvelope, "L", nil), PacketEnvelope, "", nil, true, ErrLabelUnexpected, true},
		{"empty label", []byte{LabelMarker, 0, Version, 1}, PacketEnvelope, "L", nil, true, ErrMalformed, true},
		{"label header cut", []byte{LabelMarker}, PacketEnvelope, "L", nil, true, ErrTruncated, true},
		{"label cut", []byte{LabelMarker, 3, 'L'}, PacketEnvelope, "L", nil, true, ErrTruncated, true},
		{"nothing after the label", []byte{LabelMarker, 1, 'L'}, PacketEnvelope, "L", nil, true, ErrTruncated, false},
		{"wrong key", sealedL, PacketEnvelope, "L", []cipher.AEAD{k2}, false, ErrNoKey, false},
		{"wrong key, plaintext accepted", sealedL, PacketEnvelope, "L", []cipher.AEAD{k2}, true, ErrNoKey, false},
		{"no key installed", sealedL, PacketEnvelope, "L", nil, true, ErrNoKey, false},
		{"stream replayed as a packet", seal(StreamEnvelope, "L", k1), PacketEnvelope, "L", []cipher.AEAD{k1}, false, ErrNoKey, false},
		{"packet replayed on a stream", sealedL, StreamEnvelope, "L", []cipher.AEAD{k1}, false, ErrNoKey, false},
		{"marker flipped to the stream's", func() []byte {
			b := bytes.Clone(sealedL)
			b[3] = SealedStreamMarker
			return b
		}(), StreamEnvelope, "L", []cipher.AEAD{k1}, false, ErrNoKey, false},
		{"label changed under the seal", func() []byte {
			b := bytes.Clone(sealedL)
			b[2] = 'M'
			return b
		}(), PacketEnvelope, "M", []cipher.AEAD{k1}, false, ErrNoKey, false},
		{"label stripped from a sealed packet", sealedL[3:], PacketEnvelope, "", []cipher.AEAD{k1}, false, ErrNoKey, false},
		{"label added to a sealed packet", append([]byte{LabelMarker, 1, 'L'}, seal(PacketEnvelope, "", k1)...), PacketEnvelope, "L", []cipher.AEAD{k1}, false, ErrNoKey, false},
		{"ciphertext flipped", func() []byte {
			b := bytes.Clone(sealedL)
			b[len(b)-TagSize-1] ^= 1
			return b
		}(), PacketEnvelope, "L", []cipher.AEAD{k1, k2}, false, ErrNoKey, false},
		{"tag cut", sealedL[:len(sealedL)-1], PacketEnvelope, "L", []cipher.AEAD{k1}, false, ErrNoKey, false},
		{"sealed part too short", sealedL[:3+sealOverhead-1], PacketEnvelope, "L", []cipher.AEAD{k1}, false, ErrTruncated, false},
		{"marker alone", []byte{SealedPacketMarker}, PacketEnvelope, "", []cipher.AEAD{k1}, false, ErrTruncated, false},
		{"empty", nil, PacketEnvelope, "", []cipher.AEAD{k1}, false, ErrTruncated, false},
		{"empty, label expected", nil, PacketEnvelope, "L", nil, true, ErrLabelMissing, true},
		{"invalid kind", pkt, EnvelopeKind(9), "", nil, true, ErrMalformed, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.in)
			got, err := OpenEnvelope(nil, in, tc.kind, tc.label, tc.keys, tc.plain)
			require.Nil(t, got)
			requireEnvelopeError(t, err, tc.kind, tc.want, tc.inHead)
			require.Contains(t, err.Error(), "envelope")
		})
	}
}

// TestEnvelopeTriesKeysInOrder: during a rotation a member holds several
// keys; traffic under any of them opens, whichever is primary, also with
// keys that fail before the one that works (a failed Open must not spoil
// the input for the next key).
func TestEnvelopeTriesKeysInOrder(t *testing.T) {
	k1, k2, k3 := testAEAD(t, 16, 1), testAEAD(t, 24, 2), testAEAD(t, 32, 3)
	pkt := testPacket(t)
	for i, key := range []cipher.AEAD{k1, k2, k3} {
		env, err := AppendEnvelope(nil, PacketEnvelope, "", key, pkt)
		require.NoError(t, err)
		got, err := OpenEnvelope(nil, env, PacketEnvelope, "", []cipher.AEAD{k1, k2, k3}, false)
		require.NoError(t, err, "key %d", i)
		require.Equal(t, pkt, got)
		got, err = OpenEnvelope(nil, env, PacketEnvelope, "", []cipher.AEAD{nil, k3, k2, k1}, false)
		require.NoError(t, err, "key %d, reversed", i)
		require.Equal(t, pkt, got)
	}
}

// TestEnvelopeNoncesDiffer: two seals of one packet differ (fresh nonces),
// so equal packets are not visible as such on the wire.
func TestEnvelopeNoncesDiffer(t *testing.T) {
	k := testAEAD(t, 16, 1)
	pkt := testPacket(t)
	seen := make(map[string]bool)
	for range 1000 {
		env, err := AppendEnvelope(nil, PacketEnvelope, "", k, pkt)
		require.NoError(t, err)
		nonce := string(env[1 : 1+NonceSize])
		require.False(t, seen[nonce], "nonce repeated")
		seen[nonce] = true
	}
}

func TestAppendEnvelopeRefusesCallerMistakes(t *testing.T) {
	k := testAEAD(t, 16, 1)
	_, err := AppendEnvelope(nil, PacketEnvelope, strings.Repeat("x", MaxLabelLen+1), k, []byte{Version})
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = AppendEnvelope(nil, EnvelopeKind(0), "", k, []byte{Version})
	require.Error(t, err)
	block, err := aes.NewCipher(make([]byte, 16))
	require.NoError(t, err)
	short, err := cipher.NewGCMWithTagSize(block, 12)
	require.NoError(t, err)
	_, err = AppendEnvelope(nil, PacketEnvelope, "", short, []byte{Version})
	require.Error(t, err)
	// Such an AEAD is skipped when opening, not called.
	env, err := AppendEnvelope(nil, PacketEnvelope, "", k, []byte{Version})
	require.NoError(t, err)
	_, err = OpenEnvelope(nil, env, PacketEnvelope, "", []cipher.AEAD{short}, false)
	require.ErrorIs(t, err, ErrNoKey)
	_, err = AppendLabel(nil, strings.Repeat("x", MaxLabelLen+1))
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestCutLabel(t *testing.T) {
	label, rest, err := CutLabel([]byte{LabelMarker, 2, 'a', 'b', Version, 9})
	require.NoError(t, err)
	require.Equal(t, []byte("ab"), label)
	require.Equal(t, []byte{Version, 9}, rest)

	label, rest, err = CutLabel([]byte{Version, 9})
	require.NoError(t, err)
	require.Nil(t, label)
	require.Equal(t, []byte{Version, 9}, rest)

	hdr, err := AppendLabel([]byte{0xee}, "ab")
	require.NoError(t, err)
	require.Equal(t, []byte{0xee, LabelMarker, 2, 'a', 'b'}, hdr)
	hdr, err = AppendLabel(nil, "")
	require.NoError(t, err)
	require.Empty(t, hdr)

	for _, in := range [][]byte{{LabelMarker}, {LabelMarker, 0}, {LabelMarker, 5, 'a'}} {
		_, _, err := CutLabel(in)
		var ee *EnvelopeError
		require.True(t, errors.As(err, &ee), "%x: %v", in, err)
		require.True(t, ee.Label)
	}
}

// TestEnvelopeAllocations: sealing into a buffer with room and opening in
// place or into a buffer with room allocate nothing.
func TestEnvelopeAllocations(t *testing.T) {
	k := testAEAD(t, 32, 1)
	pkt := bytes.Repeat([]byte{Version}, 1400)
	dst := make([]byte, 0, 1400+EnvelopeOverhead(8))
	var env []byte
	allocs := testing.AllocsPerRun(100, func() {
		env, _ = AppendEnvelope(dst[:0], PacketEnvelope, "cluster8", k, pkt)
	})
	require.Zero(t, allocs, "seal")
	require.Len(t, env, 1400+EnvelopeOverhead(8))

	other := testAEAD(t, 16, 9)
	in := make([]byte, len(env))
	out := make([]byte, 0, len(env))
	allocs = testing.AllocsPerRun(100, func() {
		copy(in, env)
		got, err := OpenEnvelope(nil, in, PacketEnvelope, "cluster8", []cipher.AEAD{k}, false)
		if err != nil || len(got) != 1400 {
			t.Fatal("open in place failed", err)
		}
		got, err = OpenEnvelope(out[:0], env, PacketEnvelope, "cluster8", []cipher.AEAD{other, k}, false)
		if err != nil || len(got) != 1400 {
			t.Fatal("open into a buffer failed", err)
		}
	})
	require.Zero(t, allocs, "open")
}
