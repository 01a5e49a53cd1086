package swim

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/swim-go/swim/internal/wire"
)

// Keys of the security tests, one of each AES size.
var (
	testKey1 = bytes.Repeat([]byte{0x11}, 16)
	testKey2 = bytes.Repeat([]byte{0x22}, 32)
	testKey3 = bytes.Repeat([]byte{0x33}, 24)
)

// secureConfig is testConfig with a label and keys.
func secureConfig(name, label string, keys ...[]byte) *Config {
	c := testConfig(name)
	c.Label = label
	c.Security.Keys = keys
	return c
}

// formCluster starts a member per config, joins every one to the first and
// waits until each sees them all.
func formCluster(t *testing.T, cfgs ...*Config) []*testMember {
	t.Helper()
	members := make([]*testMember, len(cfgs))
	for i, c := range cfgs {
		members[i] = startMember(t, c)
	}
	seed := members[0].LocalMember().Addr.String()
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	for _, m := range members[1:] {
		_, err := m.Join(ctx, seed)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, m := range members {
			if m.NumMembers() != len(members) {
				return false
			}
		}
		return true
	}, formTimeout, pollEvery, "cluster did not form: %s", views(members))
	return members
}

// namedConfigs returns n configs named prefix-0.. made by mk.
func namedConfigs(n int, prefix string, mk func(name string) *Config) []*Config {
	cfgs := make([]*Config, n)
	for i := range cfgs {
		cfgs[i] = mk(fmt.Sprintf("%s-%d", prefix, i))
	}
	return cfgs
}

// countEvents counts the events of kind every member delivered.
func countEvents(members []*testMember, kind EventKind) int {
	n := 0
	for _, m := range members {
		m.log.mu.Lock()
		for _, e := range m.log.events {
			if e.Kind == kind {
				n++
			}
		}
		m.log.mu.Unlock()
	}
	return n
}

// sumStats adds up one counter over members.
func sumStats(members []*testMember, f func(MemberlistStats) uint64) uint64 {
	var n uint64
	for _, m := range members {
		n += f(m.Stats())
	}
	return n
}

// awaitTraffic waits until m has taken n more packets in: the pace of an
// operator changing one member after another while the cluster runs.
func awaitTraffic(t *testing.T, m *testMember, n uint64) {
	t.Helper()
	start := m.Stats().PacketsReceived
	require.Eventually(t, func() bool { return m.Stats().PacketsReceived >= start+n },
		formTimeout, pollEvery, "%s receives nothing", m.LocalMember().Name)
}

// requireNotMembers fails if anyone of members lists one of names, or
// lists anyone but the members themselves.
func requireNotMembers(t *testing.T, members []*testMember, names ...string) {
	t.Helper()
	own := make(map[string]bool)
	for _, m := range members {
		own[m.LocalMember().Name] = true
	}
	for _, m := range members {
		for _, mb := range m.Members() {
			require.False(t, slices.Contains(names, mb.Name), "%s lists the stranger %s", m.LocalMember().Name, mb.Name)
			require.True(t, own[mb.Name], "%s lists %s", m.LocalMember().Name, mb.Name)
		}
	}
}

// sealed builds a packet of msgs in the envelope of label and key (none
// when nil), as a member of that configuration would send it.
func sealed(t *testing.T, kind wire.EnvelopeKind, label string, key []byte, msgs ...wire.Message) []byte {
	t.Helper()
	frames := make([][]byte, len(msgs))
	for i, m := range msgs {
		f, err := wire.AppendFrame(nil, m)
		require.NoError(t, err)
		frames[i] = f
	}
	packet := wire.AppendCompound(nil, frames)
	var aead cipher.AEAD
	if key != nil {
		kr, err := newKeyring([][]byte{key}, PlaintextRefuse)
		require.NoError(t, err)
		aead = kr.aeads[0]
	}
	out, err := wire.AppendEnvelope(nil, kind, label, aead, packet)
	require.NoError(t, err)
	return out
}

