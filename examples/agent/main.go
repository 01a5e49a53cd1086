// Command agent runs one swim member and prints every membership event it
// sees as one JSON line on stdout, for scripts, demos and black-box tests;
// with -http it also serves a live page of the cluster, its members and
// events as JSON, a health check and metrics, for operators:
//
//	{"t":1732890000123456789,"ev":"join","node":"node-2","addr":"127.0.0.1:40123","state":"alive"}
//
// "t" is the time in Unix nanoseconds; "ev" is one of
//
//	ready    this member listens (once, first; "addr" has the bound port,
//	         "identity" its public key in base64, "signatures" its mode)
//	http     the -http server listens ("addr", with the port it picked)
//	join     a member was seen alive for the first time, or again
//	leave    a member failed ("state":"dead") or left gracefully ("left")
//	suspect  a member is suspected of having failed
//	alive    a suspected member refuted the suspicion
//	update   a member changed its metadata or address
//	left     this member finished its own graceful leave
//	keyring  this member's keys and plaintext mode: after ready when it was
//	         given keys or a key file, and after each reload that applied
//	         ("keys": fingerprints, primary first; "plaintext": the mode)
//	load     with -load-rate, every 10s and once when the load stops: what
//	         it did so far ("load": {"sent", "failed", "received"}, below)
//
// Events about this member itself are reported only as ready, left and
// keyring (and its load lines). SIGUSR1 makes the member leave gracefully and keep running;
// SIGHUP re-reads the key file (below); SIGTERM or SIGINT shut it down
// (exit status 0), after a graceful leave (at most 5s) with -leave-on-term,
// as an orchestrator that only sends SIGTERM needs. A bad command line exits with status 2 and says which
// flag is wrong, -h with 0, a failure to start (a port in use) with 1.
// Logs go to stderr (-v for debug).
//
// Usage:
//
//	agent -name a -port 7946
//	agent -name b -port 0 -join 127.0.0.1:7946
//	agent -name c -keyfile /etc/swim/keys -label prod -allow 10.0.0.0/8
//	agent -bind 0.0.0.0 -join swim.default.svc.cluster.local -http :8080
//	agent identity|root|pubkey|cert ...   (signing keys and certificates, below)
//	agent migrate -name a -mode bridge ...  (a process moving from memberlist: docs/migrating.md)
//
// # Membership and timing
//
//	-name NAME       member name, unique in the cluster (default: the host name)
//	-bind IP         address to listen on, UDP and TCP (default 127.0.0.1;
//	                 0.0.0.0 for every interface)
//	-port N          port (default 7946; 0 picks a free one)
//	-advertise IP[:PORT]  the address peers reach this member at when it
//	                 is not the bound one (NAT, -bind 0.0.0.0)
//	-join SEEDS      comma-separated host:port or host (port 7946); a DNS
//	                 name stands for all its addresses, and is looked up
//	                 again, with a backoff, while this member is alone (a
//	                 Kubernetes headless Service: docs/kubernetes.md)
//	-profile P       timing defaults: lan (default), wan or local
//	                 (swim.DefaultConfig)
//	-pause-tolerance D  the longest pause a member survives without being
//	                 declared dead (Config.PauseTolerance; lan 5s, wan 15s,
//	                 local 2s); at least the probe interval
//	-indirect-checks K  members asked to ping a silent one (Config.IndirectChecks, 3)
//	-probe-interval D   the protocol period (Config.ProbeInterval; lan 1s,
//	                 wan 5s, local 200ms)
//	-probe-timeout D    a ping's wait for its ack, shorter than the
//	                 interval (Config.ProbeTimeout; lan 500ms, wan 3s,
//	                 local 100ms)
//	-leave-on-term   on SIGTERM or SIGINT, leave gracefully first (at most
//	                 5s), so peers report this member left, not dead
//	-meta TEXT       this member's metadata, gossiped to all (at most 512
//	                 bytes of UTF-8); written as key=value pairs separated by
//	                 commas ("zone=eu-1,role=db") it is shown as labels
//
// The timing flags override the profile's values; docs/tuning.md says what
// each trades.
//
// # Broadcast load
//
// For tests of the protocol under an application's traffic (the chaos
// suite's load pass):
//
//	-load-rate R     send R broadcasts a second (Memberlist.BroadcastWait;
//	                 a fraction for fewer than one), each with no key, so
//	                 that each must reach every member; 0 (the default)
//	                 sends none
//	-load-size N     payload bytes of each (default 100): at least 1, at
//	                 most what one packet holds with its framing, this
//	                 member's name and its label (about 1,300 bytes at the
//	                 default PacketBudget; the agent says how many when N is
//	                 over); while a member of an older release is live the
//	                 library allows half of that and counts the rest as failed
//
// With -load-rate the agent also counts the broadcasts delivered to it (a
// Messages handler) and prints a load line every 10s and when the load
// stops (on SIGTERM, or once the member left):
//
//	{"t":1796586389950301771,"ev":"load","node":"a","load":{"sent":100,"failed":0,"received":94}}
//
// "sent" counts the broadcasts the library took, "failed" those it
// refused, "received" the other members' broadcasts delivered here. A
// member whose tree links are backed up waits for room before the next
// broadcast and skips the ticks missed meanwhile: "sent" then falls short
// of the rate, which it never exceeds.
//
// # Live page and endpoints
//
// -http ADDR (host:port; ":8080" for every interface; port 0 picks one,
// reported by the http line) serves, until the agent stops:
//
//	/         a live page of the cluster as this member sees it: every
//	          member with its state, incarnation, round trip and metadata,
//	          the suspicions in progress with the time left before each
//	          suspect is declared dead, this member's local health and the
//	          last 100 events; it polls the two endpoints below every
//	          second and loads nothing from elsewhere
//	/members  that view as JSON: self, state, time, health {score, max},
//	          signatures (this member's mode), identity (its public key),
//	          members [{name, addr, state, incarnation, meta or meta_base64,
//	          labels, rtt_ms, local}], suspicions [{name, incarnation, from,
//	          confirmations, since, deadline, remaining_ms}]
//	/events   the last 100 events, oldest first: events [{seq, time, kind,
//	          node, addr, state, incarnation}], last_seq, limit; ?after=SEQ
//	          returns only the later ones
//	/health   200 and {"status":"ok",...} while the member runs; 503 with
//	          the status "left" once it left (SIGUSR1): a readiness probe
//	/metrics  the member's metrics for Prometheus (package swimprom), with
//	          the Go runtime's and the process's
//
// The server stops before the member on SIGTERM, so a health check never
// sees a member going away as healthy. It has no authentication: bind it
// to an address only operators reach.
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
//
// # Signed claims
//
// With signatures on, a member signs what only it may say about itself
// (its alive, its refutations, its leave) and its accusations, and checks
// the others' (swim.SignatureMode). Every file below is one line of base64
// (standard alphabet):
//
//	-identity FILE   this member's Ed25519 identity: the 32-byte seed. When
//	                 FILE does not exist the agent makes a new identity and
//	                 writes it there (mode 0600), so that the name keeps its
//	                 key across restarts; without the flag the member makes
//	                 a new key each time it starts
//	-signatures MODE off (the default), sign or required
//	                 (swim.SignatureMode): sign on every member, then
//	                 required on every member, to switch a running cluster
//	-trusted-root FILE  a root's 32-byte Ed25519 public key; repeat the flag,
//	                 or separate files with commas, for several roots. With
//	                 roots, a name is held only under the key a certificate
//	                 of one of them binds it to
//	-cert FILE       this member's certificate (certificate.New), from a
//	                 trusted root, for -name and the -identity key; required
//	                 with -trusted-root once signatures are on, checked at
//	                 start in any mode
//
// Operator commands make those files and exit; none overwrites a key file:
//
//	agent identity FILE              make an identity file (0600); print its public key
//	agent root -private F -public F  make a root key pair; print its public key
//	agent pubkey FILE                print the public key of an identity or root private key file
//	agent cert -root F -name NAME (-key KEY | -identity F) [-valid 720h] -out F
//	                                 issue a certificate, valid from now for -valid
//
// A certificate is checked against each member's clock: issue the next one
// well before -valid runs out, and restart the member with it.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
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
	"github.com/swim-go/swim/certificate"
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
	// Life is set on restart and conflict lines: the new process's life,
	// or the other process's under this member's name.
	Life uint64 `json:"life,omitempty"`
	// Keys and Plaintext are set on keyring lines only.
	Keys      []string `json:"keys,omitempty"`
	Plaintext string   `json:"plaintext,omitempty"`
	// Load is set on load lines only.
	Load *loadCounts `json:"load,omitempty"`
	// Identity (this member's public key, base64) and Signatures (the
	// signature mode) are set on the ready line only.
	Identity   string `json:"identity,omitempty"`
	Signatures string `json:"signatures,omitempty"`
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
	if len(args) > 0 {
		if cmd, ok := commands[args[0]]; ok {
			return cmd(args[1:], stdout, stderr)
		}
	}
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
	for _, w := range o.warnings {
		logger.Warn(w)
	}
	if o.identityMade {
		logger.Info("made a new identity", zap.String("path", o.identityFile),
			zap.String("key", encodeKey(cfg.Claims.Identity.Public().(ed25519.PublicKey))))
	}
	if c, err := certificate.Parse(cfg.Claims.Certificate); err == nil {
		logger.Info("certificate", zap.String("path", o.certFile), zap.String("name", c.Name),
			zap.Time("not_after", c.NotAfter), zap.String("root", hex.EncodeToString(c.Root[:])))
	}

	if o.keyFile != "" {
		kf, err := readKeyFile(o.keyFile, func(msg string) { logger.Warn(msg) })
		if err != nil {
			return fmt.Errorf("-keyfile: %w", err)
		}
		cfg.Security.Keys, cfg.Security.Plaintext = kf.keys, kf.plaintext
	}

	out := &printer{enc: json.NewEncoder(stdout)}
	recent := &recentEvents{}
	cfg.Events = swim.EventFunc(func(e swim.Event) {
		recent.add(e)
		if e.Member.Name == cfg.Name && e.Kind != swim.EventConflict {
			return // this member's own lifecycle is ready and left
		}
		l := line{Ev: e.Kind.String(), Node: e.Member.Name, Addr: e.Member.Addr.String(), Inc: e.Member.Incarnation}
		switch e.Kind {
		case swim.EventLeave:
			l.State = e.Member.State.String()
		case swim.EventRestart, swim.EventConflict:
			l.Life = e.Member.Life
		}
		out.print(l)
	})

	var load *broadcastLoad
	if o.loadRate > 0 {
		load = &broadcastLoad{rate: o.loadRate, size: o.loadSize, every: loadReportEvery}
		cfg.Messages = swim.MessageFunc(load.receive)
	}

	// Subscribe before starting, so that no signal sent once the ready
	// line is out can find the default action (exit) still in place.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, append(append([]os.Signal{syscall.SIGTERM, os.Interrupt}, leaveSignals...), reloadSignals...)...)
	defer signal.Stop(sigs)

	var metrics *agentMetrics
	if o.httpAddr != "" {
		if metrics, err = newAgentMetrics(cfg); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	ml, err := swim.New(cfg)
	if err != nil {
		if ferr := flagError(err); ferr != nil {
			return ferr
		}
		return err
	}
	local := ml.LocalMember()
	out.print(line{Ev: "ready", Node: local.Name, Addr: local.Addr.String(),
		Identity: encodeKey(ml.IdentityKey()), Signatures: ml.Signatures().String()})
	printKeyring := func() {
		out.print(line{Ev: "keyring", Node: local.Name, Keys: fingerprints(ml.ListKeys()), Plaintext: ml.Plaintext().String()})
	}
	if len(o.keys) > 0 || o.keyFile != "" {
		printKeyring()
	}
	stopHTTP := func() {}
	if o.httpAddr != "" {
		w := &web{ml: ml, events: recent, healthMax: cfg.AwarenessMaxMultiplier - 1, metrics: metrics.handler(ml), now: time.Now}
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

	if load != nil {
		// On the group that SIGTERM cancels and waits for, so the load
		// stops, and prints its last counts, before the member shuts down.
		wg.Go(func() {
			load.run(ctx, ml, func(c loadCounts) { out.print(line{Ev: "load", Node: local.Name, Load: &c}) }, logger)
		})
	}

	var leaveOnce sync.Once
	printLeft := sync.OnceFunc(func() { out.print(line{Ev: "left", Node: local.Name, Addr: local.Addr.String()}) })
	for sig := range sigs {
		switch {
		case sig == syscall.SIGTERM || sig == os.Interrupt:
			if o.leaveOnTerm {
				// A second Leave (after SIGUSR1) waits for the same
				// announcement.
				logger.Info("leaving before shutting down", zap.Stringer("signal", sig))
				lctx, lcancel := context.WithTimeout(ctx, leaveOnTermTimeout)
				if err := ml.Leave(lctx); err != nil {
					logger.Warn("leave before shutdown", zap.Error(err))
				} else {
					printLeft()
				}
				lcancel()
			}
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
					printLeft()
				})
			})
		}
	}
	return nil
}

// leaveOnTermTimeout bounds the graceful leave of -leave-on-term: well
// inside the 30 s an orchestrator usually waits after SIGTERM.
const leaveOnTermTimeout = 5 * time.Second

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
