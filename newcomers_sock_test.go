package swim

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// rawPeer is a UDP socket the test speaks the protocol through by hand, as
// a member would (plaintext, no label).
type rawPeer struct {
	t    *testing.T
	conn *net.UDPConn
}

func newRawPeer(t *testing.T) *rawPeer {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &rawPeer{t: t, conn: conn}
}

func (p *rawPeer) addr() netip.AddrPort { return p.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (p *rawPeer) send(to netip.AddrPort, msgs ...wire.Message) {
	p.t.Helper()
	_, err := p.conn.WriteToUDPAddrPort(sealed(p.t, wire.PacketEnvelope, "", nil, msgs...), to)
	require.NoError(p.t, err)
}

// recv returns the messages of the next packet received, or nil at the
// deadline.
func (p *rawPeer) recv(deadline time.Time) []wire.Message {
	p.t.Helper()
	buf := make([]byte, 65536)
	require.NoError(p.t, p.conn.SetReadDeadline(deadline))
	n, _, err := p.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil
	}
	data, err := wire.OpenEnvelope(nil, buf[:n], wire.PacketEnvelope, "", nil, true)
	require.NoError(p.t, err)
	msgs, err := wire.DecodePacket(data)
	require.NoError(p.t, err)
	return msgs
}

// joinAs has the peer announce itself to m as the member name and answers
// m's check of its address, until m holds it alive.
func (p *rawPeer) joinAs(m *testMember, name string) {
	p.t.Helper()
	self := &wire.Alive{Name: name, Addr: wire.EncodeAddr(p.addr()), Incarnation: 1}
	deadline := time.Now().Add(formTimeout)
	for time.Now().Before(deadline) {
		if mb, ok := m.Member(name); ok && mb.State == StateAlive {
			return
		}
		p.send(m.LocalMember().Addr, &wire.Ping{Seq: 1, Target: m.LocalMember().Name, From: name}, self)
		for _, msg := range p.recv(time.Now().Add(100 * time.Millisecond)) {
			if ping, ok := msg.(*wire.Ping); ok && ping.Target == name {
				p.send(m.LocalMember().Addr, &wire.Ack{Seq: ping.Seq})
			}
		}
	}
	p.t.Fatalf("%s was not admitted", name)
}

// TestTableFloodOverSockets: a stranger sends a cluster of three members
// packets announcing 5,000 invented members (the table flood). None is
// admitted, no member's local health rises, and a real newcomer joining
// after the flood is seen alive by every member within the usual join
// time.
func TestTableFloodOverSockets(t *testing.T) {
	t.Parallel()
	members := startCluster(t, 3)
	checked := make([]uint64, len(members))
	for i, m := range members {
		checked[i] = m.Stats().Admission.NewcomersChecked
	}
	attacker := newRawPeer(t)
	for _, m := range members {
		for i := 0; i < 5000; i += 50 {
			msgs := make([]wire.Message, 0, 50)
			for k := range 50 {
				inv := mtInvented(i + k)
				msgs = append(msgs, &wire.Alive{Name: inv.Name, Addr: inv.Addr, Incarnation: inv.Incarnation})
			}
			attacker.send(m.LocalMember().Addr, msgs...)
		}
	}
	// Every packet was handled once the last refusal is counted.
	require.Eventually(t, func() bool {
		for _, m := range members {
			if m.Stats().Admission.NewcomersRefused < 5000 {
				return false
			}
		}
		return true
	}, formTimeout, pollEvery, "%s", views(members))
	for i, m := range members {
		require.Equal(t, checked[i], m.Stats().Admission.NewcomersChecked, "the flood cost no check")
		require.Equal(t, 3, m.NumMembers())
		require.Zero(t, m.HealthScore())
	}

	newcomer := startMember(t, testConfig("newcomer"))
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	start := time.Now()
	_, err := newcomer.Join(ctx, members[1].LocalMember().Addr.String())
	require.NoError(t, err)
	all := append(members, newcomer)
	require.Eventually(t, func() bool {
		for _, m := range all {
			if mb, ok := m.Member("newcomer"); !ok || mb.State != StateAlive || m.NumMembers() != 4 {
				return false
			}
		}
		return true
	}, formTimeout, pollEvery, "%s", views(all))
	t.Logf("newcomer seen alive by all %v after its join", time.Since(start))
}