// sendUDP sends each packet to to from a fresh socket.
func sendUDP(t *testing.T, to netip.AddrPort, packets ...[]byte) {
	t.Helper()
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
	require.NoError(t, err)
	defer conn.Close()
	for _, p := range packets {
		_, err := conn.Write(p)
		require.NoError(t, err)
	}
}

// joinFails has m try to join through seed and requires that it fails.
func joinFails(t *testing.T, m *testMember, seed *testMember) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	_, err := m.Join(ctx, seed.LocalMember().Addr.String())
	require.Error(t, err, "%s joined", m.LocalMember().Name)
}

// TestEncryptedMemberDecodesNothingUnauthenticated: a member with a key and
// a label refuses, before its Machine sees them, plaintext, another key,
// another label, no label, packets from outside Security.AllowedCIDRs and sealed
// stream messages replayed as packets, each counted in its own counter;
// what is sealed under its key and label is handled.
func TestEncryptedMemberDecodesNothingUnauthenticated(t *testing.T) {
	cfg := secureConfig("alone", "blue", testKey1)
	m := startMember(t, cfg)
	addr := m.LocalMember().Addr
	ping := &wire.Ping{Seq: 1, Target: "alone", From: "stranger"}

	tests := []struct {
		name   string
		packet []byte
		field  func(MemberlistStats) uint64
	}{
		{"plaintext", sealed(t, wire.PacketEnvelope, "", nil, ping), func(s MemberlistStats) uint64 { return s.RefusedLabel }},
		{"labelled plaintext", sealed(t, wire.PacketEnvelope, "blue", nil, ping), func(s MemberlistStats) uint64 { return s.RefusedPlaintext }},
		{"another key", sealed(t, wire.PacketEnvelope, "blue", testKey2, ping), func(s MemberlistStats) uint64 { return s.RefusedKey }},
		{"another label", sealed(t, wire.PacketEnvelope, "green", testKey1, ping), func(s MemberlistStats) uint64 { return s.RefusedLabel }},
		{"no label", sealed(t, wire.PacketEnvelope, "", testKey1, ping), func(s MemberlistStats) uint64 { return s.RefusedLabel }},
		{"stream message as a packet", sealed(t, wire.StreamEnvelope, "blue", testKey1, ping), func(s MemberlistStats) uint64 { return s.RefusedKey }},
		{"garbage after the label", append([]byte{wire.LabelMarker, 4, 'b', 'l', 'u', 'e'}, 0xde, 0xad), func(s MemberlistStats) uint64 { return s.RefusedPlaintext }},
	}
	for _, tc := range tests {
		before := m.Stats()
		sendUDP(t, addr, tc.packet)
		require.Eventually(t, func() bool { return tc.field(m.Stats()) == tc.field(before)+1 }, formTimeout, pollEvery, tc.name)
		after := m.Stats()
		require.Equal(t, before.PacketsReceived, after.PacketsReceived, "%s reached the Machine", tc.name)
		require.Equal(t, before.RefusedSource+before.RefusedLabel+before.RefusedPlaintext+before.RefusedKey+1,
			after.RefusedSource+after.RefusedLabel+after.RefusedPlaintext+after.RefusedKey, "%s counted once", tc.name)
	}

	// What is sealed right reaches the Machine.
	before := m.Stats().PacketsReceived
	sendUDP(t, addr, sealed(t, wire.PacketEnvelope, "blue", testKey1, ping))
	require.Eventually(t, func() bool { return m.Stats().PacketsReceived == before+1 }, formTimeout, pollEvery)
}

