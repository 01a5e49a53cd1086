package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Shared fixtures of the wire tests, fuzz targets and benchmarks.

var (
	testAddr4 = EncodeAddr(netip.MustParseAddrPort("10.0.0.1:7946"))
	testAddr6 = EncodeAddr(netip.MustParseAddrPort("[2001:db8::1]:7946"))
)

// golden is one checked-in vector: name.hex under testdata/wire holds the
// packet, and msgs is what it decodes to.
type golden struct {
	name string
	msgs []Message
}

// goldenCases are the messages whose exact bytes are pinned in testdata/wire.
// Changing any of them, or the encoding, means regenerating the files with
// -update and reviewing the diff: the bytes are the protocol.
func goldenCases() []golden {
	return []golden{
		{"ping", []Message{&Ping{Seq: 42, Target: "node-00001", From: "node-00002"}}},
		{"pingreq", []Message{&PingReq{Seq: 300, Target: "node-00003", TargetAddr: testAddr4, From: "node-00002"}}},
		{"ack", []Message{&Ack{Seq: 42}}},
		{"nack", []Message{&Nack{Seq: 70000}}},
		{"alive", []Message{&Alive{Name: "node-00001", Addr: testAddr4, Incarnation: 1, Meta: []byte(`{"zone":"a"}`)}}},
		{"alive6", []Message{&Alive{Name: "node-00001", Addr: testAddr6, Incarnation: 200}}},
		{"suspect", []Message{&Suspect{Name: "node-00001", Incarnation: 3, From: "node-00002"}}},
		{"dead", []Message{&Dead{Name: "node-00001", Incarnation: 4, From: "node-00002", Left: true}}},
		{"pushpull", []Message{&PushPull{From: "node-00002", Join: true, Members: []MemberState{
			{Name: "node-00001", Addr: testAddr4, Incarnation: 1, State: 0, Meta: []byte("m")},
			{Name: "node-00002", Addr: testAddr6, Incarnation: 300, State: 1},
			{Name: "node-00003", Addr: testAddr4, Incarnation: 1 << 40, State: 3},
		}}}},
		{"compound", []Message{
			&Ping{Seq: 7, Target: "node-00001", From: "node-00002"},
			&Alive{Name: "node-00004", Addr: testAddr4, Incarnation: 2},
			&Suspect{Name: "node-00005", Incarnation: 9, From: "node-00002"},
		}},
	}
}

// protocol3Cases are the golden vectors of the kinds protocol 3 added
// (ProtocolUser), which members speaking less never send.
func protocol3Cases() []golden {
	return []golden{
		{"user", []Message{&User{From: "node-00002", Payload: []byte("hello")}}},
		{"broadcast", []Message{&Broadcast{Origin: "node-00002", Epoch: 1796171455849, Seq: 7, Key: "k/1", Payload: []byte("v"), Sent: 1796171460123}}},
		{"ack-payload", []Message{&Ack{Seq: 42}, &AckPayload{Seq: 42, Payload: []byte{1, 2, 3, 4}}}},
		{"broadcast-compound", []Message{
			&Ack{Seq: 9},
			&Broadcast{Origin: "node-00003", Epoch: 1796171455000, Seq: 70000, Payload: []byte{0, 1, 2}},
			&Alive{Name: "node-00004", Addr: testAddr4, Incarnation: 2},
		}},
	}
}

// protocol4Cases are the golden vectors of the kinds protocol 4 added
// (ProtocolPaired).
func protocol4Cases() []golden {
	return []golden{
		{"view-digest", []Message{&ViewDigest{Live: 2048, Digest: 0x9e3779b9}}},
		{"heartbeat-view-digest", []Message{
			&Heartbeat{From: "node-00002"},
			&ViewDigest{Live: 64, Digest: 0x1234abcd},
		}},
		{"heartbeat", []Message{&Heartbeat{From: "node-00002"}}},
		{"heartbeat-compound", []Message{
			&Heartbeat{From: "node-00003"},
			&Suspect{Name: "node-00005", Incarnation: 9, From: "node-00003"},
		}},
	}
}

