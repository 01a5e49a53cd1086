// Command agent runs one swim member and prints every membership event it
// sees as one JSON line on stdout, for scripts, demos and black-box tests:
//
//	{"t":1732890000123456789,"ev":"join","node":"node-2","addr":"127.0.0.1:40123","state":"alive"}
//
// "t" is the time in Unix nanoseconds; "ev" is one of
//
//	ready    this member listens (once, first; "addr" has the bound port)
//	join     a member was seen alive for the first time, or again
//	leave    a member failed ("state":"dead") or left gracefully ("left")
//	suspect  a member is suspected of having failed
//	alive    a suspected member refuted the suspicion
//	update   a member changed its metadata or address
//	left     this member finished its own graceful leave
//
// Events about this member itself are reported only as ready and left.
// SIGUSR1 makes the member leave gracefully and keep running; SIGTERM or
// SIGINT shut it down (exit status 0). Logs go to stderr (-v for debug).
//
// Usage:
//
//	agent -name a -port 7946
//	agent -name b -port 0 -join 127.0.0.1:7946
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/swim-go/swim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// line is one event printed on stdout.
type line struct {
	T     int64  `json:"t"`
	Ev    string `json:"ev"`
	Node  string `json:"node"`
	Addr  string `json:"addr,omitempty"`
	State string `json:"state,omitempty"`
	Inc   uint64 `json:"inc,omitempty"`
}

// printer writes lines to stdout. Events arrive on the Memberlist's
// dispatcher goroutine while ready and left are printed from others, so one
// mutex keeps lines whole.
type printer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (p *printer) print(l line) {
	l.T = time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.enc.Encode(l) // stdout closed: nobody is listening, nothing to do
}

func run(args []string, stdout, stderr io.Writer) error {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", host, "member name, unique in the cluster")
	bind := fs.String("bind", "127.0.0.1", "IP address to listen on (UDP and TCP)")
	port := fs.Int("port", swim.DefaultPort, "port to listen on; 0 picks a free one")
	join := fs.String("join", "", "comma-separated seeds (host:port, or host for port 7946)")
	profile := fs.String("profile", "lan", "timing profile: lan, wan or local")
	verbose := fs.Bool("v", false, "debug logging on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	cfg, err := swim.DefaultConfig(*profile)
	if err != nil {
		return fmt.Errorf("-profile: %w", err)
	}
	cfg.Name = *name
	cfg.BindAddr = *bind
	cfg.BindPort = *port

	logger := newLogger(stderr, *verbose)
	defer func() { _ = logger.Sync() }()
	cfg.Logger = logger

	out := &printer{enc: json.NewEncoder(stdout)}
	cfg.Events = swim.EventFunc(func(e swim.Event) {
		if e.Member.Name == cfg.Name {
			return // this member's own lifecycle is ready and left
		}
		l := line{Ev: e.Kind.String(), Node: e.Member.Name, Addr: e.Member.Addr.String(), Inc: e.Member.Incarnation}
		if e.Kind == swim.EventLeave {
			l.State = e.Member.State.String()
		}
		out.print(l)
	})

	// Subscribe before starting, so that no signal sent once the ready
	// line is out can find the default action (exit) still in place.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGTERM, os.Interrupt}, leaveSignals...)...)
	defer signal.Stop(sigs)

	ml, err := swim.New(cfg)
	if err != nil {
		return err
	}
	local := ml.LocalMember()
	out.print(line{Ev: "ready", Node: local.Name, Addr: local.Addr.String()})

	// Join and leave run on goroutines of their own so that a signal is
	// handled at once; both end when ctx is cancelled, before Shutdown.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	if *join != "" {
		seeds := strings.Split(*join, ",")
		wg.Go(func() {
			jctx, jcancel := context.WithTimeout(ctx, cfg.StreamTimeout)
			defer jcancel()
			n, err := ml.Join(jctx, seeds...)
			if err != nil {
				// Not fatal: the member keeps retrying its seeds while it
				// is alone, so it joins once one of them is up.
				logger.Warn("join failed; retrying in the background", zap.Error(err))
				return
			}
			logger.Info("joined", zap.Int("seeds_answered", n))
		})
	}

	var leaveOnce sync.Once
	for sig := range sigs {
		if sig == syscall.SIGTERM || sig == os.Interrupt {
			logger.Info("shutting down", zap.Stringer("signal", sig))
			cancel()
			wg.Wait()
			return ml.Shutdown()
		}
		leaveOnce.Do(func() {
			wg.Go(func() {
				lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
				defer lcancel()
				if err := ml.Leave(lctx); err != nil {
					if !errors.Is(err, context.Canceled) {
						logger.Error("leave", zap.Error(err))
					}
					return
				}
				out.print(line{Ev: "left", Node: local.Name, Addr: local.Addr.String()})
			})
		})
	}
	return nil
}

// newLogger logs human-readable lines to stderr: stdout is for events only.
func newLogger(stderr io.Writer, verbose bool) *zap.Logger {
	level := zap.InfoLevel
	if verbose {
		level = zap.DebugLevel
	}
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(stderr)), level)
	return zap.New(core)
}