// TestAllowedCIDRsRefuseOtherSources: a member that allows only 10.0.0.0/8
// refuses packets and streams from 127.0.0.1, streams before reading them;
// members that allow loopback form a cluster.
func TestAllowedCIDRsRefuseOtherSources(t *testing.T) {
	cfg := testConfig("fenced")
	cfg.Security.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::ffff:192.168.0.0/112")}
	fenced := startMember(t, cfg)
	outsider := startMember(t, testConfig("outsider"))

	sendUDP(t, fenced.LocalMember().Addr, sealed(t, wire.PacketEnvelope, "", nil, &wire.Ping{Seq: 1, Target: "fenced", From: "x"}))
	require.Eventually(t, func() bool { return fenced.Stats().RefusedSource == 1 }, formTimeout, pollEvery)
	joinFails(t, outsider, fenced)
	require.Eventually(t, func() bool { return fenced.Stats().RefusedSource >= 2 }, formTimeout, pollEvery)
	st := fenced.Stats()
	require.Zero(t, st.PacketsReceived, "a refused source reached the Machine")
	require.Zero(t, st.PushPulls)
	requireNotMembers(t, []*testMember{fenced}, "outsider")

	open := namedConfigs(3, "lo", func(name string) *Config {
		c := testConfig(name)
		c.Security.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		return c
	})
	members := formCluster(t, open...)
	require.Zero(t, sumStats(members, func(s MemberlistStats) uint64 { return s.RefusedSource }))
}

// TestKeyRotationWithoutSuspicion: 8 encrypted members rotate their primary
// key one member at a time (install the new key everywhere, use it
// everywhere, remove the old one everywhere) with no suspicion and no
// refusal; afterwards traffic sealed under the old key is refused.
func TestKeyRotationWithoutSuspicion(t *testing.T) {
	t.Parallel()
	members := formCluster(t, namedConfigs(8, "rot", func(name string) *Config { return secureConfig(name, "", testKey1) })...)

	steps := []clusterStep{
		{"install", func(m *testMember) error { return m.InstallKey(testKey2) }},
		{"use", func(m *testMember) error { return m.UseKey(testKey2) }},
		{"remove", func(m *testMember) error { return m.RemoveKey(testKey1) }},
	}
	stepInTurn(t, members, steps)
	for _, m := range members {
		awaitTraffic(t, m, 3)
		require.Equal(t, [][]byte{testKey2}, m.ListKeys())
	}
	require.Zero(t, countEvents(members, EventSuspect), "suspicions during the rotation: %s", views(members))
	require.Zero(t, sumStats(members, func(s MemberlistStats) uint64 { return s.SuspicionsRaised }))
	require.Zero(t, sumStats(members, func(s MemberlistStats) uint64 {
		return s.RefusedKey + s.RefusedPlaintext + s.RefusedLabel
	}), "traffic refused during the rotation")

	// Under the old key, nothing is accepted any more.
	target := members[3]
	before := target.Stats()
	sendUDP(t, target.LocalMember().Addr, sealed(t, wire.PacketEnvelope, "", testKey1,
		&wire.Alive{Name: "rot-0", Addr: wire.EncodeAddr(members[0].LocalMember().Addr), Incarnation: 1 << 30}))
	require.Eventually(t, func() bool { return target.Stats().RefusedKey == before.RefusedKey+1 }, formTimeout, pollEvery)
	for _, m := range members {
		for _, mb := range m.Members() {
			require.Less(t, mb.Incarnation, uint64(1<<30), "the old key's packet was merged")
		}
	}
}

// TestStrangersNeverJoin: a member with another key, one with no key and
// one with another label each try to join an encrypted, labelled cluster;
// none appears in any view, and the cluster counts each kind of refusal.
// Then the same for a labelled cluster without encryption, and strangers
// without a label or with another one.
func TestStrangersNeverJoin(t *testing.T) {
	t.Parallel()
	t.Run("encrypted", func(t *testing.T) {
		members := formCluster(t, namedConfigs(3, "blue", func(name string) *Config { return secureConfig(name, "blue", testKey1) })...)
		strangers := []struct {
			cfg   *Config
			field func(MemberlistStats) uint64
		}{
			{secureConfig("wrong-key", "blue", testKey2), func(s MemberlistStats) uint64 { return s.RefusedKey }},
			{secureConfig("no-key", "blue"), func(s MemberlistStats) uint64 { return s.RefusedPlaintext }},
			{secureConfig("other-label", "green", testKey1), func(s MemberlistStats) uint64 { return s.RefusedLabel }},
		}
		for i, s := range strangers {
			stranger := startMember(t, s.cfg)
			seed := members[i%len(members)]
			joinFails(t, stranger, seed)
			require.Eventually(t, func() bool { return s.field(seed.Stats()) > 0 }, formTimeout, pollEvery, "%s not counted", s.cfg.Name)
			requireNotMembers(t, members, s.cfg.Name)
			require.Equal(t, 1, stranger.NumMembers(), "%s learned of the cluster", s.cfg.Name)
		}
		// The strangers keep retrying their seed in the background; the
		// cluster keeps refusing them while it runs.
		for _, m := range members {
			awaitTraffic(t, m, 10)
		}
		requireNotMembers(t, members, "wrong-key", "no-key", "other-label")
		require.Zero(t, countEvents(members, EventSuspect))
	})
	t.Run("labelled", func(t *testing.T) {
		members := formCluster(t, namedConfigs(3, "red", func(name string) *Config { return secureConfig(name, "red") })...)
		for i, cfg := range []*Config{secureConfig("unlabelled", ""), secureConfig("other", "green")} {
			stranger := startMember(t, cfg)
			seed := members[i]
			before := seed.Stats().RefusedLabel
			joinFails(t, stranger, seed)
			require.Eventually(t, func() bool { return seed.Stats().RefusedLabel > before }, formTimeout, pollEvery)
			requireNotMembers(t, members, cfg.Name)
		}
		for _, m := range members {
			awaitTraffic(t, m, 10)
		}
		requireNotMembers(t, members, "unlabelled", "other")
	})
}

