package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.uber.org/zap"

	"github.com/swim-go/swim"
)

// NodeConfig configures one node: a swim member, a Raft server and an
// HTTP front, with the Raft state in DataDir.
type NodeConfig struct {
	// Name is the node's swim name and Raft server ID. Required.
	Name string
	// SwimAddr and SwimPort: where swim listens (UDP and TCP); port 0
	// picks a free one.
	SwimAddr string
	SwimPort int
	// RaftAddr is the Raft transport's host:port, a concrete IP (it is
	// what the others dial); port 0 picks a free one.
	RaftAddr string
	// HTTPAddr is the HTTP front's host:port; port 0 picks a free one.
	HTTPAddr string
	// DataDir holds raft.db (BoltDB: the log and the term and vote) and
	// snapshots/. Required; created if missing. A node restarted on the
	// same DataDir keeps its log and its place in the configuration.
	DataDir string
	// Join lists swim seeds (host:port). A seed that does not answer is
	// retried by swim in the background.
	Join []string
	// Bootstrap makes this node a one-server cluster the first time it
	// starts on an empty DataDir; it is ignored when DataDir holds state.
	// Exactly one node of a new cluster bootstraps; the reconciler adds
	// the others as they join through swim.
	Bootstrap bool
	// Nonvoter asks to be added without a vote.
	Nonvoter bool
	// DeadGrace: see DefaultDeadGrace (its default).
	DeadGrace time.Duration
	// ReconcileInterval is how often the leader reconciles with no event
	// to prompt it, a safety net. Default 10 s.
	ReconcileInterval time.Duration
	// Swim is the swim profile to start from (Name, BindAddr, BindPort,
	// Meta, Events and Logger are set by the node). Nil means
	// swim.DefaultLANConfig.
	Swim *swim.Config
	// RaftIOTimeout bounds each read and write of the Raft transport
	// (a peer that stopped answering holds a replication that long).
	// Default 10 s.
	RaftIOTimeout time.Duration
	// Raft holds the Raft timeouts to use (LocalID, Logger and
	// ShutdownOnRemove are set by the node). Nil means raft.DefaultConfig.
	Raft *raft.Config
	// Logger receives the node's and swim's logs; nil logs nothing.
	Logger *zap.Logger
	// RaftLog receives Raft's own log lines (hclog) at RaftLogLevel
	// (default "warn"); nil discards them.
	RaftLog      io.Writer
	RaftLogLevel string
}

// Node is one running node.
type Node struct {
	cfg    NodeConfig
	log    *zap.Logger
	fsm    *FSM
	raft   *raft.Raft
	trans  *raft.NetworkTransport
	store  *raftboltdb.BoltStore
	ml     *swim.Memberlist
	http   *http.Server
	httpLn net.Listener
	meta   Meta

	events chan swim.Event // from swim's dispatcher to the supervisor; see handleEvent
	// eventsDropped counts the events handleEvent dropped (Status).
	eventsDropped atomic.Uint64
	stop          chan struct{}
	wg            sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// eventBuffer bounds the events waiting for the supervisor. One dropped
// here is a gap in Seq, which makes the reconciler resync from a snapshot:
// a full buffer costs a resync, never a lost change.
const eventBuffer = 1024

// StartNode opens the data directory, starts Raft, the HTTP front and swim,
// and joins the seeds.
func StartNode(cfg NodeConfig) (n *Node, err error) {
	if cfg.Name == "" {
		return nil, errors.New("node: Name is required")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("node: DataDir is required")
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 10 * time.Second
	}
	if cfg.DeadGrace <= 0 {
		cfg.DeadGrace = DefaultDeadGrace
	}
	if cfg.RaftIOTimeout <= 0 {
		cfg.RaftIOTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	n = &Node{
		cfg:    cfg,
		log:    log.With(zap.String("node", cfg.Name)),
		fsm:    NewFSM(),
		events: make(chan swim.Event, eventBuffer),
		stop:   make(chan struct{}),
	}
	// Whatever was opened is closed again if a later step fails.
	defer func() {
		if err != nil {
			n.release()
		}
	}()
	if err := n.startRaft(); err != nil {
		return nil, err
	}
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("node: http: %w", err)
	}
	n.meta = Meta{
		Raft:  string(n.trans.LocalAddr()),
		HTTP:  n.httpLn.Addr().String(),
		Voter: !cfg.Nonvoter,
	}
	if err := n.startSwim(); err != nil {
		return nil, err
	}
	n.http = &http.Server{Handler: n.handler(), ReadHeaderTimeout: 5 * time.Second}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		if err := n.http.Serve(n.httpLn); !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http front stopped", zap.Error(err))
		}
	}()
	go n.supervise()
	if len(cfg.Join) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := n.ml.Join(ctx, cfg.Join...)
		cancel()
		if err != nil {
			// swim keeps retrying the seeds while this member is alone,
			// so a node may start before its seeds do.
			n.log.Warn("no seed answered yet; swim retries in the background", zap.Error(err))
		}
	}
	n.log.Info("started", zap.String("swim", n.ml.LocalMember().Addr.String()),
		zap.String("raft", n.meta.Raft), zap.String("http", n.meta.HTTP))
	return n, nil
}

