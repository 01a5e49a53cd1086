package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/swim-go/swim"
)

// memberlist's Shutdown does not wait for a probe in flight to end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

const (
	within    = 60 * time.Second
	pollEvery = 20 * time.Millisecond
)

// app is an application on either kind of process: the messages it got
// and a replicated map (each process sets its own key), merged on every
// state exchange, the way dskit's memberlist KV is built.
type app struct {
	mu   sync.Mutex
	msgs [][]byte
	kv   map[string]string
}

func newApp(name string) *app { return &app{kv: map[string]string{name: "v-" + name}} }

func (a *app) got(msg []byte) {
	a.mu.Lock()
	a.msgs = append(a.msgs, append([]byte(nil), msg...))
	a.mu.Unlock()
}

func (a *app) has(msg string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.ContainsFunc(a.msgs, func(m []byte) bool { return string(m) == msg })
}

func (a *app) LocalState(bool) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, _ := json.Marshal(a.kv)
	return b
}

func (a *app) MergeRemoteState(buf []byte, _ bool) error {
	var kv map[string]string
	if err := json.Unmarshal(buf, &kv); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, v := range kv {
		a.kv[k] = v
	}
	return nil
}

func (a *app) keys() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.kv)
}

// mlApp is a process that runs memberlist alone, as before the
// migration: its application's delegate, with its own broadcast queue.
type mlApp struct {
	*app
	ml    *memberlist.Memberlist
	queue *memberlist.TransmitLimitedQueue
}

func (m *mlApp) NodeMeta(int) []byte               { return nil }
func (m *mlApp) NotifyMsg(msg []byte)              { m.got(msg) }
func (m *mlApp) GetBroadcasts(o, l int) [][]byte   { return m.queue.GetBroadcasts(o, l) }
func (m *mlApp) MergeRemoteState(b []byte, j bool) { _ = m.app.MergeRemoteState(b, j) }
func (m *mlApp) LocalState(join bool) []byte       { return m.app.LocalState(join) }
func (m *mlApp) broadcast(msg string)              { m.queue.QueueBroadcast(uniqueBroadcast{[]byte(msg)}) }
func (m *mlApp) alive() int                        { return m.ml.NumMembers() }
func (m *mlApp) shutdown(t *testing.T)             { require.NoError(t, m.ml.Shutdown()) }
func (m *mlApp) addr() string                      { n := m.ml.LocalNode(); return mlAddr(n).String() }

var _ memberlist.Delegate = (*mlApp)(nil)

// broadcastRetransmits is the applications' broadcast queues'
// RetransmitMult: memberlist sends a broadcast RetransmitMult·
// ceil(log10(N+1)) times to random members in all, and no member relays
// it, so at 6 members and memberlist's default (4) each other member
// misses a given broadcast with a chance of (4/5)^4, 41%; at 40, 1 in
// 7,500.
const broadcastRetransmits = 40

func mlConfig(name string) *memberlist.Config {
	c := memberlist.DefaultLocalConfig()
	c.Name = name
	c.BindAddr = "127.0.0.1"
	c.BindPort = 0
	c.PushPullInterval = time.Second
	c.LogOutput = io.Discard
	return c
}

func startMLApp(t *testing.T, name string, opts ...func(*memberlist.Config)) *mlApp {
	m := &mlApp{app: newApp(name)}
	m.queue = &memberlist.TransmitLimitedQueue{NumNodes: func() int { return max(m.alive(), 1) }, RetransmitMult: broadcastRetransmits}
	c := mlConfig(name)
	c.Delegate = m
	for _, o := range opts {
		o(c)
	}
	var err error
	// Port 0 picks a free TCP port, and UDP then binds the same number,
	// which may be taken: retry, as memberlist itself does.
	for range 10 {
		if m.ml, err = memberlist.Create(c); err == nil {
			break
		}
	}
	require.NoError(t, err)
	return m
}

// bridged is a process in migration mode, with the events of its view.
type bridged struct {
	*app
	b      *Bridge
	evMu   sync.Mutex
	events []swim.Event
}

// left reports whether its view reported any of names gone.
func (br *bridged) left(names ...string) bool {
	br.evMu.Lock()
	defer br.evMu.Unlock()
	return slices.ContainsFunc(br.events, func(e swim.Event) bool {
		return e.Kind == swim.EventLeave && slices.Contains(names, e.Member.Name)
	})
}