// TestPlaintextClusterMigratesToEncryption: a plaintext cluster of 8 moves
// to encryption one member at a time, at run time, with the three steps of
// PlaintextMode, and no suspicion; then a plaintext stranger is refused.
func TestPlaintextClusterMigratesToEncryption(t *testing.T) {
	t.Parallel()
	members := formCluster(t, namedConfigs(8, "mig", testConfig)...)

	require.ErrorIs(t, members[0].InstallKey(testKey1), ErrKeyringEmpty, "a first key needs PlaintextSend")
	steps := []clusterStep{
		{"send", func(m *testMember) error {
			if err := m.SetPlaintext(PlaintextSend); err != nil {
				return err
			}
			return m.InstallKey(testKey1)
		}},
		{"accept", func(m *testMember) error { return m.SetPlaintext(PlaintextAccept) }},
		{"refuse", func(m *testMember) error { return m.SetPlaintext(PlaintextRefuse) }},
	}
	stepInTurn(t, members, steps)
	for _, m := range members {
		awaitTraffic(t, m, 3)
		require.Equal(t, PlaintextRefuse, m.Plaintext())
		require.Equal(t, [][]byte{testKey1}, m.ListKeys())
	}
	require.Zero(t, countEvents(members, EventSuspect), "suspicions during the migration: %s", views(members))
	require.Zero(t, sumStats(members, func(s MemberlistStats) uint64 {
		return s.RefusedKey + s.RefusedPlaintext + s.RefusedLabel
	}), "traffic refused during the migration")

	stranger := startMember(t, testConfig("plain-stranger"))
	joinFails(t, stranger, members[5])
	require.Eventually(t, func() bool { return members[5].Stats().RefusedPlaintext > 0 }, formTimeout, pollEvery)
	sendUDP(t, members[2].LocalMember().Addr, sealed(t, wire.PacketEnvelope, "", nil,
		&wire.Alive{Name: "plain-stranger", Addr: wire.EncodeAddr(stranger.LocalMember().Addr), Incarnation: 1}))
	require.Eventually(t, func() bool { return members[2].Stats().RefusedPlaintext > 0 }, formTimeout, pollEvery)
	for _, m := range members {
		awaitTraffic(t, m, 3)
	}
	requireNotMembers(t, members, "plain-stranger")
}

