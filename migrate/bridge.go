package migrate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim"
)

// Config is a process in migration mode.
type Config struct {
	// Memberlist is the old side: the configuration the process ran
	// hashicorp/memberlist with, unchanged (Name, BindAddr, BindPort,
	// SecretKey or Keyring, Label, timings). Its Delegate and Events
	// must be nil: the Bridge sets them.
	Memberlist *memberlist.Config
	// Swim is the new side, on a port of its own. Its Name must be the
	// memberlist Name; its Events, Messages, State and Meta must be
	// unset: the Bridge sets them from the fields below.
	Swim *swim.Config
	// SwimAddr returns where a process of the old cluster, if bridged,
	// runs its swim side: every bridged process uses the same rule.
	// Nil: its memberlist address, port plus SwimPortOffset.
	SwimAddr func(node *memberlist.Node) netip.AddrPort
	// SwimPortOffset is the distance from a process's memberlist port to
	// its swim port, for the default SwimAddr. Default 1.
	SwimPortOffset int
	// BroadcastRetransmitMult is the RetransmitMult of the memberlist
	// side's broadcast queue (memberlist.TransmitLimitedQueue): the one
	// the application's own queue had. Default: Memberlist.RetransmitMult.
	BroadcastRetransmitMult int
	// Meta is this process's metadata, announced on both sides; at most
	// memberlist.MetaMaxSize bytes.
	Meta []byte
	// Events receives the events of the one view, in order, on a
	// goroutine of its own. Nil discards them.
	Events swim.EventHandler
	// Messages receives the messages and broadcasts that reach this
	// process on either side. Those of the memberlist side have Kind
	// swim.MessageBestEffort and no From: memberlist does not say who
	// sent them. Nil drops them. The Bridge's own calls back into
	// migration mode (swim broadcasts starting with a NUL byte and
	// "swim/migrate rejoin") are kept from it.
	Messages swim.MessageHandler
	// State is the application's state exchange: both sides' push-pulls
	// call it. Nil: none.
	State swim.StateDelegate
	// EventBuffer bounds the events waiting for Events; past it they are
	// dropped, counted (Stats). Default 4096.
	EventBuffer int
	// StandbyGrace is how long a process woken from standby stays in
	// migration mode after the last process running memberlist alone is
	// gone. Default 30 s (memberlist's LAN push-pull interval).
	StandbyGrace time.Duration
	// NoStandby gives the memberlist port up when the process leaves
	// migration mode. By default a process keeps it (standby), so that a
	// process rolled back to memberlist alone after the cluster left the
	// mode brings the cluster back into it instead of standing alone.
	NoStandby bool
	// SwimPlaintext keeps the swim side without encryption and label
	// when Config.Swim sets none. By default the swim side takes the
	// memberlist side's keys (Keyring, primary first, or SecretKey) and
	// Label when Config.Swim has no Security.Keys or no Label of its own:
	// a process in migration mode must not open its swim side to those
	// its memberlist side keeps out.
	SwimPlaintext bool
	// StartInStandby starts the process out of migration mode, its
	// memberlist port in standby: for a process restarted after it left
	// the mode (step 4 of docs/migrating.md). Join then joins the swim
	// sides of the seeds it is given.
	StartInStandby bool
}

// Errors of the Bridge.
var (
	ErrNotMember = errors.New("migrate: no live member of that name on either side")
)

