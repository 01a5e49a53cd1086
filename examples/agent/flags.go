package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/swim-go/swim"
)

// errUsage marks errors in the command line: the agent exits with status
// 2 for them, 1 for failures once it runs.
var errUsage = errors.New("usage")

// usageErr wraps err as an error of the command line.
func usageErr(err error) error { return fmt.Errorf("%w: %w", errUsage, err) }

// options are the parsed flags.
type options struct {
	name, bind, join, profile string
	port                      int
	advertise                 string // "" or ip[:port]
	verbose                   bool
	leaveOnTerm               bool

	// The protocol's tunables; each applies only when its flag is given,
	// over the profile's default.
	pauseTolerance time.Duration
	indirectChecks int
	probeInterval  time.Duration
	probeTimeout   time.Duration
	meta           string
	set            map[string]bool // the flags given

	keys      [][]byte // -key
	keyFile   string   // -keyfile
	plaintext swim.PlaintextMode
	label     string
	allow     []netip.Prefix

	httpAddr string // -http; "" for none

	// Signed claims (signing.go).
	identityFile string // -identity; "" for a key per process
	signatures   swim.SignatureMode
	roots        listFlag // -trusted-root: public key files
	certFile     string   // -cert

	// Set by config: whether it made the -identity file, and what to warn
	// of once there is a logger.
	identityMade bool
	warnings     []string

	loadRate float64 // -load-rate: broadcasts a second; 0 for none
	loadSize int     // -load-size: payload bytes of each
}

// flagOfField names the flag that sets a Config field, so that an invalid
// combination the library refuses is reported in the command's terms.
var flagOfField = map[string]string{
	"Name":                "name",
	"BindAddr":            "bind",
	"BindPort":            "port",
	"AdvertiseAddr":       "advertise",
	"AdvertisePort":       "advertise",
	"PauseTolerance":      "pause-tolerance",
	"IndirectChecks":      "indirect-checks",
	"ProbeInterval":       "probe-interval",
	"ProbeTimeout":        "probe-timeout",
	"Meta":                "meta",
	"Label":               "label",
	"Claims.Identity":     "identity",
	"Claims.Signatures":   "signatures",
	"Claims.TrustedRoots": "trusted-root",
	"Claims.Certificate":  "cert",
}