// swimAddrs is where each bridged process runs its swim side, by name:
// the test's SwimAddr (ports are picked free, so no fixed offset holds).
type swimAddrs struct {
	mu sync.Mutex
	m  map[string]netip.AddrPort
	// byML is the same by memberlist address, for a Join out of
	// migration mode, which knows its seeds by address only.
	byML map[netip.AddrPort]netip.AddrPort
}

func (s *swimAddrs) of(n *memberlist.Node) netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.m[n.Name]; ok {
		return a
	}
	return s.byML[mlAddr(n)]
}

func startBridged(t *testing.T, name string, addrs *swimAddrs, opts ...func(*Config)) *bridged {
	br := &bridged{app: newApp(name)}
	a := br.app
	sc := swim.DefaultLocalConfig()
	sc.Name = name
	sc.BindAddr = "127.0.0.1"
	sc.BindPort = 0
	sc.PushPullInterval = time.Second
	var b *Bridge
	var err error
	for range 10 {
		cfg := Config{Memberlist: mlConfig(name), Swim: sc, SwimAddr: addrs.of, BroadcastRetransmitMult: broadcastRetransmits,
			Messages: swim.MessageFunc(func(m swim.Message) { a.got(m.Payload) }), State: a,
			Events: swim.EventFunc(func(e swim.Event) {
				br.evMu.Lock()
				br.events = append(br.events, e)
				br.evMu.Unlock()
			})}
		for _, o := range opts {
			o(&cfg)
		}
		b, err = New(cfg)
		if err == nil {
			break
		}
	}
	require.NoError(t, err)
	addrs.mu.Lock()
	addrs.m[name] = b.Swim().LocalMember().Addr
	if addrs.byML == nil {
		addrs.byML = map[netip.AddrPort]netip.AddrPort{}
	}
	addrs.byML[b.MemberlistAddr()] = b.Swim().LocalMember().Addr
	addrs.mu.Unlock()
	br.b = b
	return br
}

// leaveOneAtATime takes brs out of migration mode in turn, as the
// procedure has it: the next leaves once the others' memberlist sides
// have heard of the leave. (memberlist's Leave waits for its broadcast to
// go out; a process that learns of its last peer's leave while it leaves
// itself has nobody left to send it to, and times out.)
func leaveOneAtATime(t *testing.T, brs []*bridged) {
	t.Helper()
	for i, br := range brs {
		require.Equal(t, PhaseBridged, br.b.Phase())
		require.NoError(t, br.b.LeaveMemberlist(context.Background()), "%s leaving", br.b.name)
		require.Eventually(t, func() bool {
			for _, rest := range brs[i+1:] {
				if rest.b.Memberlist().NumMembers() != len(brs)-i-1 {
					return false
				}
			}
			return true
		}, within, pollEvery, "the others did not hear of %s's leave", br.b.name)
	}
}

// inStandby waits until every one of brs is in standby: a process still
// bridged may wake one that has just left with its push-pull, and such a
// wake ends by itself.
func inStandby(t *testing.T, brs []*bridged) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, br := range brs {
			if br.b.Phase() != PhaseStandby {
				return false
			}
		}
		return true
	}, within, pollEvery, "not every process returned to standby")
}

// assertEventually polls cond until it holds or within passes.
func assertEventually(t *testing.T, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(pollEvery)
	}
	return cond()
}

