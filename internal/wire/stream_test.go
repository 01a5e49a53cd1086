package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStreamRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	var packets [][]byte
	for _, g := range goldenCases() {
		p := encodeMessages(t, g.msgs)
		packets = append(packets, p)
		require.NoError(t, WriteStreamMessage(&buf, p))
	}
	big := make([]byte, 5*streamReadChunk+123) // grows the read buffer several times
	for i := range big {
		big[i] = byte(i)
	}
	packets = append(packets, big)
	require.NoError(t, WriteStreamMessage(&buf, big))

	for _, want := range packets {
		got, err := ReadStreamMessage(&buf, 0)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ReadStreamMessage(&buf, 0)
	require.Equal(t, io.EOF, err, "a clean end between messages is io.EOF")
}

func TestStreamFraming(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteStreamMessage(&buf, []byte{1, 3, 0x91, 0x2a}))
	require.Equal(t, []byte{0, 0, 0, 4, 1, 3, 0x91, 0x2a}, buf.Bytes())
}

func TestStreamOverNetConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	p, err := AppendPacket(nil, &PushPull{From: "a", Members: []MemberState{{Name: "b", Addr: testAddr4}}})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- WriteStreamMessage(a, p) }()
	got, err := ReadStreamMessage(b, 1<<20)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	require.Equal(t, p, got)
}

func TestReadStreamMessageRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want error
	}{
		{"cut length", "00 00", 0, ErrTruncated},
		{"cut body", "00 00 00 05 01 03", 0, ErrTruncated},
		{"zero length", "00 00 00 00", 0, ErrMalformed},
		{"over max", "00 00 00 05 01 03 91 2a 00", 4, ErrTooLarge},
		{"over MaxStreamMessageSize", "02 00 00 01", 0, ErrTooLarge},
		{"over MaxStreamMessageSize, larger max", "02 00 00 01", 1 << 30, ErrTooLarge},
		{"4 GiB", "ff ff ff ff", 0, ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := bytes.NewReader(unhex(t, tc.in))
			got, err := ReadStreamMessage(r, tc.max)
			require.Nil(t, got)
			requireDecodeError(t, err, tc.want)
			if tc.want == ErrTruncated {
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			}
		})
	}

	t.Run("at max is fine", func(t *testing.T) {
		got, err := ReadStreamMessage(bytes.NewReader(unhex(t, "00 00 00 04 01 03 91 2a")), 4)
		require.NoError(t, err)
		require.Equal(t, unhex(t, "01 03 91 2a"), got)
	})
	t.Run("reader errors pass through", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := ReadStreamMessage(io.MultiReader(bytes.NewReader([]byte{0, 0, 0, 9, 1}), errReader{boom}), 0)
		require.ErrorIs(t, err, boom)
		_, err = ReadStreamMessage(errReader{boom}, 0)
		require.ErrorIs(t, err, boom)
	})
	t.Run("a silent peer costs one chunk", func(t *testing.T) {
		// The length is legal but the body never comes: memory must track
		// what arrived, not what was announced.
		in := []byte{0x01, 0xff, 0xff, 0xff, 1, 2, 3}
		allocated := bytesAllocated(func() {
			_, err := ReadStreamMessage(bytes.NewReader(in), 0)
			requireDecodeError(t, err, ErrTruncated)
		})
		require.Less(t, allocated, uint64(2*streamReadChunk))
	})
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestWriteStreamMessageRejects(t *testing.T) {
	var buf bytes.Buffer
	require.ErrorIs(t, WriteStreamMessage(&buf, nil), ErrTruncated)
	require.ErrorIs(t, WriteStreamMessage(&buf, make([]byte, MaxStreamMessageSize+1)), ErrTooLarge)
	require.Zero(t, buf.Len())

	boom := errors.New("boom")
	require.ErrorIs(t, WriteStreamMessage(errWriter{boom}, []byte{1}), boom)
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }
