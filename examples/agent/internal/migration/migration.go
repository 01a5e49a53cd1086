// Package migration is the agent's migrate command: one process of a
// cluster being moved from hashicorp/memberlist to swim, in one of three
// modes, with an application on top: a replicated map in which each
// process holds one key, spread by broadcasts and by the state exchange,
// the way dskit's memberlist KV is built. It is the agent of
// docs/migrating.md's procedure and of the migration test on real
// processes (make migration).
//
//	-mode memberlist  hashicorp/memberlist v0.7.0 alone, as before the migration
//	-mode bridge      migration mode: a member of both clusters (package migrate)
//	-mode standby     out of migration mode, its memberlist port in standby
//	                  (a process restarted after it left the mode)
//	-mode swim        swim alone, after the migration
//
// A process listens on -port for memberlist and on -port plus
// -swim-offset for swim, and joins through -join (memberlist addresses;
// in swim mode the swim port of each is derived with the same offset).
// It sets its key to -value once it runs.
//
// It prints one JSON line per event on stdout: "ready" when it runs,
// "view" with the live names of its view whenever they change, "kv" with
// its map whenever it changes, "mlonly" with the processes running
// memberlist alone (bridge mode) whenever that changes, "left" once it
// left migration mode, and "mode" whenever a bridged process's phase
// changes (bridge, standby, woken: migrate.Phase). With -http it answers
// GET /migration with its mode or phase, the processes it sees running
// memberlist alone, and "done" when there are none (and it is not one),
// and GET /stats with the counters of its swim side and, bridged, of the
// Bridge (nothing in memberlist mode).
// SIGUSR1 leaves migration mode (Bridge.LeaveMemberlist: the memberlist
// port stays in standby, and a process rolled back to memberlist that
// joins through it brings the cluster back into the mode); SIGTERM or
// SIGINT leaves the cluster and exits.
package migration

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/migrate"
)

// Options are the migrate command's flags.
type Options struct {
	name, bind, mode, join, value string
	port, offset                  int
	retransmits                   int
	http                          string
	grace                         time.Duration
}

// Flags defines the command's flags on fs.
func Flags(fs *flag.FlagSet) *Options {
	o := &Options{}
	fs.StringVar(&o.name, "name", "", "process name, unique in the cluster (required)")
	fs.StringVar(&o.bind, "bind", "127.0.0.1", "IP address to listen on")
	fs.IntVar(&o.port, "port", 7946, "memberlist port; swim listens on this plus -swim-offset")
	fs.IntVar(&o.offset, "swim-offset", 1000, "swim port minus memberlist port, the same on every process")
	fs.StringVar(&o.mode, "mode", "bridge", "memberlist, bridge, standby (out of migration mode, its memberlist port in standby: a restart after leaving it) or swim")
	fs.StringVar(&o.join, "join", "", "comma-separated memberlist addresses (host:port) to join through")
	fs.StringVar(&o.value, "value", "", "the value of this process's key in the replicated map (default: its start time)")
	fs.IntVar(&o.retransmits, "retransmit-mult", 4, "RetransmitMult of the memberlist side's broadcast queue")
	fs.DurationVar(&o.grace, "standby-grace", 30*time.Second, "how long a process woken from standby stays in migration mode after the last process running memberlist alone is gone")
	fs.StringVar(&o.http, "http", "", "address (host:port) to serve GET /migration (the mode and the processes running memberlist alone) and GET /stats (the counters) on; empty for none")
	return o
}

// Check reports what is wrong with the flags' values.
func (o *Options) Check() error {
	switch {
	case o.name == "":
		return errors.New("-name is required")
	case o.mode != "memberlist" && o.mode != "bridge" && o.mode != "standby" && o.mode != "swim":
		return fmt.Errorf("-mode %q: want memberlist, bridge, standby or swim", o.mode)
	case o.port < 0 || o.port > 65535 || o.port+o.offset < 1 || o.port+o.offset > 65535:
		return fmt.Errorf("-port %d and -swim-offset %d: both ports must be in 1..65535", o.port, o.offset)
	case o.grace <= 0:
		return fmt.Errorf("-standby-grace %v: must be positive", o.grace)
	}
	return nil
}

// out prints the agent's JSON lines, one at a time.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

