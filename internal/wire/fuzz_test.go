package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
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
	for _, g := range goldenCases() {
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
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodePacket(b)
		if err != nil {
			requireDecodeError(t, err, nil)
			return
		}
		require.LessOrEqual(t, len(msgs), MaxCompoundParts)
		// Re-encoding is canonical (smallest ints, nil for empty bytes, no
		// unknown fields), so it is never longer than the input and must
		// decode under the same packet limit.
		again := encodeMessages(t, msgs)
		require.LessOrEqual(t, len(again), len(b))
		msgs2, err := DecodePacket(again)
		require.NoError(t, err)
		require.Equal(t, msgs, msgs2)
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
		require.LessOrEqual(t, len(frame), len(b))
		m2, err := DecodeFrame(frame)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
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