// parseFlags parses the command line; errors name the flag and match
// errUsage (flag.ErrHelp for -h).
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	host, _ := os.Hostname()
	o := &options{}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: agent [flags]\n       agent identity|root|pubkey|cert ... (signing keys and certificates; each with -h)\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.name, "name", host, "member name, unique in the cluster")
	fs.StringVar(&o.bind, "bind", "127.0.0.1", "IP address to listen on (UDP and TCP); 0.0.0.0 for every interface")
	fs.IntVar(&o.port, "port", swim.DefaultPort, "port to listen on; 0 picks a free one")
	fs.StringVar(&o.advertise, "advertise", "", "IP address (or ip:port) peers reach this member at, when it differs from -bind (NAT, -bind 0.0.0.0, a pod IP)")
	fs.StringVar(&o.join, "join", "", "comma-separated seeds (host:port, or host for port 7946); a DNS name stands for all its addresses and is looked up again while alone")
	fs.StringVar(&o.profile, "profile", "lan", "timing profile: lan, wan or local")
	fs.BoolVar(&o.verbose, "v", false, "debug logging on stderr")
	fs.BoolVar(&o.leaveOnTerm, "leave-on-term", false, "on SIGTERM or SIGINT, leave gracefully (at most 5s) before shutting down, so peers see a leave, not a failure")
	fs.DurationVar(&o.pauseTolerance, "pause-tolerance", 0, "longest pause (GC, VM migration) a member survives without being declared dead; 0 keeps the profile's (lan 5s, wan 15s, local 2s)")
	fs.IntVar(&o.indirectChecks, "indirect-checks", 0, "k, the members asked to ping a silent member; 0 keeps the profile's (3)")
	fs.DurationVar(&o.probeInterval, "probe-interval", 0, "protocol period; 0 keeps the profile's (lan 1s, wan 5s, local 200ms)")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", 0, "how long a ping waits for its ack; 0 keeps the profile's (lan 500ms, wan 3s, local 100ms)")
	fs.StringVar(&o.meta, "meta", "", "this member's metadata, gossiped to all: any text up to 512 bytes, by convention key=value pairs separated by commas")
	key := fs.String("key", "", "comma-separated base64 AES keys (16, 24 or 32 bytes), the primary first")
	fs.StringVar(&o.keyFile, "keyfile", "", "file of base64 keys, one a line, the primary first, and an optional line \"plaintext MODE\"; re-read on SIGHUP")
	plaintext := fs.String("plaintext", "refuse", "with keys: refuse, accept or send plaintext (accept and send are temporary migration steps)")
	fs.StringVar(&o.label, "label", "", "cluster label (at most 255 bytes): traffic with another label, or none, is dropped")
	allow := fs.String("allow", "", "comma-separated networks (10.0.0.0/8) or addresses traffic may come from; empty allows all")
	fs.StringVar(&o.httpAddr, "http", "", "serve the live page, /members, /events, /health and /metrics on this address (host:port; port 0 picks one); off when empty")
	fs.StringVar(&o.identityFile, "identity", "", "file of this member's Ed25519 identity (base64 seed), made (mode 0600) when it does not exist, so the name keeps its key across restarts; empty: a new key each start")
	signatures := fs.String("signatures", "off", "signed claims: off, sign or required (sign, then required, on every member in turn)")
	fs.Var(&o.roots, "trusted-root", "file of a trusted root's public key (base64); repeat it, or separate files with commas, for several roots")
	fs.StringVar(&o.certFile, "cert", "", "file of this member's certificate (base64, made by agent cert) from a -trusted-root, for -name and the -identity key")
	fs.Float64Var(&o.loadRate, "load-rate", 0, "a test load: broadcasts a second this member sends (Broadcast, no key, -load-size bytes each), counted in a load line every 10s; 0 sends none")
	fs.IntVar(&o.loadSize, "load-size", 100, "payload bytes of each -load-rate broadcast: at least 1, at most what one packet holds (about 1,300 bytes, less the name and label)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageErr(err)
	}
	if fs.NArg() > 0 {
		return nil, usageErr(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if err := o.check(*key, *plaintext, *allow, *signatures); err != nil {
		return nil, usageErr(err)
	}
	return o, nil
}

// check validates what parseFlags read and decodes the flags that need it.
func (o *options) check(key, plaintext, allow, signatures string) error {
	var err error
	if o.keyFile != "" {
		// One source of truth: the file is re-read on SIGHUP, and a flag
		// beside it would be forgotten then.
		for _, f := range []string{"key", "plaintext"} {
			if o.set[f] {
				return fmt.Errorf("-%s and -keyfile exclude each other: put the keys and the plaintext line in the file", f)
			}
		}
	}
	if o.set["key"] {
		if o.keys, err = parseKeys(key); err != nil {
			return fmt.Errorf("-key: %w", err)
		}
	}
	if o.plaintext, err = swim.ParsePlaintextMode(plaintext); err != nil {
		return fmt.Errorf("-plaintext: %w", err)
	}
	if o.plaintext != swim.PlaintextRefuse && len(o.keys) == 0 && o.keyFile == "" {
		return fmt.Errorf("-plaintext %s needs -key: without a key there is nothing to migrate to", o.plaintext)
	}
	if o.signatures, err = swim.ParseSignatureMode(signatures); err != nil {
		return fmt.Errorf("-signatures: %w", err)
	}
	if o.set["allow"] {
		if o.allow, err = parseAllow(allow); err != nil {
			return fmt.Errorf("-allow: %w", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"pause-tolerance", o.pauseTolerance}, {"probe-interval", o.probeInterval}, {"probe-timeout", o.probeTimeout}} {
		if o.set[d.name] && d.v <= 0 {
			return fmt.Errorf("-%s %v: must be positive", d.name, d.v)
		}
	}
	if o.set["indirect-checks"] && o.indirectChecks < 1 {
		return fmt.Errorf("-indirect-checks %d: must be at least 1", o.indirectChecks)
	}
	if !utf8.ValidString(o.meta) {
		return errors.New("-meta: not UTF-8 text")
	}
	if o.set["advertise"] {
		if _, _, err := parseAdvertise(o.advertise); err != nil {
			return fmt.Errorf("-advertise: %w", err)
		}
	}
	if o.set["http"] {
		if _, _, err := net.SplitHostPort(o.httpAddr); err != nil {
			return fmt.Errorf("-http %q: want host:port (127.0.0.1:8080, :8080): %w", o.httpAddr, err)
		}
	}
	// Written so that NaN fails too.
	if !(o.loadRate >= 0 && o.loadRate <= loadRateMax) {
		return fmt.Errorf("-load-rate %v: must be 0 (no load) or a positive number of broadcasts a second, at most %.0f", o.loadRate, loadRateMax)
	}
	if o.loadSize < 1 {
		return fmt.Errorf("-load-size %d: must be at least 1 byte", o.loadSize)
	}
	return nil
}

// parseAdvertise parses -advertise: an IP address, or ip:port (port 0:
// the bound one).
func parseAdvertise(s string) (netip.Addr, int, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), int(ap.Port()), nil
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q is neither an IP address nor ip:port", s)
	}
	if ip.IsUnspecified() {
		return netip.Addr{}, 0, fmt.Errorf("%q cannot be reached by peers: give this member's own address", s)
	}
	return ip, 0, nil
}