type line struct {
	T     int64             `json:"t"`
	Ev    string            `json:"ev"`
	Node  string            `json:"node"`
	Mode  string            `json:"mode,omitempty"`
	Names []string          `json:"names,omitempty"`
	KV    map[string]string `json:"kv,omitempty"`
	Err   string            `json:"err,omitempty"`
}

func (o *out) print(l line) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l.T = time.Now().UnixNano()
	_ = o.enc.Encode(l)
}

// kv is the replicated map: each process's key holds the value of its
// latest run, versioned by that run's start time, and a merge keeps the
// higher version of each key (a last-writer-wins register per key, as
// dskit's KV stores are built): copies of an older run's value that
// arrive late, by gossip or in a peer's state, change nothing.
type kv struct {
	mu   sync.Mutex
	m    map[string]entry
	name string
	out  *out
}

// entry is one key's value and version.
type entry struct {
	V   string `json:"v"`
	Ver int64  `json:"ver"`
}

// set prints the map it made while it holds it: the lines then leave in
// the order of the maps they show, and the last is the whole map (a line
// printed after the lock is let go could follow a later map's, and stay
// the last for good: a value repeated changes nothing and prints nothing).
func (k *kv) set(key string, e entry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.m[key]; ok && old.Ver >= e.Ver {
		return
	}
	k.m[key] = e
	k.out.print(line{Ev: "kv", Node: k.name, KV: k.snapshot()})
}

func (k *kv) snapshot() map[string]string {
	c := make(map[string]string, len(k.m))
	for key, e := range k.m {
		c[key] = e.V
	}
	return c
}

// encode is a broadcast of one key: "key=version:value".
func encode(key string, e entry) []byte {
	return []byte(key + "=" + strconv.FormatInt(e.Ver, 10) + ":" + e.V)
}

func (k *kv) message(payload []byte) {
	key, rest, ok := strings.Cut(string(payload), "=")
	if !ok || key == k.name {
		return
	}
	ver, val, ok := strings.Cut(rest, ":")
	if !ok {
		return
	}
	n, err := strconv.ParseInt(ver, 10, 64)
	if err != nil {
		return
	}
	k.set(key, entry{V: val, Ver: n})
}

func (k *kv) LocalState(bool) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, _ := json.Marshal(k.m)
	return b
}

func (k *kv) MergeRemoteState(buf []byte, _ bool) error {
	var m map[string]entry
	if err := json.Unmarshal(buf, &m); err != nil {
		return err
	}
	for key, e := range m {
		if key != k.name {
			k.set(key, e)
		}
	}
	return nil
}

// setList sets how the live names are read, once the side runs.
func (v *view) setList(f func() []string) {
	v.mu.Lock()
	v.list = f
	v.mu.Unlock()
}

// view prints the live names whenever they change.
type view struct {
	mu   sync.Mutex
	last []string
	name string
	out  *out
	list func() []string
}

func (v *view) changed() {
	v.mu.Lock()
	list := v.list
	v.mu.Unlock()
	if list == nil {
		return // memberlist reports the local node while it starts
	}
	names := list()
	slices.Sort(names)
	v.mu.Lock()
	same := slices.Equal(names, v.last)
	v.last = names
	v.mu.Unlock()
	if !same {
		v.out.print(line{Ev: "view", Node: v.name, Names: names})
	}
}