func names(ms []swim.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// TestMigration: three processes run memberlist alone; three bridged ones
// join them. Every process sees all six; the bridged ones find each other
// on swim; broadcasts, direct messages and the replicated map cross the
// bridge both ways; a crash of a memberlist-only process is seen by the
// bridged ones; once the memberlist-only processes are gone the bridged
// ones leave the mode one at a time and keep seeing each other, with no
// leave event among them.
func TestMigration(t *testing.T) {
	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	var mls []*mlApp
	for i := range 3 {
		mls = append(mls, startMLApp(t, fmt.Sprintf("ml-%d", i)))
	}
	for _, m := range mls[1:] {
		_, err := m.ml.Join([]string{mls[0].addr()})
		require.NoError(t, err)
	}
	var brs []*bridged
	for i := range 3 {
		br := startBridged(t, fmt.Sprintf("br-%d", i), addrs)
		brs = append(brs, br)
		_, err := br.b.Join(context.Background(), mls[i].addr())
		require.NoError(t, err)
	}
	all := []string{"br-0", "br-1", "br-2", "ml-0", "ml-1", "ml-2"}
	require.Eventually(t, func() bool {
		for _, br := range brs {
			if !slices.Equal(all, names(br.b.Members())) || br.b.Swim().NumMembers() != 3 {
				return false
			}
		}
		for _, m := range mls {
			if m.alive() != 6 {
				return false
			}
		}
		return true
	}, within, pollEvery, "the views did not form")
	for _, br := range brs {
		require.ElementsMatch(t, []string{"ml-0", "ml-1", "ml-2"}, br.b.MemberlistOnly())
	}

	// Broadcasts both ways, and direct messages across.
	require.NoError(t, brs[0].b.Broadcast([]byte("from br-0"), "k"))
	mls[1].broadcast("from ml-1")
	require.NoError(t, brs[1].b.SendBestEffort("ml-2", []byte("direct to ml-2")))
	require.NoError(t, brs[1].b.SendReliable(context.Background(), "br-2", []byte("direct to br-2")))
	missing := func() []string {
		var out []string
		for _, m := range mls {
			if !m.has("from br-0") {
				out = append(out, m.ml.LocalNode().Name+" lacks br-0's broadcast")
			}
		}
		for _, br := range brs {
			if !br.has("from ml-1") {
				out = append(out, br.b.name+" lacks ml-1's broadcast")
			}
			if br != brs[0] && !br.has("from br-0") {
				out = append(out, br.b.name+" lacks br-0's broadcast")
			}
		}
		if !mls[2].has("direct to ml-2") {
			out = append(out, "ml-2 lacks its direct message")
		}
		if !brs[2].has("direct to br-2") {
			out = append(out, "br-2 lacks its direct message")
		}
		return out
	}
	if !assertEventually(t, func() bool { return len(missing()) == 0 }) {
		t.Fatalf("messages did not cross the bridge: %v", missing())
	}

	// The replicated map converges on all six.
	require.Eventually(t, func() bool {
		for _, m := range mls {
			if m.keys() != 6 {
				return false
			}
		}
		for _, br := range brs {
			if br.keys() != 6 {
				return false
			}
		}
		return true
	}, within, pollEvery, "the replicated map did not converge")

	// A memberlist-only process crashes: the bridged ones see it gone.
	mls[2].shutdown(t)
	require.Eventually(t, func() bool {
		for _, br := range brs {
			if slices.Contains(names(br.b.Members()), "ml-2") {
				return false
			}
		}
		return true
	}, within, pollEvery, "the crash was not seen")

	// The last memberlist-only processes stop; then leave the mode.
	for _, m := range mls[:2] {
		require.NoError(t, m.ml.Leave(5*time.Second))
		m.shutdown(t)
	}
	require.Eventually(t, func() bool {
		for _, br := range brs {
			if len(br.b.MemberlistOnly()) != 0 {
				return false
			}
		}
		return true
	}, within, pollEvery)
	leaveOneAtATime(t, brs)
	inStandby(t, brs)
	want := []string{"br-0", "br-1", "br-2"}
	require.Eventually(t, func() bool {
		for _, br := range brs {
			if !slices.Equal(want, names(br.b.Members())) {
				return false
			}
		}
		return true
	}, within, pollEvery)
	require.NoError(t, brs[0].b.Broadcast([]byte("after"), ""))
	require.Eventually(t, func() bool { return brs[1].has("after") && brs[2].has("after") }, within, pollEvery)
	for _, br := range brs {
		require.False(t, br.left("br-0", "br-1", "br-2"), "%s reported a bridged process gone as it left the mode", br.b.name)
		require.True(t, br.left("ml-2"), "%s did not report the crash", br.b.name)
		require.NoError(t, br.b.Shutdown())
	}
}

// TestRollbackAfterLeavingMode: three bridged processes leave migration
// mode; then a process running memberlist alone (an old build redeployed)
// joins through one of them. The standby port answers its join, every
// process comes back into migration mode, and all four see each other and
// share the map; once it is gone, each returns to standby by itself, and
// no bridged process ever saw another leave.
// It runs on a plaintext cluster and on one with memberlist's encryption
// and label, which the woken memberlist side keeps.
func TestRollbackAfterLeavingMode(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) { rollbackAfterLeavingMode(t, func(*memberlist.Config) {}) })
	t.Run("encrypted and labelled", func(t *testing.T) {
		rollbackAfterLeavingMode(t, func(c *memberlist.Config) {
			c.SecretKey = []byte("0123456789abcdef0123456789abcdef")
			c.Label = "prod"
		})
	})
}