// protocol6Cases are the golden vectors of the kinds protocol 6 added
// (ProtocolTree).
func protocol6Cases() []golden {
	return []golden{
		{"ihave", []Message{&IHave{IDs: []uint64{1, 0x9e3779b97f4a7c15, 1 << 40}}}},
		{"graft", []Message{&Graft{IDs: []uint64{0xfedcba9876543210}}}},
		{"graft-origins", []Message{&Graft{Origins: []string{"", "node-00003"}}}},
		{"prune", []Message{&Prune{Origin: "node-00009"}}},
		{"tree-compound", []Message{
			&Broadcast{Origin: "node-00003", Epoch: 1796171455000, Seq: 12, Payload: []byte{4, 5}},
			&Broadcast{Origin: "node-00007", Epoch: 1796171455001, Seq: 3, Key: "k", Payload: []byte{6}},
			&IHave{IDs: []uint64{0x0123456789abcdef}},
			&Prune{Origin: "node-00003"},
		}},
	}
}

// protocol7Cases are the golden vectors of the fields protocol 7 added
// (ProtocolLife).
func protocol7Cases() []golden {
	const life = 1796171455000<<16 | 0x2f1d
	return []golden{
		{"ping-life", []Message{&Ping{Seq: 42, Target: "node-00001", From: "node-00002", TargetLife: life}}},
		{"alive-life", []Message{&Alive{Name: "node-00001", Addr: testAddr4, Incarnation: 1,
			Versions: Versions{ProtocolMin: 1, ProtocolMax: 7}, Life: life}}},
		{"suspect-life", []Message{&Suspect{Name: "node-00001", Incarnation: 3, From: "node-00002", Silence: 700, Life: life}}},
		{"dead-life", []Message{&Dead{Name: "node-00001", Incarnation: 4, From: "node-00001", Left: true, Life: life}}},
		{"pushpull-life", []Message{&PushPull{From: "node-00002", Members: []MemberState{
			{Name: "node-00001", Addr: testAddr4, Incarnation: 1, Versions: Versions{ProtocolMin: 1, ProtocolMax: 7}, Life: life},
		}}}},
	}
}

// protocol8Cases are the signed claims of ProtocolSigned. The key,
// signature and certificate are fixed patterns: the codec does not read
// them.
func protocol8Cases() []golden {
	const life = 1796171455000<<16 | 0x2f1d
	key := bytes.Repeat([]byte{0x4b}, KeyLen)
	sig := bytes.Repeat([]byte{0x53}, SigLen)
	cert := bytes.Repeat([]byte{0x43}, 120)
	v := Versions{ProtocolMin: 1, ProtocolMax: 8}
	return []golden{
		{"alive-signed", []Message{&Alive{Name: "node-00001", Addr: testAddr4, Incarnation: 1, Versions: v, Life: life, Key: key, Sig: sig}}},
		{"alive-certified", []Message{&Alive{Name: "node-00001", Addr: testAddr4, Incarnation: 1, Versions: v, Life: life, Key: key, Sig: sig, Cert: cert}}},
		{"suspect-signed", []Message{&Suspect{Name: "node-00001", Incarnation: 3, From: "node-00002", Silence: 700, Life: life, Sig: sig}}},
		{"dead-signed", []Message{&Dead{Name: "node-00001", Incarnation: 4, From: "node-00001", Left: true, Life: life, Sig: sig}}},
		{"refusal", []Message{&Refusal{Reason: "certificate expired"}}},
		{"pushpull-signed", []Message{&PushPull{From: "node-00002", Members: []MemberState{
			{Name: "node-00001", Addr: testAddr4, Incarnation: 1, Versions: v, Life: life, Key: key, Sig: sig, Cert: cert},
			{Name: "node-00003", Addr: testAddr4, Incarnation: 2, State: 1, Versions: v, Life: life, Key: key, Sig: sig, Cert: cert},
		}}}},
	}
}

// allGoldenCases are the golden vectors of every protocol.
func allGoldenCases() []golden {
	return slices.Concat(goldenCases(), protocol3Cases(), protocol4Cases(), protocol6Cases(), protocol7Cases(), protocol8Cases())
}

// encodeMessages encodes msgs as one packet the way a sender would: a plain
// packet for one message, a compound for several.
func encodeMessages(t testing.TB, msgs []Message) []byte {
	t.Helper()
	frames := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		f, err := AppendFrame(nil, m)
		require.NoError(t, err)
		frames = append(frames, f)
	}
	return AppendCompound(nil, frames)
}

// unhex decodes hex written with optional spaces and newlines.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// requireDecodeError checks that err is a *DecodeError wrapping want.
func requireDecodeError(t testing.TB, err, want error) {
	t.Helper()
	require.Error(t, err)
	var de *DecodeError
	require.True(t, errors.As(err, &de), "want *DecodeError, got %T: %v", err, err)
	if want != nil {
		require.ErrorIs(t, err, want, "got %v", err)
	}
}