// Run runs the process until SIGTERM or SIGINT; leaveSignals take it out
// of migration mode.
func Run(o *Options, stdout io.Writer, leaveSignals []os.Signal) error {
	if err := o.Check(); err != nil {
		return err
	}
	if o.value == "" {
		o.value = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	pr := &out{enc: json.NewEncoder(stdout)}
	store := &kv{m: map[string]entry{}, name: o.name, out: pr}
	seeds := splitList(o.join)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	usr1 := make(chan os.Signal, 1)
	if len(leaveSignals) > 0 {
		signal.Notify(usr1, leaveSignals...)
		defer signal.Stop(usr1)
	}

	var (
		broadcast func(msg []byte, key string) error
		leave     func(context.Context) error
		shutdown  func() error
		list      func() []string
		mlOnly    func() []string
		leaveMode func(context.Context) error
		phase     func() string
		stats     func() counters // nil in memberlist mode
	)
	v := &view{name: o.name, out: pr}
	onEvent := func(swim.Event) { v.changed() }
	// memberlist calls its events with its locks held, and reading its
	// view takes them: its events only flag a change, and the loop below
	// prints the view.
	viewChanged := make(chan struct{}, 1)

	switch o.mode {
	case "memberlist":
		app := &mlApp{kv: store}
		app.queue = &memberlist.TransmitLimitedQueue{NumNodes: func() int { return max(app.ml.NumMembers(), 1) }, RetransmitMult: o.retransmits}
		c := mlConfig(o)
		c.Delegate = app
		c.Events = mlEvents(viewChanged)
		ml, err := memberlist.Create(c)
		if err != nil {
			return err
		}
		app.ml = ml
		list = func() []string {
			var names []string
			for _, n := range ml.Members() {
				names = append(names, n.Name)
			}
			return names
		}
		broadcast = func(msg []byte, key string) error {
			app.queue.QueueBroadcast(&keyed{key: key, msg: msg})
			return nil
		}
		leave = func(context.Context) error { return ml.Leave(5 * time.Second) }
		shutdown = ml.Shutdown
		v.setList(list)
		if len(seeds) > 0 {
			if _, err := ml.Join(seeds); err != nil {
				pr.print(line{Ev: "error", Node: o.name, Err: err.Error()})
			}
		}
	case "bridge", "standby":
		sc := swimConfig(o)
		b, err := migrate.New(migrate.Config{
			Memberlist: mlConfig(o), Swim: sc, SwimPortOffset: o.offset,
			BroadcastRetransmitMult: o.retransmits, StandbyGrace: o.grace,
			StartInStandby: o.mode == "standby",
			Events:         swim.EventFunc(onEvent),
			Messages:       swim.MessageFunc(func(m swim.Message) { store.message(m.Payload) }),
			State:          store,
		})
		if err != nil {
			return err
		}
		list = func() []string { return memberNames(b.Members()) }
		broadcast = b.Broadcast
		leave = b.Leave
		shutdown = b.Shutdown
		mlOnly = b.MemberlistOnly
		leaveMode = b.LeaveMemberlist
		phase = func() string { return b.Phase().String() }
		stats = func() counters { bs := b.Stats(); return counters{Swim: b.Swim().Stats(), Bridge: &bs} }
		v.setList(list)
		if len(seeds) > 0 {
			if _, err := b.Join(ctx, seeds...); err != nil {
				pr.print(line{Ev: "error", Node: o.name, Err: err.Error()})
			}
		}
	case "swim":
		sc := swimConfig(o)
		sc.Events = swim.EventFunc(onEvent)
		sc.Messages = swim.MessageFunc(func(m swim.Message) { store.message(m.Payload) })
		sc.State = store
		ml, err := swim.New(sc)
		if err != nil {
			return err
		}
		list = func() []string { return memberNames(ml.Members()) }
		stats = func() counters { return counters{Swim: ml.Stats()} }
		broadcast = func(msg []byte, key string) error { _, err := ml.Broadcast(msg, key); return err }
		leave = ml.Leave
		shutdown = ml.Shutdown
		v.setList(list)
		var swimSeeds []string
		for _, s := range seeds {
			if a, err := offsetAddr(s, o.offset); err == nil {
				swimSeeds = append(swimSeeds, a)
			}
		}
		if len(swimSeeds) > 0 {
			jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := ml.Join(jctx, swimSeeds...); err != nil {
				pr.print(line{Ev: "error", Node: o.name, Err: err.Error()})
			}
			cancel()
		}
	default:
		return fmt.Errorf("-mode %q: want memberlist, bridge, standby or swim", o.mode)
	}

	mode := func() string {
		if phase != nil {
			return phase()
		}
		return o.mode
	}
	if o.http != "" {
		srv := &http.Server{Addr: o.http, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/stats" && stats != nil {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(stats())
				return
			}
			if r.URL.Path != "/migration" {
				http.NotFound(w, r)
				return
			}
			st := migrationState{Node: o.name, Mode: mode(), MemberlistOnly: []string{}}
			if mlOnly != nil {
				st.MemberlistOnly = append(st.MemberlistOnly, mlOnly()...)
				slices.Sort(st.MemberlistOnly)
			}
			st.Done = st.Mode != "memberlist" && len(st.MemberlistOnly) == 0
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(st)
		})}
		ln, err := net.Listen("tcp", o.http)
		if err != nil {
			_ = shutdown()
			return fmt.Errorf("-http: %w", err)
		}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}

	own := entry{V: o.value, Ver: time.Now().UnixNano()}
	store.set(o.name, own)
	msg := encode(o.name, own)
	pr.print(line{Ev: "ready", Node: o.name, Mode: o.mode})
	v.changed()

	// The application re-announces its key every second, keyed, so that
	// a queue holds one copy: memberlist sends each broadcast to a few
	// random members and never relays it (at 16 members and
	// RetransmitMult 4, eight sends among 15 peers: each misses a given
	// announcement with a chance of (14/15)^8, 58%), and memberlist's
	// state exchange comes every 30 s.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastOnly []string
	lastMode := mode()
	for {
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := leave(lctx)
			cancel()
			return errors.Join(err, shutdown())
		case <-usr1:
			if leaveMode != nil {
				lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := leaveMode(lctx)
				cancel()
				if err != nil {
					pr.print(line{Ev: "error", Node: o.name, Err: err.Error()})
				}
				pr.print(line{Ev: "left", Node: o.name, Mode: mode()})
			}
		case <-viewChanged:
			v.changed()
		case <-tick.C:
			_ = broadcast(msg, o.name)
			v.changed()
			if m := mode(); m != lastMode {
				lastMode = m
				pr.print(line{Ev: "mode", Node: o.name, Mode: m})
			}
			if mlOnly != nil {
				only := mlOnly()
				slices.Sort(only)
				if !slices.Equal(only, lastOnly) || lastOnly == nil {
					lastOnly = append([]string{}, only...)
					pr.print(line{Ev: "mlonly", Node: o.name, Names: only})
				}
			}
		}
	}
}