func rollbackAfterLeavingMode(t *testing.T, mlOpt func(*memberlist.Config)) {
	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	const grace = 2 * time.Second
	var brs []*bridged
	for i := range 3 {
		br := startBridged(t, fmt.Sprintf("br-%d", i), addrs, func(c *Config) {
			c.StandbyGrace = grace
			mlOpt(c.Memberlist)
		})
		brs = append(brs, br)
		if i > 0 {
			_, err := br.b.Join(context.Background(), mlAddr(brs[0].b.Memberlist().LocalNode()).String())
			require.NoError(t, err)
		}
	}
	bridgedNames := []string{"br-0", "br-1", "br-2"}
	require.Eventually(t, func() bool {
		for _, br := range brs {
			if !slices.Equal(bridgedNames, names(br.b.Members())) || br.b.Swim().NumMembers() != 3 || br.b.Memberlist().NumMembers() != 3 {
				return false
			}
		}
		return true
	}, within, pollEvery, "the bridged cluster did not form")
	seed := mlAddr(brs[1].b.Memberlist().LocalNode()).String()
	leaveOneAtATime(t, brs)
	inStandby(t, brs)

	// The rollback: memberlist alone, joining through br-1's old port.
	m := startMLApp(t, "ml-x", mlOpt)
	_, err := m.ml.Join([]string{seed})
	require.NoError(t, err, "the standby port did not answer the join")
	all := []string{"br-0", "br-1", "br-2", "ml-x"}
	why := func() string {
		if m.alive() != 4 {
			return fmt.Sprintf("ml-x sees %d members", m.alive())
		}
		if m.keys() != 4 {
			return fmt.Sprintf("ml-x holds %d keys", m.keys())
		}
		for _, br := range brs {
			if got := names(br.b.Members()); !slices.Equal(all, got) {
				return fmt.Sprintf("%s sees %v", br.b.name, got)
			}
			if br.b.Phase() != PhaseWoken {
				return fmt.Sprintf("%s is %v", br.b.name, br.b.Phase())
			}
			if br.keys() != 4 {
				return fmt.Sprintf("%s holds %d keys", br.b.name, br.keys())
			}
		}
		return ""
	}
	if !assertEventually(t, func() bool { return why() == "" }) {
		t.Fatalf("the cluster did not come back into migration mode: %s", why())
	}
	require.Equal(t, []string{"ml-x"}, brs[0].b.MemberlistOnly())

	// The rolled-back process goes; the others return to standby.
	require.NoError(t, m.ml.Leave(5*time.Second))
	m.shutdown(t)
	require.Eventually(t, func() bool {
		for _, br := range brs {
			if br.b.Phase() != PhaseStandby || !slices.Equal(bridgedNames, names(br.b.Members())) {
				return false
			}
		}
		return true
	}, within, pollEvery, "the woken processes did not return to standby")
	var calls uint64
	for _, br := range brs {
		st := br.b.Stats()
		// A process may wake twice: a woken peer's push-pull can reach
		// its port just after it returned to standby.
		require.NotZero(t, st.Wakes, "%s never woke", br.b.name)
		calls += st.RejoinCalls
		require.False(t, br.left(bridgedNames...), "%s reported a bridged process gone", br.b.name)
		require.True(t, br.left("ml-x"), "%s did not report ml-x gone", br.b.name)
	}
	require.NotZero(t, calls)
	for _, br := range brs {
		require.NoError(t, br.b.Shutdown())
	}
}