func (n *Node) startRaft() error {
	cfg := n.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("node: data dir: %w", err)
	}
	level := cfg.RaftLogLevel
	if level == "" {
		level = "warn"
	}
	out := cfg.RaftLog
	if out == nil {
		out = io.Discard
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft." + cfg.Name, Level: hclog.LevelFromString(level), Output: out})

	var err error
	if n.store, err = raftboltdb.NewBoltStore(filepath.Join(cfg.DataDir, "raft.db")); err != nil {
		return fmt.Errorf("node: open raft.db: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hlog)
	if err != nil {
		return fmt.Errorf("node: snapshot store: %w", err)
	}
	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("node: raft address %q: %w", cfg.RaftAddr, err)
	}
	if addr.IP == nil || addr.IP.IsUnspecified() {
		return fmt.Errorf("node: raft address %q: want a concrete IP, the one the others dial", cfg.RaftAddr)
	}
	if n.trans, err = raft.NewTCPTransportWithLogger(cfg.RaftAddr, nil, 3, cfg.RaftIOTimeout, hlog); err != nil {
		return fmt.Errorf("node: raft transport: %w", err)
	}

	rc := raft.DefaultConfig()
	if cfg.Raft != nil {
		c := *cfg.Raft
		rc = &c
	}
	rc.LocalID = raft.ServerID(cfg.Name)
	rc.Logger = hlog
	// A server removed while it was only unreachable (a partition longer
	// than the grace) must keep running, so that the reconciler can add
	// it back when swim sees it again.
	rc.ShutdownOnRemove = false

	existing, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		return fmt.Errorf("node: read raft state: %w", err)
	}
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.store, n.store, snaps, n.trans); err != nil {
		return fmt.Errorf("node: start raft: %w", err)
	}
	if cfg.Bootstrap && !existing {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr(),
		}}}
		if err := n.raft.BootstrapCluster(boot).Error(); err != nil {
			return fmt.Errorf("node: bootstrap: %w", err)
		}
	}
	return nil
}

func (n *Node) startSwim() error {
	sc := swim.DefaultLANConfig()
	if n.cfg.Swim != nil {
		c := *n.cfg.Swim
		sc = &c
	}
	sc.Name = n.cfg.Name
	if n.cfg.SwimAddr != "" {
		sc.BindAddr = n.cfg.SwimAddr
	}
	sc.BindPort = n.cfg.SwimPort
	meta, err := n.meta.Encode()
	if err != nil {
		return err
	}
	sc.Meta = meta
	sc.Events = swim.EventFunc(n.handleEvent)
	sc.Logger = n.log
	if n.ml, err = swim.New(sc); err != nil {
		return fmt.Errorf("node: swim: %w", err)
	}
	return nil
}

// handleEvent runs on swim's dispatcher and must not block it: the event
// is dropped when the supervisor is that far behind, which it notices by
// the gap in Seq.
func (n *Node) handleEvent(e swim.Event) {
	select {
	case n.events <- e:
	default:
		n.eventsDropped.Add(1)
	}
}

