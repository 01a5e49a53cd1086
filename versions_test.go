package swim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// A packet from a newer release: a compound holding a kind this version
// does not know and an alive with a field after its Versions. The packet
// is not rejected: the known messages are applied, the rest is skipped and
// counted.
func TestNewerPeerKindsAndFieldsSkipped(t *testing.T) {
	h := newMT(t, mtConfig())
	h.joinPeers(3, 1)
	alive, err := wire.AppendFrame(nil, &wire.Alive{Name: mtPeer(1), Addr: wire.EncodeAddr(mtPeerAddr(1)), Incarnation: 5,
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: 3}})
	require.NoError(t, err)
	// One more field, as a newer release would append it: the array
	// header grows by one, a string follows the Versions.
	alive[1]++
	alive = append(alive, 0xa1, 'x')
	newer := []byte{0x3f, 0x91, 0x00} // kind 63, from a protocol to come, with a body of its own
	data := wire.AppendCompound(nil, [][]byte{newer, alive})

	require.NoError(t, h.m.HandlePacket(h.now, mtPeerAddr(1), data))
	mem, _ := h.m.Member(mtPeer(1))
	require.Equal(t, uint64(5), mem.Incarnation, "the alive was applied")
	require.Equal(t, Versions{ProtocolMin: 1, ProtocolMax: 3}, mem.Versions)
	st := h.m.Stats()
	require.Equal(t, uint64(1), st.UnknownMessages)
	require.Equal(t, uint64(1), st.UnknownFields)
	require.Zero(t, st.PacketsDropped)
}

// What a member speaks is learned from its alive and its push-pull entry. A
// new incarnation relayed by a member that predates versioning (no
// Versions) leaves it unknown, read as protocol 1, until news of the same
// incarnation that carries it arrives; a member never heard announce reads
// as protocol 1.
func TestVersionsLearnedAndKept(t *testing.T) {
	h := newMT(t, mtConfig())
	h.join(mtMember(1, StateAlive, 1), wire.MemberState{Name: mtPeer(2), Addr: wire.EncodeAddr(mtPeerAddr(2)), Incarnation: 1,
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: 2, AppMin: 3, AppMax: 4}})
	m1, _ := h.m.Member(mtPeer(1))
	require.Equal(t, Versions{ProtocolMin: 1, ProtocolMax: 1}, m1.Versions, "announced nothing: protocol 1")
	m2, _ := h.m.Member(mtPeer(2))
	require.Equal(t, Versions{ProtocolMin: 1, ProtocolMax: 2, AppMin: 3, AppMax: 4}, m2.Versions)

	// p002's metadata changes, relayed by a member that drops the field.
	h.feed(mtPeerAddr(1), &wire.Alive{Name: mtPeer(2), Addr: wire.EncodeAddr(mtPeerAddr(2)), Incarnation: 2, Meta: []byte("m")})
	m2, _ = h.m.Member(mtPeer(2))
	require.Equal(t, []byte("m"), m2.Meta)
	require.Equal(t, Versions{ProtocolMin: 1, ProtocolMax: 1}, m2.Versions, "unknown: the safe side")
	require.Equal(t, uint8(1), h.m.protocolAt(mtPeerAddr(2)))
	h.ready()
	// The same incarnation from p002 itself, with its versions.
	h.feed(mtPeerAddr(2), &wire.Alive{Name: mtPeer(2), Addr: wire.EncodeAddr(mtPeerAddr(2)), Incarnation: 2, Meta: []byte("m"),
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: 2, AppMin: 3, AppMax: 4}})
	m2, _ = h.m.Member(mtPeer(2))
	require.Equal(t, Versions{ProtocolMin: 1, ProtocolMax: 2, AppMin: 3, AppMax: 4}, m2.Versions, "learned")
	require.Equal(t, uint64(2), m2.Incarnation)
	require.Empty(t, h.ready().eventsAbout(mtPeer(2)), "no event: nothing a member sees changed")

	// This member announces its own, application range included.
	cfg := mtConfig()
	cfg.AppVersionMin, cfg.AppVersionMax = 2, 5
	own := newMT(t, cfg).m.LocalMember().Versions
	require.Equal(t, Versions{ProtocolMin: wire.ProtocolMin, ProtocolMax: wire.ProtocolMax, AppMin: 2, AppMax: 5}, own)

	bad := mtConfig()
	bad.AppVersionMin, bad.AppVersionMax = 3, 2
	var ce *ConfigError
	require.ErrorAs(t, bad.Validate(), &ce)
	require.Equal(t, "AppVersionMin", ce.Field)
}

// A delta that only a newer protocol reads (a new kind) rides only on
// packets to members that announced that protocol: announce first, use
// after. The rest of the queue still goes to everyone.
func TestFeatureOnlyToPeersThatAnnounceIt(t *testing.T) {
	h := newMT(t, mtConfig())
	h.join(mtMember(1, StateAlive, 1), wire.MemberState{Name: mtPeer(2), Addr: wire.EncodeAddr(mtPeerAddr(2)), Incarnation: 1,
		Versions: wire.Versions{ProtocolMin: 1, ProtocolMax: 3}})
	future := []byte{0x3f, 0x91, 0x00} // a kind of a protocol to come
	b := h.m.bq.queue("future", future)
	b.proto = 3
	h.m.broadcastSelfAlive()

	takes := func(to int) (future, alive bool) {
		frames, _ := h.m.bq.take(nil, 1400, 100, h.m.protocolAt(mtPeerAddr(to)))
		for _, f := range frames {
			switch wire.Type(f[0]) {
			case 0x3f:
				future = true
			case wire.TypeAlive:
				alive = true
			}
		}
		return future, alive
	}
	f1, a1 := takes(1)
	require.False(t, f1, "p001 announced no protocol past 1")
	require.True(t, a1, "the alive goes to everyone")
	f2, _ := takes(2)
	require.True(t, f2, "p002 announced protocol 3")
	require.Equal(t, wire.ProtocolMin, h.m.protocolAt(mtStranger), "an address not known: the oldest protocol")
}
