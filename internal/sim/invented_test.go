package sim

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/wire"
)

// inventedStorm has an attacker announce invented members to every live
// member: perPacket fresh ones in a packet to each, every step, until
// total were announced. Each invented member lives at an address in
// 10.250.0.0/16, where nobody answers. With spoof, each announcement is
// sent from the invented member's own address, as an attacker forging its
// source would; otherwise from the attacker's one address.
func (s *scenario) inventedStorm(total, perPacket int, step time.Duration, spoof bool) {
	s.t.Helper()
	attacker := netip.MustParseAddrPort("192.0.2.66:7946")
	for sent := 0; sent < total; {
		for _, name := range s.upNames() {
			for k := range perPacket {
				i := sent + k
				addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 250, byte(i >> 8), byte(i)}), 7946)
				alive := &wire.Alive{Name: fmt.Sprintf("invented-%05d", i), Addr: wire.EncodeAddr(addr), Incarnation: 1}
				from := attacker
				if spoof {
					from = addr
				}
				data, err := wire.AppendPacket(nil, alive)
				require.NoError(s.t, err)
				require.NoError(s.t, s.Do(name, func(n Node, now time.Time) {
					require.NoError(s.t, n.HandlePacket(now, from, data))
				}))
			}
		}
		sent += perPacket
		s.Run(step)
	}
}

// crashKnownAfter crashes victim and returns how long until every other
// member holds it dead, while during runs meanwhile (nil: nothing).
func (s *scenario) crashKnownAfter(victim string, during func()) time.Duration {
	s.t.Helper()
	survivors := without(s.names, victim)
	start := s.Now()
	require.NoError(s.t, s.Crash(victim))
	if during != nil {
		during()
	}
	require.True(s.t, s.RunUntil(func() bool { return s.allSee(survivors, []string{victim}, swim.StateDead) }, 10*time.Minute),
		"the crash of %s is not known to all", victim)
	return s.Now().Sub(start)
}

// TestCrashKnownDuringInventedJoinStorm: an attacker announcing 5,000
// invented members to each of 64 members in 3.7 s, from its own address
// or forging each invented member's, neither enters any table nor delays
// the detection of a real crash: every survivor knows of it within 1 s of
// the time it takes with no storm, on the same seed.
func TestCrashKnownDuringInventedJoinStorm(t *testing.T) {
	for _, spoof := range []bool{false, true} {
		t.Run(fmt.Sprintf("spoof=%v", spoof), func(t *testing.T) {
			const seed = 7
			quiet := convergedScenario(t, seed, 64, configWith(func(*swim.Config) {}))
			base := quiet.crashKnownAfter(quiet.names[31], nil)

			s := convergedScenario(t, seed, 64, configWith(func(*swim.Config) {}))
			during := s.crashKnownAfter(s.names[31], func() { s.inventedStorm(5000, 14, 10*time.Millisecond, spoof) })
			t.Logf("crash known by all after %v with no storm, %v during the storm", base, during)
			for _, name := range s.upNames() {
				all, _ := s.machine(name).Snapshot()
				for _, mb := range all {
					require.False(t, strings.HasPrefix(mb.Name, "invented-"), "%s admitted %s", name, mb.Name)
				}
			}
			require.LessOrEqual(t, during, base+time.Second)
		})
	}
}