// TestConfigErrors: each bad Config is refused by New with its reason,
// before anything listens.
func TestConfigErrors(t *testing.T) {
	good := func() Config {
		sc := swim.DefaultLocalConfig()
		sc.Name = "p"
		sc.BindAddr = "127.0.0.1"
		sc.BindPort = 0
		return Config{Memberlist: mlConfig("p"), Swim: sc}
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no memberlist config", func(c *Config) { c.Memberlist = nil }, "both required"},
		{"no swim config", func(c *Config) { c.Swim = nil }, "both required"},
		{"memberlist delegate set", func(c *Config) { c.Memberlist.Delegate = &mlApp{} }, "Delegate and Events are the Bridge's"},
		{"swim events set", func(c *Config) { c.Swim.Events = swim.EventFunc(func(swim.Event) {}) }, "are the Bridge's"},
		{"two names", func(c *Config) { c.Swim.Name = "q" }, "a process has one name"},
		{"meta too big", func(c *Config) { c.Meta = make([]byte, memberlist.MetaMaxSize+1) }, "over memberlist's"},
		{"negative offset", func(c *Config) { c.SwimPortOffset = -1 }, "SwimPortOffset must not be negative"},
		{"negative grace", func(c *Config) { c.StandbyGrace = -time.Second }, "StandbyGrace must not be negative"},
		{"standby both ways", func(c *Config) { c.StartInStandby, c.NoStandby = true, true }, "contradict"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.edit(&c)
			b, err := New(c)
			require.Nil(t, b)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestNoStandby: with Config.NoStandby a process that leaves migration
// mode gives its memberlist port up.
func TestNoStandby(t *testing.T) {
	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	br := startBridged(t, "br-0", addrs, func(c *Config) { c.NoStandby = true })
	port := br.b.Memberlist().LocalNode().Port
	require.NoError(t, br.b.LeaveMemberlist(context.Background()))
	require.Equal(t, PhaseSwim, br.b.Phase())
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err, "the memberlist port is still held")
	require.NoError(t, ln.Close())
	require.NoError(t, br.b.Shutdown())
}

// TestStrayStreamWakesBriefly: a stream to a standby port that brings no
// process running memberlist alone (a bridged peer's push-pull, a port
// scan) wakes the process, which calls nobody and is back in standby
// after wakeCheck, well before StandbyGrace.
func TestStrayStreamWakesBriefly(t *testing.T) {
	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	br := startBridged(t, "br-0", addrs, func(c *Config) { c.StandbyGrace = time.Hour })
	port := br.b.Memberlist().LocalNode().Port
	require.NoError(t, br.b.LeaveMemberlist(context.Background()))
	require.Equal(t, PhaseStandby, br.b.Phase())

	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { return br.b.Stats().Wakes == 1 }, within, pollEvery, "the stream did not wake it")
	inStandby(t, []*bridged{br}) // within a minute: the grace is an hour
	st := br.b.Stats()
	require.Zero(t, st.RejoinCalls, "a stray stream called the cluster back")
	require.Equal(t, uint64(1), st.Wakes)
	require.NoError(t, br.b.Shutdown())
}

// TestBridgedJoinThroughStandby: a bridged process that joins through a
// standby port wakes that process only: it is not running memberlist
// alone (its swim join succeeds), so nobody is called back.
func TestBridgedJoinThroughStandby(t *testing.T) {
	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	grace := func(c *Config) { c.StandbyGrace = time.Hour }
	a := startBridged(t, "br-0", addrs, grace)
	b := startBridged(t, "br-1", addrs, grace)
	seed := mlAddr(a.b.Memberlist().LocalNode()).String()
	_, err := b.b.Join(context.Background(), seed)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.b.Memberlist().NumMembers() == 2 && a.b.Swim().NumMembers() == 2 }, within, pollEvery)
	pair := []*bridged{a, b}
	leaveOneAtATime(t, pair)
	inStandby(t, pair)

	c := startBridged(t, "br-2", addrs, grace)
	_, err = c.b.Join(context.Background(), seed)
	require.NoError(t, err, "the standby port did not answer the join")
	all := []string{"br-0", "br-1", "br-2"}
	require.Eventually(t, func() bool {
		for _, br := range []*bridged{a, b, c} {
			if !slices.Equal(all, names(br.b.Members())) {
				return false
			}
		}
		return true
	}, within, pollEvery, "br-2 was not seen by all")
	inStandby(t, pair) // within a minute: the grace is an hour
	require.Equal(t, uint64(1), a.b.Stats().Wakes)
	require.Zero(t, a.b.Stats().RejoinCalls, "a bridged joiner called the cluster back")
	require.Zero(t, b.b.Stats().Wakes, "a process the joiner did not contact woke")
	for _, br := range []*bridged{a, b, c} {
		require.NoError(t, br.b.Shutdown())
	}
}

