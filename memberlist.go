package swim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swim-go/swim/internal/ratelog"
	"go.uber.org/zap"
)

// ErrShutdown is returned by every Memberlist call made after Shutdown.
var ErrShutdown = errors.New("swim: memberlist is shut down")

// Memberlist drives a Machine over a Transport with real time: the
// ready-to-use member of a cluster. Create it with New, add it to a cluster
// with Join, watch the cluster through Config.Events or Members, and end it
// with Leave (optional) and Shutdown.
//
// One mutex guards the Machine, and each input is fed to it under that
// mutex by the goroutine the input arrives on: a packet by the transport's
// reader (PacketHandlerTransport; the loop goroutine for a transport that
// only has the Packets channel), a deadline by the loop goroutine, the
// outcome of a stream exchange by that exchange's goroutine, an API call by
// its caller. Memberlist hands no input from one goroutine to another to
// be fed: each hand-off is a goroutine wake-up, which at a member's few
// packets a second is a large part of its CPU cost. The Machine's output is
// taken before the mutex is released, and the packets in it are sent
// after, so nothing waits for the network while holding it. Members,
// NumMembers, LocalMember, Stats and HealthScore read the Machine under the
// mutex's read side. Events reach Config.Events on a goroutine of their
// own, in order and outside every lock, so a callback may call any method,
// Shutdown included.
//
// All methods are safe for concurrent use.
type Memberlist struct {
	cfg       Config
	logger    *zap.Logger
	transport Transport
	machine   *Machine // fed under mu only, once New returns

	// mu guards the machine and the bookkeeping below that goes with its
	// inputs and outputs. It is held from the start of an input to the
	// moment its output is taken, never while anyone waits for the network
	// or for another goroutine. Members, NumMembers and LocalMember read
	// the table under its read lock and build their view on demand:
	// publishing a copy after every change would cost O(N) per change,
	// O(N³) CPU for an N-member process to boot.
	mu     sync.RWMutex
	timer  *time.Timer // wakes the loop at the machine's deadline; set under mu
	armed  time.Time   // the deadline timer is set for; zero when stopped
	closed bool        // Shutdown has begun: no input is fed any more

	// Pacing of large merges (paceMerge): when the loop may apply the
	// next slice, the packets fed so far and as of the last slice.
	mergeRest  time.Time
	fed        uint64
	fedAtSlice uint64

	// sending counts the inputs whose packets are still being handed to
	// the transport, after mu was released: Shutdown waits for them before
	// it closes the transport. Added to under mu while not closed.
	sending sync.WaitGroup

	events *eventQueue // the dispatcher's queue, at most EventBuffer long; nil without Config.Events

	// Slots for the TCP exchanges in flight, MaxConcurrentStreams in each
	// direction: a flood of inbound exchanges cannot starve this member's
	// own joins and push-pulls, nor the reverse. The inbound ones are
	// shared among source addresses (memberlist_streamlimits.go).
	outSem    chan struct{}
	inStreams *inboundSlots

	// stop is closed by Shutdown; ctx is cancelled with it and bounds every
	// dial, read and write of the stream goroutines.
	stop   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc

	wg             sync.WaitGroup // the loop and the stream goroutines
	loopDone       chan struct{}
	dispatcherDone chan struct{} // nil without Config.Events and Config.Messages
	inCallback     atomic.Bool   // the dispatcher is running the Events handler, see Shutdown
	shutdownOnce   sync.Once
	shutdownDone   chan struct{} // closed when all but the dispatcher have ended
	shutdownErr    error

	eventsDropped     atomic.Uint64
	messagesDropped   atomic.Uint64
	messagesUnhandled atomic.Uint64
	statesTooLarge    atomic.Uint64
	stateMergeErrors  atomic.Uint64
	streamsRefused    atomic.Uint64

	// Refused streams (memberlist_streamlimits.go), counted and logged at most once
	// per kind per 10 s.
	streamsRefusedPerSource atomic.Uint64
	streamsTimedOut         atomic.Uint64
	streamsTooLarge         atomic.Uint64
	streamsOverBudget       atomic.Uint64
	inBytes                 byteBudget // of the inbound requests being read or handled
	refusals                *ratelog.Log

	// The Machine's refusals already logged (logTableRefusals); under mu.
	membersRefusedSeen, pushPullsRefusedSeen uint64

	// Seed names retried in the background (memberlist_seeds.go).
	seedMu    sync.Mutex
	seedNames seedNames
	// seedLookup resolves seed names; nil means the system's resolver.
	// Tests set it before Join to control what a name resolves to, and
	// when.
	seedLookup        lookupFunc
	seedLookupsFailed atomic.Uint64

	// keys is the keyring (memberlist_keyring.go), read by every packet and stream
	// without a lock.
	keys keyStore
	sec  *security // label, Security.AllowedCIDRs, Security.StreamTLS, refusals (memberlist_security.go)

	// Guarded by mu.
	joins      map[uint64]*joinWaiter // outbound exchanges a Join waits for
	leaveDone  chan struct{}          // closed when Machine.LeaveDone holds; nil before Leave
	leaveShown bool                   // leaveDone is closed, or about to be by the input that saw LeaveDone
	refused    []streamResult         // outbound exchanges refused for want of a slot, for the loop to report
	dropping   bool                   // the dispatcher queue is full of events
	// droppingMessages: of messages
	droppingMessages bool
	// outcomes routes each Outcome of the Machine (SendReliable,
	// Broadcast) to the caller waiting for it.
	outcomes map[uint64]chan<- error
	// room, when set, is closed (and cleared) by the first output after
	// which Broadcast would no longer refuse for a full queue: the wake-up
	// of BroadcastWait's callers.
	room  chan struct{}
	pings map[uint64]chan<- Outcome // Ping's outcomes, carrying the round trip
}