// TestKeyringSealsUnderThePrimary: what a member sends is sealed under its
// primary key as soon as UseKey returns, and labelled.
func TestKeyringSealsUnderThePrimary(t *testing.T) {
	m := startMember(t, secureConfig("k", "lab", testKey1, testKey3))
	got, err := m.sealStream([]byte{wire.Version, 1})
	require.NoError(t, err)
	require.Len(t, got, 2+wire.EnvelopeOverhead(3))
	kr1, err := newKeyring([][]byte{testKey1}, PlaintextRefuse)
	require.NoError(t, err)
	kr3, err := newKeyring([][]byte{testKey3}, PlaintextRefuse)
	require.NoError(t, err)
	_, err = wire.OpenEnvelope(nil, bytes.Clone(got), wire.StreamEnvelope, "lab", kr1.aeads, false)
	require.NoError(t, err)
	require.NoError(t, m.UseKey(testKey3))
	got, err = m.sealStream([]byte{wire.Version, 1})
	require.NoError(t, err)
	_, err = wire.OpenEnvelope(nil, bytes.Clone(got), wire.StreamEnvelope, "lab", kr1.aeads, false)
	require.ErrorIs(t, err, wire.ErrNoKey)
	_, err = wire.OpenEnvelope(nil, bytes.Clone(got), wire.StreamEnvelope, "lab", kr3.aeads, false)
	require.NoError(t, err)

	// PlaintextSend: labelled, not sealed.
	require.NoError(t, m.SetPlaintext(PlaintextSend))
	got, err = m.sealStream([]byte{wire.Version, 1})
	require.NoError(t, err)
	require.Equal(t, []byte{wire.LabelMarker, 3, 'l', 'a', 'b', wire.Version, 1}, got)
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leaf issues a certificate for a member on 127.0.0.1, good for both ends
// of a stream.
func (ca *testCA) leaf(t *testing.T, name string, serial int64) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mutualTLS is the Security.StreamTLS of a member holding cert, trusting ca for
// both servers and clients, and requiring client certificates.
func mutualTLS(cert tls.Certificate, ca *testCA) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca.pool,
		ClientCAs:    ca.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

// TestStreamTLSMutualAuth: two members with certificates of one CA and
// mutual TLS join and see each other; a third whose certificate that CA
// did not sign (so it has no client certificate to offer) cannot join and
// is in no view.
func TestStreamTLSMutualAuth(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	var cfgs []*Config
	for i := range 2 {
		c := testConfig(fmt.Sprintf("tls-%d", i))
		c.Security.StreamTLS = mutualTLS(ca.leaf(t, c.Name, int64(10+i)), ca)
		cfgs = append(cfgs, c)
	}
	members := formCluster(t, cfgs...)
	require.NotZero(t, sumStats(members, func(s MemberlistStats) uint64 { return s.PushPulls }))
	require.Zero(t, sumStats(members, func(s MemberlistStats) uint64 { return s.RefusedTLS }))

	other := newTestCA(t, "another CA")
	c := testConfig("tls-outsider")
	c.Security.StreamTLS = mutualTLS(other.leaf(t, c.Name, 20), other)
	c.Security.StreamTLS.RootCAs = ca.pool // it trusts the cluster; the cluster does not trust it
	outsider := startMember(t, c)
	joinFails(t, outsider, members[0])
	require.Eventually(t, func() bool { return members[0].Stats().RefusedTLS > 0 }, formTimeout, pollEvery)
	for _, m := range members {
		awaitTraffic(t, m, 5)
	}
	requireNotMembers(t, members, "tls-outsider")
	require.Equal(t, 1, outsider.NumMembers())

	// The client verifies the server too: a member that trusts another CA
	// cannot join through the cluster's certificates either.
	c = testConfig("tls-distrustful")
	c.Security.StreamTLS = mutualTLS(ca.leaf(t, c.Name, 30), ca)
	c.Security.StreamTLS.RootCAs = other.pool
	distrustful := startMember(t, c)
	joinFails(t, distrustful, members[1])
	requireNotMembers(t, members, "tls-distrustful")
}

// BenchmarkReceivePing measures the receive path of one probe, envelope
// included: a ping opened, handled by the Machine, its ack sealed and
// written to the socket. "plain" has no label and no key, "sealed" an
// 8-byte label and an AES-128 key; the difference is the envelope's cost.
// The packets go through handlePacket, the loop's path, since the
// transport's reader owns receive's buffer.
func BenchmarkReceivePing(b *testing.B) {
	for _, tc := range []struct {
		name  string
		label string
		key   []byte
	}{{"plain", "", nil}, {"sealed", "cluster8", testKey1}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := testConfig("bench")
			cfg.Label = tc.label
			if tc.key != nil {
				cfg.Security.Keys = [][]byte{tc.key}
			}
			ml, err := New(cfg)
			require.NoError(b, err)
			defer ml.Shutdown()
			sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			require.NoError(b, err)
			defer sink.Close()
			from := sink.LocalAddr().(*net.UDPAddr).AddrPort()

			var aead cipher.AEAD
			if tc.key != nil {
				kr, err := newKeyring(cfg.Security.Keys, PlaintextRefuse)
				require.NoError(b, err)
				aead = kr.aeads[0]
			}
			frame, err := wire.AppendFrame(nil, &wire.Ping{Seq: 1, Target: "bench", From: "peer"})
			require.NoError(b, err)
			packet, err := wire.AppendEnvelope(nil, wire.PacketEnvelope, tc.label, aead, wire.AppendCompound(nil, [][]byte{frame}))
			require.NoError(b, err)
			p := IncomingPacket{From: from, Data: packet}

			b.ReportAllocs()
			for b.Loop() {
				if !ml.begin() {
					b.Fatal("shut down")
				}
				ml.handlePacket(p)
				ml.end(true)
			}
			b.StopTimer()
			st := ml.Stats()
			require.Zero(b, st.RefusedLabel+st.RefusedKey+st.RefusedPlaintext+st.PacketsDropped)
		})
	}
}