// TestStartInStandby: a process restarted after the cluster left
// migration mode starts in standby: it joins the others' swim sides
// through their memberlist addresses, runs no memberlist, and its port
// wakes like any standby port when a process running memberlist alone
// joins through it.
func TestStartInStandby(t *testing.T) {
	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	grace := func(c *Config) { c.StandbyGrace = 2 * time.Second }
	a := startBridged(t, "br-0", addrs, grace)
	b := startBridged(t, "br-1", addrs, grace)
	_, err := b.b.Join(context.Background(), a.b.MemberlistAddr().String())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.b.Memberlist().NumMembers() == 2 && a.b.Swim().NumMembers() == 2 }, within, pollEvery)
	pair := []*bridged{a, b}
	leaveOneAtATime(t, pair)
	inStandby(t, pair)

	c := startBridged(t, "br-2", addrs, grace, func(c *Config) { c.StartInStandby = true })
	require.Equal(t, PhaseStandby, c.b.Phase())
	require.Nil(t, c.b.Memberlist())
	n, err := c.b.Join(context.Background(), a.b.MemberlistAddr().String())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	three := []*bridged{a, b, c}
	bridgedNames := []string{"br-0", "br-1", "br-2"}
	require.Eventually(t, func() bool {
		for _, br := range three {
			if !slices.Equal(bridgedNames, names(br.b.Members())) {
				return false
			}
		}
		return true
	}, within, pollEvery, "br-2 did not join the swim sides")
	require.Zero(t, a.b.Stats().Wakes, "a swim join woke a standby port")

	m := startMLApp(t, "ml-x")
	_, err = m.ml.Join([]string{c.b.MemberlistAddr().String()})
	require.NoError(t, err, "the standby port of a process started in standby did not answer")
	require.Eventually(t, func() bool {
		if m.alive() != 4 {
			return false
		}
		for _, br := range three {
			if !slices.Contains(names(br.b.Members()), "ml-x") {
				return false
			}
		}
		return true
	}, within, pollEvery, "the cluster did not come back around ml-x")
	require.NoError(t, m.ml.Leave(5*time.Second))
	m.shutdown(t)
	inStandby(t, three)
	for _, br := range three {
		require.NoError(t, br.b.Shutdown())
	}
}

// TestBroadcastQueueNeverWaitsForBridge: memberlist's goroutines take the
// broadcast queue's lock and then ask the queue's node count; leaving
// migration mode resets the queue with the Bridge's lock held. A count
// that took the Bridge's lock would close the circle, and a process
// leaving the memberlist side while it gossiped would hang for good (a
// woken process never returning to standby). The count must answer while
// the Bridge's lock is held.
func TestBroadcastQueueNeverWaitsForBridge(t *testing.T) {
	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	br := startBridged(t, "br-0", addrs)
	require.NoError(t, br.b.Broadcast([]byte("x"), ""))
	got := make(chan int, 1)
	br.b.mu.Lock()
	go func() { got <- len(br.b.queue.GetBroadcasts(0, 1<<16)) }()
	var n int
	waited := false
	select {
	case n = <-got:
	case <-time.After(within):
		waited = true
	}
	br.b.mu.Unlock()
	if waited {
		n = <-got
	}
	require.False(t, waited, "the broadcast queue waited for the Bridge's lock")
	require.Equal(t, 1, n)
	require.NoError(t, br.b.Shutdown())
}

// A Bridge given only memberlist's key and label secures its swim side
// with them: a swim process with no key cannot join it, nor appear in the
// application's view; one with the key and label joins. SwimPlaintext
// keeps the swim side open, as it was before.
func TestSwimSideTakesMemberlistSecurity(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	secure := func(c *Config) {
		c.Memberlist.SecretKey = key
		c.Memberlist.Label = "prod"
	}
	outsider := func(name string, keys [][]byte, label string) *swim.Memberlist {
		c := swim.DefaultLocalConfig()
		c.Name = name
		c.BindAddr = "127.0.0.1"
		c.BindPort = 0
		c.Security.Keys = keys
		c.Label = label
		m, err := swim.New(c)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Shutdown() })
		return m
	}
	joinSwim := func(m *swim.Memberlist, br *bridged) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := m.Join(ctx, br.b.Swim().LocalMember().Addr.String())
		return err
	}

	addrs := &swimAddrs{m: map[string]netip.AddrPort{}}
	br := startBridged(t, "br-secure", addrs, secure)
	t.Cleanup(func() { _ = br.b.Shutdown() })
	require.Error(t, joinSwim(outsider("no-key", nil, ""), br), "a process with no key joined the swim side")
	require.NoError(t, joinSwim(outsider("with-key", [][]byte{key}, "prod"), br))
	require.Eventually(t, func() bool { return slices.Contains(names(br.b.Members()), "with-key") }, within, pollEvery)
	require.NotContains(t, names(br.b.Members()), "no-key")

	open := startBridged(t, "br-open", addrs, secure, func(c *Config) { c.SwimPlaintext = true })
	t.Cleanup(func() { _ = open.b.Shutdown() })
	require.NoError(t, joinSwim(outsider("no-key-2", nil, ""), open), "SwimPlaintext keeps the swim side open")
}