// supervise follows this node's leadership: on gaining it, it makes a
// reconciler, seeds it with a swim snapshot and reconciles; while leading
// it feeds the reconciler swim's events and reconciles after each batch,
// at the end of each grace period and every ReconcileInterval; on losing
// it, it drops the reconciler. It also publishes the leader flag in the
// metadata.
func (n *Node) supervise() {
	defer n.wg.Done()
	var rec *Reconciler
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	timer.Stop()
	reconcile := func() {
		plan, err := rec.Reconcile(time.Now())
		wait := n.cfg.ReconcileInterval
		if err != nil {
			n.log.Warn("reconcile failed, retrying", zap.Error(err))
			wait = min(wait, time.Second)
		} else if !plan.Next.IsZero() {
			wait = min(wait, time.Until(plan.Next))
		}
		timer.Reset(max(wait, 0))
	}
	resync := func() {
		members, seq := n.ml.Snapshot()
		rec.Resync(members, seq, time.Now())
	}
	for {
		select {
		case <-n.stop:
			return
		case leading := <-n.raft.LeaderCh():
			timer.Stop()
			rec = nil
			// A true after a true means leadership was lost and
			// regained meanwhile: a fresh reconciler either way.
			if leading && n.raft.State() == raft.Leader {
				n.log.Info("leadership gained: reconciling the whole configuration")
				rec = NewReconciler(n.cfg.Name, n.cfg.DeadGrace, raftConfiguration{n.raft}, n.log)
				resync()
				reconcile()
			} else {
				n.log.Info("leadership lost: reconciler stopped")
			}
			n.publishLeader(rec != nil)
		case e := <-n.events:
			if rec == nil {
				continue // a later leader starts from a snapshot
			}
			now := time.Now()
			ok := rec.Observe(e, now)
			// Take the whole batch before reconciling, so that a burst
			// of joins costs one pass.
		batch:
			for ok {
				select {
				case e := <-n.events:
					ok = rec.Observe(e, now)
				default:
					break batch
				}
			}
			if !ok {
				resync()
			}
			reconcile()
		case <-timer.C:
			if rec != nil {
				reconcile()
			}
		}
	}
}

func (n *Node) publishLeader(leading bool) {
	n.meta.Leader = leading
	meta, err := n.meta.Encode()
	if err == nil {
		err = n.ml.UpdateMeta(context.Background(), meta)
	}
	if err != nil && !errors.Is(err, swim.ErrShutdown) {
		n.log.Warn("update metadata", zap.Error(err))
	}
}

// Leave is the graceful exit: a leader first hands its leadership over,
// then the node announces its leave through swim (the leader removes it
// from the configuration at once) and stops.
func (n *Node) Leave(ctx context.Context) error {
	if n.raft.State() == raft.Leader && n.hasPeers() {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer", zap.Error(err))
		}
	}
	err := n.ml.Leave(ctx)
	return errors.Join(err, n.Close())
}

// hasPeers reports whether the configuration holds another voter, one
// that could take over the leadership.
func (n *Node) hasPeers() bool {
	servers, err := (raftConfiguration{n.raft}).Servers()
	if err != nil {
		return false
	}
	for _, s := range servers {
		if s.Voter && s.ID != n.cfg.Name {
			return true
		}
	}
	return false
}

// Close stops the node without telling anyone, as a crash would: swim
// stops answering (peers will declare it dead), Raft stops, the files are
// closed. The data directory stays, for a restart. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.closeErr = n.release()
	})
	return n.closeErr
}

// release stops and closes whatever StartNode opened, in the order that
// lets each part finish: swim first (no more events), Raft (which fails
// a reconciler's pending change), the supervisor and the HTTP front, then
// the files.
func (n *Node) release() error {
	var errs []error
	if n.ml != nil {
		errs = append(errs, n.ml.Shutdown())
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	if n.http != nil {
		errs = append(errs, n.http.Close())
	} else if n.httpLn != nil {
		errs = append(errs, n.httpLn.Close())
	}
	n.wg.Wait()
	if n.trans != nil {
		// Close alone leaves the pooled connections to the peers open,
		// and each peer's goroutine reading one waiting for ever.
		n.trans.CloseStreams()
		errs = append(errs, n.trans.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// raftConfiguration is the reconciler's Configuration over a *raft.Raft.
type raftConfiguration struct{ r *raft.Raft }

// changeTimeout bounds how long a change waits to be enqueued by Raft;
// committing it then takes what a quorum takes.
const changeTimeout = 10 * time.Second

func (c raftConfiguration) Servers() ([]Server, error) {
	f := c.r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

func (c raftConfiguration) AddVoter(id, addr string) error {
	return c.r.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, changeTimeout).Error()
}

func (c raftConfiguration) AddNonvoter(id, addr string) error {
	return c.r.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, changeTimeout).Error()
}

func (c raftConfiguration) RemoveServer(id string) error {
	return c.r.RemoveServer(raft.ServerID(id), 0, changeTimeout).Error()
}