// Bridge is a process in migration mode: a member of the old memberlist
// cluster and of the swim cluster at once, with one view.
type Bridge struct {
	cfg   Config
	name  string
	sw    *swim.Memberlist
	queue *memberlist.TransmitLimitedQueue

	mu sync.Mutex
	ml *memberlist.Memberlist // nil while the memberlist side is out
	// mc is the memberlist side's configuration as memberlist took it
	// (its port bound): a side woken from standby runs on it.
	mc *memberlist.Config
	// sb is the standby port, once the process left migration mode; a
	// memberlist side while it is open is one woken on it.
	sb *standby
	// transit orders the memberlist side's comings and goings: leaving,
	// waking and Shutdown.
	transit sync.Mutex
	// mlNodes is the memberlist side's view, by name, as its events
	// told it; the swim side's is read from swim itself.
	mlNodes map[string]memberlist.Node
	// queueNodes is the node count the broadcast queue scales its
	// retransmits by, kept apart from mu: memberlist's goroutines ask it
	// with the queue's lock held, and leaveMemberlist resets the queue
	// with mu held.
	queueNodes atomic.Int64
	view       map[string]swim.Member // the one view's live members, by name
	tried      map[string]time.Time   // swim joins attempted, by name
	// noSwim holds the peers whose swim join failed since they joined
	// memberlist: they run memberlist alone, for certain.
	noSwim map[string]bool
	stats  Stats

	events *eventQueue
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Stats counts what the Bridge did beyond its two sides' own counters.
type Stats struct {
	SwimJoinsTried       uint64 // swim joins of bridged peers found through memberlist
	SwimJoinsFailed      uint64 // ... that failed: the peer runs memberlist alone
	EventsDropped        uint64 // events past EventBuffer
	StateMergeErrors     uint64 // the memberlist side's MergeRemoteState errors
	BroadcastsMemberlist uint64 // broadcasts queued on the memberlist side
	// Standby: packets that reached the port while asleep (dropped),
	// wakes, wakes whose memberlist side failed to start, and calls back
	// into migration mode sent on swim.
	StandbyPacketsDropped uint64
	Wakes                 uint64
	WakeFailures          uint64
	RejoinCalls           uint64
}

// New starts both sides; neither has joined anyone yet (Join).
func New(cfg Config) (*Bridge, error) {
	switch {
	case cfg.Memberlist == nil || cfg.Swim == nil:
		return nil, errors.New("migrate: Config.Memberlist and Config.Swim are both required")
	case cfg.Memberlist.Delegate != nil || cfg.Memberlist.Events != nil:
		return nil, errors.New("migrate: Config.Memberlist.Delegate and Events are the Bridge's: set Config.Messages, State, Meta and Events instead")
	case cfg.Swim.Events != nil || cfg.Swim.Messages != nil || cfg.Swim.State != nil || len(cfg.Swim.Meta) > 0:
		return nil, errors.New("migrate: Config.Swim.Events, Messages, State and Meta are the Bridge's: set them on Config")
	case cfg.Swim.Name != cfg.Memberlist.Name:
		return nil, fmt.Errorf("migrate: swim name %q and memberlist name %q differ: a process has one name", cfg.Swim.Name, cfg.Memberlist.Name)
	case len(cfg.Meta) > memberlist.MetaMaxSize:
		return nil, fmt.Errorf("migrate: Meta of %d bytes, over memberlist's %d", len(cfg.Meta), memberlist.MetaMaxSize)
	case cfg.SwimPortOffset < 0:
		return nil, errors.New("migrate: SwimPortOffset must not be negative")
	case cfg.StandbyGrace < 0:
		return nil, errors.New("migrate: StandbyGrace must not be negative")
	case cfg.StartInStandby && cfg.NoStandby:
		return nil, errors.New("migrate: StartInStandby and NoStandby contradict each other")
	}
	if cfg.StandbyGrace == 0 {
		cfg.StandbyGrace = 30 * time.Second
	}
	if cfg.SwimPortOffset == 0 {
		cfg.SwimPortOffset = 1
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 4096
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{
		cfg:     cfg,
		name:    cfg.Swim.Name,
		mlNodes: make(map[string]memberlist.Node),
		view:    make(map[string]swim.Member),
		tried:   make(map[string]time.Time),
		noSwim:  make(map[string]bool),
		ctx:     ctx,
		cancel:  cancel,
	}
	b.events = newEventQueue(cfg.EventBuffer, cfg.Events)
	b.queueNodes.Store(1)

	sc := *cfg.Swim
	if !cfg.SwimPlaintext {
		secureLikeMemberlist(&sc, cfg.Memberlist)
	}
	sc.Meta = cfg.Meta
	sc.Events = swim.EventFunc(b.swimEvent)
	sc.Messages = swim.MessageFunc(b.swimMessage)
	sc.State = cfg.State
	sw, err := swim.New(&sc)
	if err != nil {
		cancel()
		b.events.close()
		return nil, fmt.Errorf("migrate: swim side: %w", err)
	}
	b.sw = sw

	mc := *cfg.Memberlist
	retransmits := cfg.BroadcastRetransmitMult
	if retransmits <= 0 {
		retransmits = mc.RetransmitMult
	}
	b.queue = &memberlist.TransmitLimitedQueue{NumNodes: b.numMemberlistNodes, RetransmitMult: retransmits}
	mc.Delegate = (*mlDelegate)(b)
	mc.Events = (*mlEvents)(b)
	if cfg.StartInStandby {
		b.mc = &mc
		b.transit.Lock()
		err := b.openStandby(b.standbyAdvertise())
		b.transit.Unlock()
		if err != nil {
			_ = sw.Shutdown()
			cancel()
			b.events.close()
			return nil, err
		}
		return b, nil
	}
	ml, err := memberlist.Create(&mc)
	if err != nil {
		_ = sw.Shutdown()
		cancel()
		b.events.close()
		return nil, fmt.Errorf("migrate: memberlist side: %w", err)
	}
	b.mu.Lock()
	b.ml = ml
	b.mc = &mc
	b.mu.Unlock()
	return b, nil
}

// secureLikeMemberlist gives the swim side sc the memberlist side's keys
// and label where it has none of its own.
func secureLikeMemberlist(sc *swim.Config, mc *memberlist.Config) {
	if len(sc.Security.Keys) == 0 {
		switch {
		case mc.Keyring != nil && mc.Keyring.GetPrimaryKey() != nil:
			primary := mc.Keyring.GetPrimaryKey()
			keys := [][]byte{primary}
			for _, k := range mc.Keyring.GetKeys() {
				if string(k) != string(primary) {
					keys = append(keys, k)
				}
			}
			sc.Security.Keys = keys
		case len(mc.SecretKey) > 0:
			sc.Security.Keys = [][]byte{mc.SecretKey}
		}
	}
	if sc.Label == "" {
		sc.Label = mc.Label
	}
}

// Swim returns the swim side, for what the Bridge does not pass on
// (Stats, keys, signatures).
func (b *Bridge) Swim() *swim.Memberlist { return b.sw }

// Memberlist returns the memberlist side, nil once it left.
func (b *Bridge) Memberlist() *memberlist.Memberlist {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ml
}

// Join joins the old cluster through seeds (memberlist addresses), then
// the swim sides of the bridged processes it finds there. It returns how
// many memberlist seeds answered. Out of migration mode (standby), it
// joins the seeds' swim sides (Config.SwimAddr, given a Node with the
// seed's address and port only) and returns how many answered.
func (b *Bridge) Join(ctx context.Context, seeds ...string) (int, error) {
	ml := b.Memberlist()
	if ml == nil {
		return b.joinSwimOf(ctx, seeds)
	}
	n, err := ml.Join(seeds)
	if err != nil {
		return n, fmt.Errorf("migrate: memberlist join: %w", err)
	}
	for _, node := range ml.Members() {
		if node.Name != b.name {
			b.findSwim(node)
		}
	}
	return n, nil
}

// joinSwimOf joins the swim sides of seeds, memberlist addresses.
func (b *Bridge) joinSwimOf(ctx context.Context, seeds []string) (int, error) {
	var addrs []string
	for _, seed := range seeds {
		host, portText, err := net.SplitHostPort(seed)
		if err != nil {
			return 0, fmt.Errorf("migrate: seed %q: %w", seed, err)
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("migrate: seed %q: port: %w", seed, err)
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return 0, fmt.Errorf("migrate: seed %q: %w", seed, err)
		}
		for _, ip := range ips {
			node := &memberlist.Node{Addr: net.IP(ip.Unmap().AsSlice()), Port: uint16(port)}
			if a := b.swimAddrOf(node); a.IsValid() {
				addrs = append(addrs, a.String())
			}
		}
	}
	if len(addrs) == 0 {
		return 0, fmt.Errorf("migrate: no swim address for the seeds %q", seeds)
	}
	return b.sw.Join(ctx, addrs...)
}

// JoinSwim joins the swim cluster through addrs directly: once every
// process has left migration mode, or to join bridged processes whose
// addresses are known.
func (b *Bridge) JoinSwim(ctx context.Context, addrs ...string) (int, error) {
	return b.sw.Join(ctx, addrs...)
}

// swimRetry is how long after a failed swim join of a peer found through
// memberlist the Bridge tries it again: a process that runs memberlist
// alone may be replaced by a bridged one at any time.
const swimRetry = 10 * time.Second

// findSwim joins the swim side of node, a member of the old cluster, if
// it is bridged and not known on swim yet, in the background.
func (b *Bridge) findSwim(node *memberlist.Node) {
	if mb, ok := b.sw.Member(node.Name); ok && (mb.State == swim.StateAlive || mb.State == swim.StateSuspect) {
		return
	}
	addr := b.swimAddrOf(node)
	if !addr.IsValid() {
		// SwimAddr knows no swim side for it: it runs memberlist alone.
		b.mu.Lock()
		b.noSwim[node.Name] = true
		b.mu.Unlock()
		return
	}
	b.mu.Lock()
	if t, ok := b.tried[node.Name]; (ok && time.Since(t) < swimRetry) || b.ctx.Err() != nil {
		b.mu.Unlock()
		return
	}
	b.tried[node.Name] = time.Now()
	b.stats.SwimJoinsTried++
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		defer cancel()
		_, err := b.sw.Join(ctx, addr.String())
		b.mu.Lock()
		if err != nil {
			b.stats.SwimJoinsFailed++
			b.noSwim[node.Name] = true
		} else {
			delete(b.noSwim, node.Name)
		}
		b.mu.Unlock()
	}()
}

func (b *Bridge) swimAddrOf(node *memberlist.Node) netip.AddrPort {
	if b.cfg.SwimAddr != nil {
		return b.cfg.SwimAddr(node)
	}
	ip, ok := netip.AddrFromSlice(node.Addr)
	if !ok {
		return netip.AddrPort{}
	}
	port := int(node.Port) + b.cfg.SwimPortOffset
	if port > 65535 {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(port))
}

// MemberlistOnly returns the names of the processes that run memberlist
// alone: alive on the memberlist side and unknown or gone on swim. When
// it is empty on every process, the cluster may leave migration mode.
func (b *Bridge) MemberlistOnly() []string {
	b.mu.Lock()
	nodes := make([]memberlist.Node, 0, len(b.mlNodes))
	for _, n := range b.mlNodes {
		nodes = append(nodes, n)
	}
	b.mu.Unlock()
	var out []string
	for _, n := range nodes {
		if n.Name == b.name || n.State != memberlist.StateAlive && n.State != memberlist.StateSuspect {
			continue
		}
		if mb, ok := b.sw.Member(n.Name); ok && (mb.State == swim.StateAlive || mb.State == swim.StateSuspect) {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}

// LeaveMemberlist takes this process out of migration mode: it leaves the
// old cluster gracefully, stops its memberlist side and keeps its port in
// standby (unless Config.NoStandby). Do it once MemberlistOnly is empty
// everywhere; the processes still bridged keep this one in their view
// through swim.
func (b *Bridge) LeaveMemberlist(ctx context.Context) error {
	ml := b.Memberlist()
	if ml == nil {
		return nil
	}
	return b.leaveMemberlist(ctx, ml, !b.cfg.NoStandby)
}

// leaveMemberlist leaves and stops ml, if it is still the memberlist
// side, and opens the standby port if keep and it is not open.
func (b *Bridge) leaveMemberlist(ctx context.Context, ml *memberlist.Memberlist, keep bool) error {
	b.transit.Lock()
	defer b.transit.Unlock()
	if b.Memberlist() != ml {
		return nil
	}
	adv := mlAddr(ml.LocalNode())
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	leaveErr := ml.Leave(timeout)
	shutErr := ml.Shutdown()
	b.mu.Lock()
	b.ml = nil
	names := make([]string, 0, len(b.mlNodes))
	for name := range b.mlNodes {
		names = append(names, name)
	}
	clear(b.mlNodes)
	b.countNodes()
	for _, name := range names {
		b.refresh(name)
	}
	b.queue.Reset()
	stopping := b.ctx.Err() != nil
	b.mu.Unlock()
	var sbErr error
	if keep && b.sb == nil && !stopping {
		sbErr = b.openStandby(adv)
	}
	return errors.Join(leaveErr, shutErr, sbErr)
}

// openStandby keeps the memberlist port (b.transit held).
func (b *Bridge) openStandby(adv netip.AddrPort) error {
	ip, err := netip.ParseAddr(b.mc.BindAddr)
	if err != nil {
		return fmt.Errorf("migrate: standby: bind address %q: %w", b.mc.BindAddr, err)
	}
	bind := netip.AddrPortFrom(ip, uint16(b.mc.BindPort))
	s, err := openStandby(bind, adv)
	if err != nil {
		return fmt.Errorf("migrate: standby on %v: %w", bind, err)
	}
	// Port 0 bound a free one: a side woken on it runs there.
	b.mc.BindPort = s.tcp.Addr().(*net.TCPAddr).Port
	s.wg.Add(2)
	go b.standbyPackets(s)
	go b.standbyStreams(s)
	b.mu.Lock()
	b.sb = s
	b.mu.Unlock()
	return nil
}

// standbyAdvertise is the memberlist address of a process that starts in
// standby, as memberlist's own transport picks it: AdvertiseAddr and
// AdvertisePort if AdvertiseAddr is set, else the bound address (swim's
// advertised IP where that is unspecified) and port. Port 0 stands for
// the port the standby binds.
func (b *Bridge) standbyAdvertise() netip.AddrPort {
	port := uint16(b.mc.BindPort)
	if ip, err := netip.ParseAddr(b.mc.AdvertiseAddr); err == nil {
		if b.mc.BindPort != 0 {
			port = uint16(b.mc.AdvertisePort)
		}
		return netip.AddrPortFrom(ip.Unmap(), port)
	}
	if ip, err := netip.ParseAddr(b.mc.BindAddr); err == nil && !ip.IsUnspecified() {
		return netip.AddrPortFrom(ip.Unmap(), port)
	}
	return netip.AddrPortFrom(b.sw.LocalMember().Addr.Addr(), port)
}

// Leave leaves both clusters gracefully; the memberlist port is not kept.
func (b *Bridge) Leave(ctx context.Context) error {
	var err error
	if ml := b.Memberlist(); ml != nil {
		err = b.leaveMemberlist(ctx, ml, false)
	}
	return errors.Join(err, b.sw.Leave(ctx))
}

// Shutdown stops both sides without leaving, closes the standby port, and
// waits for the Bridge's goroutines.
func (b *Bridge) Shutdown() error {
	b.mu.Lock()
	b.cancel()
	b.mu.Unlock()
	b.transit.Lock()
	b.mu.Lock()
	ml, sb := b.ml, b.sb
	b.ml, b.sb = nil, nil
	b.mu.Unlock()
	b.transit.Unlock()
	var err error
	if ml != nil {
		err = ml.Shutdown()
	}
	if sb != nil {
		sb.close()
	}
	err = errors.Join(err, b.sw.Shutdown())
	b.wg.Wait()
	b.events.close()
	return err
}

// Stats returns the Bridge's counters.
func (b *Bridge) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stats
	st.EventsDropped = b.events.dropped.Load()
	return st
}

func (b *Bridge) numMemberlistNodes() int { return int(b.queueNodes.Load()) }

// countNodes updates queueNodes after the memberlist side or its view
// changed (b.mu held).
func (b *Bridge) countNodes() {
	n := 1
	if b.ml != nil {
		n = max(len(b.mlNodes), 1)
	}
	b.queueNodes.Store(int64(n))
}

// mlAddr is node's memberlist address.
func mlAddr(n *memberlist.Node) netip.AddrPort {
	ip, _ := netip.AddrFromSlice(n.Addr)
	return netip.AddrPortFrom(ip.Unmap(), n.Port)
}