// MemberlistStats are the core's counters plus the driver's own.
type MemberlistStats struct {
	Stats
	// EventsDropped counts events discarded because EventBuffer events were
	// already waiting for the Events handler.
	EventsDropped uint64
	// MessagesDropped counts application messages discarded, or reliable
	// ones refused before their acknowledgement, because MessageBuffer
	// messages or MessageBufferBytes of them were already waiting for the
	// Messages handler; MessagesUnhandled those discarded for want of one.
	MessagesDropped, MessagesUnhandled uint64
	// StatesTooLarge counts LocalStates over MaxStateSize, not sent;
	// StateMergeErrors the errors MergeRemoteState returned.
	StatesTooLarge, StateMergeErrors uint64
	// SeedLookupsFailed counts the lookups of seed names that failed,
	// in Join and in the retries while this member is alone.
	SeedLookupsFailed uint64
	// StreamsRefused counts TCP exchanges refused because
	// MaxConcurrentStreams exchanges in the same direction (inbound or
	// outbound) were already in flight (and, inbound, no source address
	// held more than MaxStreamsPerSource of them to make room).
	StreamsRefused uint64

	// Traffic refused before the protocol saw it, packets and streams
	// alike; each kind is also logged as a warning, at most once per 10 s.
	//
	// RefusedSource: the source address is outside Config.Security.AllowedCIDRs.
	RefusedSource uint64
	// RefusedLabel: no label, or another one than Config.Label.
	RefusedLabel uint64
	// RefusedPlaintext: plaintext while this member requires encryption.
	RefusedPlaintext uint64
	// RefusedKey: sealed, but no installed key opens it (a wrong key, a
	// tampered or truncated packet, or no key installed).
	RefusedKey uint64
	// RefusedTLS: inbound streams whose TLS handshake failed (no client
	// certificate, an untrusted one, not TLS at all) with Config.Security.StreamTLS
	// set. A dialled stream whose server fails verification fails the
	// exchange instead (PushPullsFailed, TCPPingsFailed, Join's error).
	RefusedTLS uint64
	// StreamsRefusedPerSource: inbound streams refused, while every slot
	// was in use, because their source address already held
	// MaxStreamsPerSource; and streams closed to give their slot to an
	// address that held fewer (see Config.MaxStreamsPerSource).
	StreamsRefusedPerSource uint64
	// StreamsTimedOut: inbound streams closed because their request did
	// not arrive in time: its length header within the first-bytes
	// deadline (see Config.StreamTimeout), or the rest within
	// StreamTimeout; or, with every slot taken and every source within
	// its share, closed before their request was authenticated to give
	// their slot to a new stream.
	StreamsTimedOut uint64
	// StreamsTooLarge: stream messages, inbound requests and replies to
	// this member's exchanges alike, refused for announcing more than
	// MaxStreamBytes.
	StreamsTooLarge uint64
	// StreamsOverBudget: inbound stream messages refused because the
	// requests already being read or handled hold 4·MaxStreamBytes.
	StreamsOverBudget uint64
}