// TestOpenPacketAllocatesNothing: with encryption on, opening a received
// packet allocates nothing once its buffer has grown (the Machine's own
// decoding aside).
func TestOpenPacketAllocatesNothing(t *testing.T) {
	m := startMember(t, secureConfig("allocs", "cluster8", testKey2, testKey1))
	packet := sealed(t, wire.PacketEnvelope, "cluster8", testKey1, &wire.Ping{Seq: 1, Target: "allocs", From: "peer"})
	from := netip.MustParseAddrPort("127.0.0.1:9")
	var buf []byte
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := m.openPacket(from, packet, &buf); !ok {
			t.Fatal("refused")
		}
	})
	require.Zero(t, allocs)
}

// TestRefusalsAreLoggedRateLimited: a flood of refused packets is counted
// one by one and logged as one warning per kind, naming the source.
func TestRefusalsAreLoggedRateLimited(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	cfg := secureConfig("logged", "blue", testKey1)
	cfg.Logger = zap.New(core)
	m := startMember(t, cfg)
	var flood [][]byte
	for range 50 {
		flood = append(flood, sealed(t, wire.PacketEnvelope, "blue", nil, &wire.Ping{Seq: 1, Target: "logged", From: "x"}))
	}
	sendUDP(t, m.LocalMember().Addr, flood...)
	sendUDP(t, m.LocalMember().Addr, sealed(t, wire.PacketEnvelope, "green", testKey1, &wire.Ping{Seq: 1, Target: "logged", From: "x"}))
	require.Eventually(t, func() bool {
		st := m.Stats()
		return st.RefusedPlaintext == 50 && st.RefusedLabel == 1
	}, formTimeout, pollEvery)
	plain := logs.FilterMessage("refused: plaintext packet").All()
	require.Len(t, plain, 1, "one line for the flood")
	require.Contains(t, plain[0].ContextMap()["from"], "127.0.0.1:")
	label := logs.FilterMessage("refused: packet whose label is not this cluster's").All()
	require.Len(t, label, 1)
	require.Contains(t, label[0].ContextMap()["error"], `"green"`)
}

// clusterStep is one step of a change made on every member in turn.
type clusterStep struct {
	name string
	do   func(m *testMember) error
}

// stepInTurn takes each step on every member, one member at a time, each
// member exchanging a little traffic after its change, before the next
// step begins: the way an operator rolls a change through a cluster.
func stepInTurn(t *testing.T, members []*testMember, steps []clusterStep) {
	t.Helper()
	for _, step := range steps {
		for _, m := range members {
			require.NoError(t, step.do(m), "%s on %s", step.name, m.LocalMember().Name)
			awaitTraffic(t, m, 3)
		}
	}
}