// counters is what GET /stats answers: the swim side's counters and,
// bridged, the Bridge's.
type counters struct {
	Swim   swim.MemberlistStats `json:"swim"`
	Bridge *migrate.Stats       `json:"bridge,omitempty"`
}

// migrationState is what GET /migration answers: this process's mode,
// the processes it sees running memberlist alone, and whether the cluster
// may leave migration mode as far as it can tell (no such process, and it
// is not one itself).
type migrationState struct {
	Node           string   `json:"node"`
	Mode           string   `json:"mode"`
	MemberlistOnly []string `json:"memberlist_only"`
	Done           bool     `json:"done"`
}

func mlConfig(o *Options) *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.Name = o.name
	c.BindAddr = o.bind
	c.BindPort = o.port
	c.AdvertiseAddr = o.bind
	c.AdvertisePort = o.port
	c.Logger = log.New(io.Discard, "", 0)
	return c
}

func swimConfig(o *Options) *swim.Config {
	c := swim.DefaultLANConfig()
	c.Name = o.name
	c.BindAddr = o.bind
	c.BindPort = o.port + o.offset
	return c
}

func memberNames(ms []swim.Member) []string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func offsetAddr(hostport string, offset int) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p+offset)), nil
}

// mlApp is the application's memberlist delegate in memberlist mode.
type mlApp struct {
	kv    *kv
	ml    *memberlist.Memberlist
	queue *memberlist.TransmitLimitedQueue
}

func (a *mlApp) NodeMeta(int) []byte                    { return nil }
func (a *mlApp) NotifyMsg(msg []byte)                   { a.kv.message(msg) }
func (a *mlApp) GetBroadcasts(over, limit int) [][]byte { return a.queue.GetBroadcasts(over, limit) }
func (a *mlApp) LocalState(join bool) []byte            { return a.kv.LocalState(join) }
func (a *mlApp) MergeRemoteState(buf []byte, join bool) {
	_ = a.kv.MergeRemoteState(buf, join)
}

// mlEvents flags every change of memberlist's view for Run's loop,
// which prints it; a change already flagged covers the next.
type mlEvents chan struct{}

func (e mlEvents) flag() {
	select {
	case e <- struct{}{}:
	default:
	}
}

func (e mlEvents) NotifyJoin(*memberlist.Node)   { e.flag() }
func (e mlEvents) NotifyLeave(*memberlist.Node)  { e.flag() }
func (e mlEvents) NotifyUpdate(*memberlist.Node) { e.flag() }

// keyed is a keyed broadcast on memberlist: it replaces the queued one of
// the same key.
type keyed struct {
	key string
	msg []byte
}

func (k *keyed) Name() string { return k.key }
func (k *keyed) Invalidates(o memberlist.Broadcast) bool {
	other, ok := o.(*keyed)
	return ok && other.key == k.key
}
func (k *keyed) Message() []byte { return k.msg }
func (k *keyed) Finished()       {}