// New starts a member: it validates cfg (returning a *ConfigError naming the
// first bad field), opens cfg.Transport or a NetTransport on
// BindAddr:BindPort, and starts the protocol. The member is alone until Join.
// cfg is copied; later changes to it have no effect.
func New(cfg *Config) (*Memberlist, error) {
	if cfg == nil {
		return nil, &ConfigError{Field: "Config", Reason: "is nil"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := *cfg
	c.Meta = bytes.Clone(cfg.Meta)
	generated := len(c.Claims.Identity) == 0
	if generated {
		// A key per process: the name is bound to it on first use.
		_, c.Claims.Identity, _ = ed25519.GenerateKey(crand.Reader)
	}
	logger := c.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("swim").With(zap.String("member", c.Name))
	c.Logger = logger
	if generated && c.Claims.Signatures == SignaturesRequired && len(c.Claims.TrustedRoots) == 0 {
		logger.Warn("signatures required without a Claims.Identity: the key generated for this process does not survive a restart, " +
			"and the cluster keeps the name bound to it until it forgets the member, so a restart under this name is refused; " +
			"give the member a persistent identity (or trusted roots)")
	}

	transport := c.Transport
	if transport == nil {
		nt, err := NewNetTransport(&NetTransportConfig{
			BindAddr:             c.BindAddr,
			BindPort:             c.BindPort,
			AdvertiseAddr:        c.AdvertiseAddr,
			AdvertisePort:        c.AdvertisePort,
			MaxConcurrentStreams: c.MaxConcurrentStreams,
			MaxPacketSize:        c.PacketBudget,
			Logger:               logger,
		})
		if err != nil {
			return nil, fmt.Errorf("swim: start transport: %w", err)
		}
		transport = nt
	}

	var seed [16]byte
	_, _ = crand.Read(seed[:]) // never fails since Go 1.24 (it crashes instead)
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	machine, err := NewMachine(&c, transport.LocalAddr(), rng, time.Now(), WatchClock(), IndexNames())
	if err != nil {
		_ = transport.Close()
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	refusals := ratelog.New(logger)
	ml := &Memberlist{
		inBytes:      newByteBudget(int64(inboundBudgetStreams) * int64(c.maxStreamBytes())),
		cfg:          c,
		logger:       logger,
		transport:    transport,
		machine:      machine,
		timer:        time.NewTimer(math.MaxInt64),
		outSem:       make(chan struct{}, c.MaxConcurrentStreams),
		inStreams:    newInboundSlots(c.MaxConcurrentStreams, c.MaxStreamsPerSource),
		stop:         make(chan struct{}),
		ctx:          ctx,
		cancel:       cancel,
		loopDone:     make(chan struct{}),
		shutdownDone: make(chan struct{}),
		joins:        make(map[uint64]*joinWaiter),
		outcomes:     make(map[uint64]chan<- error),
		pings:        make(map[uint64]chan<- Outcome),
		refusals:     refusals,
		sec:          newSecurity(&c, refusals),
	}
	ml.timer.Stop()
	kr, err := newKeyring(c.Security.Keys, c.Security.Plaintext)
	if err != nil {
		cancel()
		_ = transport.Close()
		return nil, err
	}
	ml.keys.cur.Store(kr)
	if c.Events != nil || c.Messages != nil {
		ml.events = newEventQueue()
		ml.dispatcherDone = make(chan struct{})
		go ml.dispatch()
	}
	ml.mu.Lock()
	ml.rearm()
	ml.mu.Unlock()
	ml.wg.Add(1)
	go ml.run()
	if ht, ok := transport.(PacketHandlerTransport); ok {
		ht.HandlePackets(ml.receive)
	}
	logger.Debug("started", zap.Stringer("addr", transport.LocalAddr()))
	return ml, nil
}

// Members returns the live (alive or suspect) members, this one included
// unless it has left, sorted by name: the table as it is now, built for
// this call in O(N). It waits at most for the input being fed to the
// Machine, never for the network or an event callback, so it is safe from
// a callback. A method that changed the table (UpdateMeta, Leave) returns
// after the change shows here. After Shutdown it returns the last view.
func (ml *Memberlist) Members() []Member {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.Members()
}

// NumMembers counts the live members, this one included, as Members would
// list them, in O(1); it waits as Members does.
func (ml *Memberlist) NumMembers() int {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.NumMembers()
}

// LocalMember returns this member as the cluster sees it; it waits as
// Members does. Its Addr is the advertised address (with the real port when
// BindPort is 0). After Shutdown its State is StateLeft if it left first,
// StateDead otherwise: it no longer runs.
func (ml *Memberlist) LocalMember() Member {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	mb := ml.machine.LocalMember()
	mb.Meta = bytes.Clone(mb.Meta)
	if ml.closed && mb.State != StateLeft {
		// Shut down without leaving: to the cluster it has failed, and
		// it answers no probe any more.
		mb.State = StateDead
	}
	return mb
}

// Join adds this member to the cluster through seeds: each address is
// host:port or host alone (port 7946), where host is an IP address or a DNS
// name whose every address becomes a seed. Names are resolved and the seeds
// contacted in parallel, each with a full state exchange over TCP; Join
// returns when every seed has answered or failed, or ctx ends. It returns how
// many seeds answered, and an error (errors.Join of the failures) only if
// none did. Seeds that did not answer are retried in the background while
// this member is alone, for ReconnectTimeout; so are seed names, resolved
// again with a backoff, whether they did not resolve (a Kubernetes
// headless Service before its pods run) or resolved to nobody but this
// member: the addresses they come to resolve to are joined through.
// After Leave, Join makes the member take part again, under a new
// incarnation, without a restart.
func (ml *Memberlist) Join(ctx context.Context, addrs ...string) (int, error) {
	if ml.isShutdown() {
		return 0, ErrShutdown
	}
	if len(addrs) == 0 {
		return 0, errors.New("swim: join: no seed address given")
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("swim: join: %w", err)
	}
	ctx, cancel := ml.bind(ctx)
	defer cancel()

	seeds, errs := resolveSeeds(ctx, ml.lookup(), addrs)
	ml.rememberSeedNames(addrs, len(errs))
	if len(seeds) == 0 {
		if ml.isShutdown() {
			return 0, ErrShutdown
		}
		return 0, fmt.Errorf("swim: join: %w", errors.Join(errs...))
	}

	var results chan joinResult
	var asked int
	err := ml.input(func(now time.Time) {
		if ml.machine.LocalMember().State == StateLeft {
			// Joining again after Leave: a later Leave is a new one.
			ml.leaveDone, ml.leaveShown = nil, false
		}
		ids := ml.machine.Join(now, seeds)
		asked = len(ids)
		results = make(chan joinResult, len(ids)) // never blocks an input, even if Join gave up
		for _, id := range ids {
			ml.joins[id] = &joinWaiter{results: results}
		}
	})
	if err != nil {
		return 0, err
	}
	if asked == 0 {
		return 0, errors.New("swim: join: no seed to contact (only this member's own address?)")
	}

	answered := 0
wait:
	for range asked {
		select {
		case r := <-results:
			if r.err == nil {
				answered++
			} else {
				errs = append(errs, fmt.Errorf("seed %s: %w", r.to, r.err))
			}
		case <-ctx.Done():
			break wait
		}
	}
	if answered > 0 {
		if err := ml.awaitOwnName(ctx); err != nil {
			return 0, err
		}
		return answered, nil
	}
	if ml.isShutdown() {
		return 0, ErrShutdown
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return 0, fmt.Errorf("swim: join: no seed answered: %w", errors.Join(errs...))
}

// Leave announces that this member leaves the cluster gracefully and waits
// until every member it knows acknowledged the announcement (each is told
// directly, again after each ProbeTimeout, five times at most) and it has
// been gossiped enough times (or there is nobody to tell), or ctx ends:
// one round trip on a healthy network. Peers then report this member as
// left, not failed; a member that exits before Leave returns may be
// reported dead by those it had not told yet.
// The member keeps running (and answering probes) until Shutdown. Leave is
// idempotent: a later call waits for the same announcement and returns nil.
// A ctx already done returns its error at once, without leaving.
func (ml *Memberlist) Leave(ctx context.Context) error {
	if ml.isShutdown() {
		return ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var done chan struct{}
	var leaveErr error
	err := ml.input(func(now time.Time) {
		if ml.leaveDone != nil {
			// A second Leave: the member is leaving already, and
			// this call waits for the same announcement.
			done = ml.leaveDone
			return
		}
		if leaveErr = ml.machine.Leave(now); leaveErr != nil {
			return
		}
		// Only the first Leave gets here, so the channel is made
		// once; output closes it.
		ml.leaveDone = make(chan struct{})
		done = ml.leaveDone
	})
	if err != nil {
		return err
	}
	if leaveErr != nil {
		return leaveErr
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-ml.stop:
		return ErrShutdown
	}
}

// UpdateMeta replaces this member's metadata and gossips it; peers see an
// EventUpdate. Metadata over Config.MaxMetaSize is refused with an error
// matching ErrMetaTooLarge.
func (ml *Memberlist) UpdateMeta(ctx context.Context, meta []byte) error {
	if len(meta) > ml.cfg.MaxMetaSize {
		return fmt.Errorf("%w: %d bytes, over MaxMetaSize %d", ErrMetaTooLarge, len(meta), ml.cfg.MaxMetaSize)
	}
	if ml.isShutdown() {
		return ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	meta = bytes.Clone(meta)
	var updateErr error
	if err := ml.input(func(now time.Time) { updateErr = ml.machine.UpdateMeta(now, meta) }); err != nil {
		return err
	}
	return updateErr
}

// HealthScore is this member's local health (Lifeguard §IV-A): 0 when it
// hears from its peers as expected, up to AwarenessMaxMultiplier-1 when it
// keeps failing to, in which case it probes more slowly and accuses no one
// in haste. After Shutdown it returns 0. It waits as Members does.
func (ml *Memberlist) HealthScore() int {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	if ml.closed {
		return 0
	}
	return ml.machine.Status().HealthScore
}

// MemberCounts counts the members in the table by state, this one
// included (see MemberCounts), in O(1); it waits as Members does. After
// Shutdown it returns the last counts.
func (ml *Memberlist) MemberCounts() MemberCounts {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.MemberCounts()
}

// StreamsInUse counts the TCP exchanges in flight: inbound, those peers
// opened that hold one of the MaxConcurrentStreams inbound slots, and
// outbound, this member's own joins, push-pulls, TCP pings and reliable
// messages, out of as many outbound slots. It takes no lock of the
// protocol's.
func (ml *Memberlist) StreamsInUse() (inbound, outbound int) {
	return ml.inStreams.inUse(), len(ml.outSem)
}

// Stats returns the core's counters and the driver's. It waits as Members
// does. After Shutdown it returns the final counters.
func (ml *Memberlist) Stats() MemberlistStats {
	ml.mu.RLock()
	st := ml.machine.Stats()
	ml.mu.RUnlock()
	stats := MemberlistStats{
		Stats:             st,
		EventsDropped:     ml.eventsDropped.Load(),
		MessagesDropped:   ml.messagesDropped.Load(),
		MessagesUnhandled: ml.messagesUnhandled.Load(),
		StatesTooLarge:    ml.statesTooLarge.Load(),
		StateMergeErrors:  ml.stateMergeErrors.Load(),
		StreamsRefused:    ml.streamsRefused.Load(),
		SeedLookupsFailed: ml.seedLookupsFailed.Load(),
		RefusedSource:     ml.sec.refusedSource.Load(),
		RefusedLabel:      ml.sec.refusedLabel.Load(),
		RefusedPlaintext:  ml.sec.refusedPlaintext.Load(),
		RefusedKey:        ml.sec.refusedKey.Load(),
		RefusedTLS:        ml.sec.refusedTLS.Load(),
	}
	ml.addStreamStats(&stats)
	return stats
}

// Shutdown stops the member without telling the cluster (call Leave first
// for a graceful exit; otherwise peers will declare it dead). It stops
// feeding the protocol, cancels the TCP exchanges in flight, closes the
// transport (Config.Transport too, when one was supplied) once the packets
// already produced have been handed to it, and returns when every goroutine
// of this Memberlist has ended. Events still queued for the Events handler
// are dropped, not delivered; a callback already running is waited for,
// except when Shutdown is called from that callback itself.
//
// Shutdown is idempotent: later calls wait for the first to finish and
// return its result. Every other method then returns ErrShutdown (Members,
// NumMembers, LocalMember and Stats return the last known values).
func (ml *Memberlist) Shutdown() error {
	ml.shutdownOnce.Do(func() {
		close(ml.stop)
		ml.cancel()
		ml.mu.Lock()
		ml.closed = true
		ml.timer.Stop()
		ml.mu.Unlock()
		<-ml.loopDone
		ml.sending.Wait()
		ml.shutdownErr = ml.transport.Close()
		ml.closeQueuedStreams()
		ml.wg.Wait()
		close(ml.shutdownDone)
	})
	<-ml.shutdownDone
	// Every caller, not only the first, waits for the dispatcher, so that
	// Shutdown returns with no goroutine left; except the dispatcher
	// itself, calling from a callback, which would wait for itself.
	if ml.dispatcherDone != nil && !ml.calledFromCallback() {
		<-ml.dispatcherDone
	}
	return ml.shutdownErr
}

// closeQueuedStreams closes the streams the transport accepted but the loop
// never took, which would otherwise keep their sockets open. A transport
// true to its contract has closed the Streams channel by now; one that has
// not must not make Shutdown wait, so only the streams queued already are
// taken.
func (ml *Memberlist) closeQueuedStreams() {
	streams := ml.transport.Streams()
	for {
		select {
		case conn, ok := <-streams:
			if !ok {
				return
			}
			_ = conn.Close()
		default:
			return
		}
	}
}

// isShutdown reports whether Shutdown has begun.
func (ml *Memberlist) isShutdown() bool {
	select {
	case <-ml.stop:
		return true
	default:
		return false
	}
}

// bind returns a context that also ends when Shutdown begins.
func (ml *Memberlist) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ml.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Suspicions returns the suspicions in progress, as Machine.Suspicions
// does: for each member suspect now whose suspicion timer runs, who
// accused it, how many confirmed, and when it is declared dead unless it
// refutes. It waits as Members does.
func (ml *Memberlist) Suspicions() []Suspicion {
	ml.mu.RLock()
	defer ml.mu.RUnlock()
	return ml.machine.Suspicions()
}

// awaitOwnName waits until this member knows whether another live process
// holds its name: it asks as soon as a seed's view names it at another
// life (lives.go), and the answer comes within a probe timeout. It returns
// ErrNameConflict if this member yielded the name; nil once nothing is
// pending, or when ctx ends first.
func (ml *Memberlist) awaitOwnName(ctx context.Context) error {
	step := max(ml.cfg.ProbeTimeout/8, time.Millisecond)
	for {
		var pending, yielded bool
		if err := ml.input(func(time.Time) {
			st := ml.machine.Status()
			pending, yielded = st.LifeChecksPending, st.NameYielded
		}); err != nil {
			return err
		}
		if yielded {
			return fmt.Errorf("swim: join: %w", ErrNameConflict)
		}
		if !pending {
			return nil
		}
		t := time.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
