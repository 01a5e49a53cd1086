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
//	keyring  this member's keys and plaintext mode: after ready when it was
//	         given keys or a key file, and after each reload that applied
//	         ("keys": fingerprints, primary first; "plaintext": the mode)
//
// Events about this member itself are reported only as ready, left and
// keyring. SIGUSR1 makes the member leave gracefully and keep running;
// SIGHUP re-reads the key file (below); SIGTERM or SIGINT shut it down
// (exit status 0). Logs go to stderr (-v for debug).
//
// Usage:
//
//	agent -name a -port 7946
//	agent -name b -port 0 -join 127.0.0.1:7946
//	agent -name c -keyfile /etc/swim/keys -label prod -allow 10.0.0.0/8
//
// # Encryption, label, allowed networks
//
// docs/security.md has the threat model and the procedures step by step.
//
//	-key K1,K2       AES keys in base64 (16, 24 or 32 bytes once decoded),
//	                 comma-separated; the first is the primary
//	-keyfile PATH    the keys from a file, re-read on SIGHUP
//	-plaintext MODE  refuse (the default), accept or send: the temporary
//	                 modes that move a running cluster to encryption one
//	                 member at a time (swim.PlaintextMode)
//	-label NAME      the cluster label: traffic with another one, or none,
//	                 is dropped
//	-allow LIST      comma-separated networks (10.0.0.0/8) or addresses;
//	                 traffic from any other source is dropped
//
// Keys given with -key can be read by anyone who can list this host's
// processes; a key file with mode 0600 cannot (the agent warns when others
// may read it). The key file holds one key per line, in base64, the
// primary first; blank lines and lines starting with # are ignored; one
// optional line "plaintext MODE" sets the mode (refuse when there is none):
//
//	# primary first
//	vVc0xR3eJcPlEZ1rMuETgd2fiFfw8CVK0JmTbJtSdJk=
//	mG0MaBRdHLQ5qgCFpjSvQg==
//	plaintext accept
//
// -keyfile excludes -key and -plaintext: the file alone says both, at
// start and on every reload. On SIGHUP the agent reads the file again and
// moves the running member to it in this order: it installs the keys it
// does not hold, makes the first key primary, removes the keys the file no
// longer lists, then sets the plaintext mode. It logs what changed (keys by
// fingerprint: the first 8 bytes of the key's SHA-256, in hex) and prints a
// keyring line. A file that cannot be read or parsed changes nothing and is
// logged, and so does one that asks for what a running member cannot do:
// drop its last key, or take its first one other than with
// "plaintext send". Without -keyfile, SIGHUP is logged and ignored; an
// agent started with a key file that holds no key yet runs without
// encryption and can be given its first key by a reload.
//
// One reload is one step. Rotating a key is three edits of the file, each
// applied on every member before the next: add the new key after the
// primary; move it first; delete the old one. A step that would break
// traffic until every member took it (a new primary installed by the same
// reload, or the old primary removed by it) is applied and logged as a
// warning.
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
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/swim-go/swim"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// The usage is printed; asking for it is no failure.
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "agent:", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		os.Exit(2)
	default:
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
	// Keys and Plaintext are set on keyring lines only.
	Keys      []string `json:"keys,omitempty"`
	Plaintext string   `json:"plaintext,omitempty"`
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
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}

	logger := newLogger(stderr, o.verbose)
	defer func() { _ = logger.Sync() }()
	cfg.Logger = logger

	if o.keyFile != "" {
		kf, err := readKeyFile(o.keyFile, func(msg string) { logger.Warn(msg) })
		if err != nil {
			return fmt.Errorf("-keyfile: %w", err)
		}
		cfg.Keys, cfg.Plaintext = kf.keys, kf.plaintext
	}

	out := &printer{enc: json.NewEncoder(stdout)}
	recent := &recentEvents{}
	cfg.Events = swim.EventFunc(func(e swim.Event) {
		recent.add(e)
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
	signal.Notify(sigs, append(append([]os.Signal{syscall.SIGTERM, os.Interrupt}, leaveSignals...), reloadSignals...)...)
	defer signal.Stop(sigs)

	ml, err := swim.New(cfg)
	if err != nil {
		return err
	}
	local := ml.LocalMember()
	out.print(line{Ev: "ready", Node: local.Name, Addr: local.Addr.String()})
	printKeyring := func() {
		out.print(line{Ev: "keyring", Node: local.Name, Keys: fingerprints(ml.ListKeys()), Plaintext: ml.Plaintext().String()})
	}
	if len(o.keys) > 0 || o.keyFile != "" {
		printKeyring()
	}
	stopHTTP := func() {}
	if o.httpAddr != "" {
		w := &web{ml: ml, events: recent, healthMax: cfg.AwarenessMaxMultiplier - 1, metrics: metricsHandler(ml), now: time.Now}
		stop, addr, err := serveHTTP(o.httpAddr, w.handler(), logger)
		if err != nil {
			_ = ml.Shutdown()
			return fmt.Errorf("-http: %w", err)
		}
		stopHTTP = stop
		defer stop()
		out.print(line{Ev: "http", Node: local.Name, Addr: addr})
		logger.Info("serving the live page", zap.String("url", "http://"+addr+"/"))
	}

	// Join and leave run on goroutines of their own so that a signal is
	// handled at once; both end when ctx is cancelled, before Shutdown.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	if o.join != "" {
		seeds := strings.Split(o.join, ",")
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
		switch {
		case sig == syscall.SIGTERM || sig == os.Interrupt:
			logger.Info("shutting down", zap.Stringer("signal", sig))
			cancel()
			wg.Wait()
			// The HTTP server stops first: /health must not answer 200
			// for a member going away.
			stopHTTP()
			return ml.Shutdown()
		case slices.Contains(reloadSignals, sig):
			if o.keyFile == "" {
				logger.Warn("no -keyfile to re-read; signal ignored", zap.Stringer("signal", sig))
				continue
			}
			// On the signal loop itself: reloads never overlap, and each
			// one is quick (a small file, a few keyring swaps).
			if err := reloadKeys(ml, o.keyFile, logger); err != nil {
				logger.Error("key file not applied", zap.Error(err))
				continue
			}
			printKeyring()
		default:
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