// config builds the member's configuration from the profile and the
// flags, and validates it; a value the library refuses is reported under
// the flag that set it.
func (o *options) config() (*swim.Config, error) {
	cfg, err := swim.DefaultConfig(o.profile)
	if err != nil {
		return nil, usageErr(fmt.Errorf("-profile: %w", err))
	}
	cfg.Name = o.name
	cfg.BindAddr = o.bind
	cfg.BindPort = o.port
	cfg.Label = o.label
	cfg.Security.AllowedCIDRs = o.allow
	cfg.Security.Keys, cfg.Security.Plaintext = o.keys, o.plaintext
	if o.advertise != "" {
		ip, port, _ := parseAdvertise(o.advertise) // checked by parseFlags
		cfg.AdvertiseAddr, cfg.AdvertisePort = ip.String(), port
	}
	if o.set["pause-tolerance"] {
		cfg.PauseTolerance = o.pauseTolerance
	}
	if o.set["indirect-checks"] {
		cfg.IndirectChecks = o.indirectChecks
	}
	if o.set["probe-interval"] {
		cfg.ProbeInterval = o.probeInterval
	}
	if o.set["probe-timeout"] {
		cfg.ProbeTimeout = o.probeTimeout
	}
	if o.meta != "" {
		cfg.Meta = []byte(o.meta)
	}
	if err := o.signing(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		if ferr := flagError(err); ferr != nil {
			return nil, ferr
		}
		return nil, usageErr(err)
	}
	if err := checkCertificate(cfg, time.Now()); err != nil {
		return nil, err
	}
	// The largest broadcast depends on the name and label, so it is
	// checked on the finished configuration, at start rather than at the
	// first broadcast.
	if o.loadRate > 0 || o.set["load-size"] {
		most, err := maxLoadSize(cfg)
		if err != nil {
			return nil, fmt.Errorf("-load-size: %w", err)
		}
		if o.loadSize > most {
			return nil, usageErr(fmt.Errorf("-load-size %d: over the largest broadcast this member can send, %d bytes (one packet of PacketBudget %d, less the framing, the name and the label)",
				o.loadSize, most, cfg.PacketBudget))
		}
	}
	return cfg, nil
}

// flagError reports a *swim.ConfigError as an error of the flag that
// sets its field; nil for other errors and fields no flag sets.
func flagError(err error) error {
	var ce *swim.ConfigError
	if !errors.As(err, &ce) {
		return nil
	}
	field, _, _ := strings.Cut(ce.Field, "[") // Claims.TrustedRoots[1]
	if f, ok := flagOfField[field]; ok {
		return usageErr(fmt.Errorf("-%s: %s %s", f, ce.Field, ce.Reason))
	}
	return nil
}

// metaLabels reads metadata written as key=value pairs separated by
// commas; false when it is not in that form (then it is shown as text).
func metaLabels(meta []byte) (map[string]string, bool) {
	if len(meta) == 0 || !utf8.Valid(meta) {
		return nil, false
	}
	out := map[string]string{}
	for pair := range strings.SplitSeq(string(meta), ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, false
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, true
}
