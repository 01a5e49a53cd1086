package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/certificate"
)

// Signed claims (swim.SignatureMode): the flags -identity, -signatures,
// -trusted-root and -cert, and the commands that make the files they read.
//
// Every file is one line of standard base64 (padding optional):
//
//	identity file, root private key   the 32-byte Ed25519 seed (mode 0600)
//	root public key                   the 32-byte Ed25519 public key
//	certificate                       what certificate.New returns

// maxLineFile bounds what a one-line key or certificate file may hold:
// far more than a certificate (about 200 bytes in base64), and it keeps a
// wrong path (a log, a device) from being read whole.
const maxLineFile = 4 << 10

// defaultCertValidity is how long a certificate of `agent cert` is valid
// unless -valid says otherwise.
const defaultCertValidity = 720 * time.Hour

// listFlag is a flag that may be given more than once, each time with one
// value or several separated by commas.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return fmt.Errorf("empty item in %q", s)
		}
		*l = append(*l, f)
	}
	return nil
}

func encodeKey(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// decodeBase64 decodes s (standard alphabet, padding optional) and checks
// that it is n bytes long (any length for n 0). Errors never quote s.
func decodeBase64(s string, n int, what string) ([]byte, error) {
	enc := base64.StdEncoding
	if !strings.HasSuffix(s, "=") {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64 (standard alphabet): %w", err)
	}
	if n > 0 && len(b) != n {
		return nil, fmt.Errorf("decodes to %d bytes: want %s, %d bytes", len(b), what, n)
	}
	return b, nil
}

// readLineFile reads a file that holds one line (surrounding white space
// ignored) and returns it with the file's permissions.
func readLineFile(path string) (string, os.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLineFile+1))
	if err != nil {
		return "", 0, err
	}
	if len(b) > maxLineFile {
		return "", 0, fmt.Errorf("%s: over %d bytes", path, maxLineFile)
	}
	s := strings.TrimSpace(string(b))
	switch {
	case s == "":
		return "", 0, fmt.Errorf("%s: empty", path)
	case strings.ContainsAny(s, " \t\r\n"):
		return "", 0, fmt.Errorf("%s: want one line of base64", path)
	}
	return s, st.Mode().Perm(), nil
}

// readPrivateKey reads an identity file or a root's private key file: an
// Ed25519 seed. warn receives a complaint about the file's permissions,
// which does not stop it from being used. A missing file's error matches
// os.ErrNotExist.
func readPrivateKey(path string, warn func(msg string)) (ed25519.PrivateKey, error) {
	s, perm, err := readLineFile(path)
	if err != nil {
		return nil, err
	}
	seed, err := decodeBase64(s, ed25519.SeedSize, "an Ed25519 seed")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if perm&0o077 != 0 && warn != nil {
		warn(fmt.Sprintf("private key file %s is readable by others (mode %v): chmod 600 it", path, perm))
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// readPublicKey reads a root's public key file.
func readPublicKey(path string) (ed25519.PublicKey, error) {
	s, _, err := readLineFile(path)
	if err != nil {
		return nil, err
	}
	k, err := decodeBase64(s, ed25519.PublicKeySize, "an Ed25519 public key")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// readCertificate reads a certificate file and checks that it is one
// (not that it is valid: see certificate.Verify).
func readCertificate(path string) ([]byte, error) {
	s, _, err := readLineFile(path)
	if err != nil {
		return nil, err
	}
	c, err := decodeBase64(s, 0, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := certificate.Parse(c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// loadIdentity reads the identity file at path or, when there is none,
// makes a new identity and writes it there (mode 0600), so that the
// member keeps its key across restarts; made reports the latter.
func loadIdentity(path string, warn func(msg string)) (key ed25519.PrivateKey, made bool, err error) {
	key, err = readPrivateKey(path, warn)
	if !errors.Is(err, os.ErrNotExist) {
		return key, false, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	if err := writeNew(path, []byte(encodeKey(key.Seed())+"\n"), 0o600); err != nil {
		if errors.Is(err, os.ErrExist) {
			// Another process made it meanwhile: that key it is.
			key, err = readPrivateKey(path, warn)
			return key, false, err
		}
		return nil, false, err
	}
	return key, true, nil
}

// writeNew writes data to path, which must not exist yet, with mode perm.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// writeReplace writes data to path, replacing what is there at once (by
// a rename), with mode perm.
func writeReplace(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// signing puts into cfg what the signing flags name: the mode, the
// identity (made when its file does not exist), the trusted roots and the
// certificate. Errors name the flag.
func (o *options) signing(cfg *swim.Config) error {
	cfg.Claims.Signatures = o.signatures
	if o.identityFile != "" {
		key, made, err := loadIdentity(o.identityFile, func(msg string) { o.warnings = append(o.warnings, msg) })
		if err != nil {
			return usageErr(fmt.Errorf("-identity: %w", err))
		}
		cfg.Claims.Identity, o.identityMade = key, made
	}
	for _, path := range o.roots {
		r, err := readPublicKey(path)
		if err != nil {
			return usageErr(fmt.Errorf("-trusted-root: %w", err))
		}
		cfg.Claims.TrustedRoots = append(cfg.Claims.TrustedRoots, r)
	}
	if o.certFile != "" {
		if o.identityFile == "" {
			return usageErr(errors.New("-cert needs -identity: a certificate binds the name to one key," +
				" and without -identity the member makes a new key each time it starts"))
		}
		c, err := readCertificate(o.certFile)
		if err != nil {
			return usageErr(fmt.Errorf("-cert: %w", err))
		}
		cfg.Claims.Certificate = c
	}
	return nil
}

// checkCertificate checks, on a validated configuration, what New checks
// at start, so that it is reported under the flags: with signatures on
// and trusted roots, a certificate is required; a certificate given, in
// any mode, must be one of the roots' for this member's name and identity,
// and not expired at now.
func checkCertificate(cfg *swim.Config, now time.Time) error {
	if len(cfg.Claims.Certificate) == 0 {
		if cfg.Claims.Signatures != swim.SignaturesOff && len(cfg.Claims.TrustedRoots) > 0 {
			return usageErr(fmt.Errorf("-signatures %s with -trusted-root needs -cert: a certificate of a trusted root for this member (agent cert)", cfg.Claims.Signatures))
		}
		return nil
	}
	pub := cfg.Claims.Identity.Public().(ed25519.PublicKey) // -cert needs -identity
	if err := certificate.Verify(cfg.Claims.Certificate, cfg.Name, pub, cfg.Claims.TrustedRoots, now); err != nil {
		return usageErr(fmt.Errorf("-cert: %w (name %q, identity %s)", err, cfg.Name, encodeKey(pub)))
	}
	return nil
}

// commandFlags returns the flag set of a command, printing usage and its
// flags on -h and errors.
func commandFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: agent %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseCommand parses a command's arguments, wanting nargs positional
// ones; errors match errUsage (flag.ErrHelp for -h).
func parseCommand(fs *flag.FlagSet, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr(err)
	}
	if fs.NArg() != nargs {
		return usageErr(fmt.Errorf("%s: want %d arguments, got %q", fs.Name(), nargs, fs.Args()))
	}
	return nil
}

// cmdIdentity, `agent identity FILE`, makes an identity file and prints
// its public key.
func cmdIdentity(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("identity", "FILE\n\nMakes a member identity (an Ed25519 key) in FILE, mode 0600, and prints its public key. FILE must not exist.", stderr)
	if err := parseCommand(fs, args, 1); err != nil {
		return err
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	if err := writeNew(fs.Arg(0), []byte(encodeKey(key.Seed())+"\n"), 0o600); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	_, err = fmt.Fprintln(stdout, encodeKey(key.Public().(ed25519.PublicKey)))
	return err
}

// cmdRoot, `agent root -private FILE -public FILE`, makes a root key pair
// and prints its public key.
func cmdRoot(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("root", "-private FILE -public FILE\n\nMakes a root key pair: the private key in -private (mode 0600), which signs certificates (agent cert), and the public key in -public, which members trust (-trusted-root). Neither file may exist. Prints the public key.", stderr)
	private := fs.String("private", "", "file for the root's private key (keep it off the members)")
	public := fs.String("public", "", "file for the root's public key")
	if err := parseCommand(fs, args, 0); err != nil {
		return err
	}
	if *private == "" || *public == "" {
		return usageErr(errors.New("root: -private and -public are both required"))
	}
	if *private == *public {
		return usageErr(errors.New("root: -private and -public name the same file"))
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	if err := writeNew(*private, []byte(encodeKey(key.Seed())+"\n"), 0o600); err != nil {
		return fmt.Errorf("root: %w", err)
	}
	if err := writeNew(*public, []byte(encodeKey(pub)+"\n"), 0o644); err != nil {
		_ = os.Remove(*private) // a private key without its public one: start again
		return fmt.Errorf("root: %w", err)
	}
	_, err = fmt.Fprintln(stdout, encodeKey(pub))
	return err
}

// cmdPubkey, `agent pubkey FILE`, prints the public key of an identity
// file (or of a root's private key).
func cmdPubkey(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("pubkey", "FILE\n\nPrints the public key of an identity file, or of a root's private key file, in base64.", stderr)
	if err := parseCommand(fs, args, 1); err != nil {
		return err
	}
	key, err := readPrivateKey(fs.Arg(0), func(msg string) { fmt.Fprintln(stderr, "agent: warning:", msg) })
	if err != nil {
		return fmt.Errorf("pubkey: %w", err)
	}
	_, err = fmt.Fprintln(stdout, encodeKey(key.Public().(ed25519.PublicKey)))
	return err
}

// cmdCert, `agent cert -root FILE -name NAME (-key KEY | -identity FILE)
// [-valid D] -out FILE`, issues a member certificate.
func cmdCert(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("cert", "-root FILE -name NAME (-key KEY | -identity FILE) [-valid D] -out FILE\n\nIssues a certificate binding NAME to a member's public key until now + D, signed by a root (agent root), and writes it to -out (replacing what is there).", stderr)
	rootFile := fs.String("root", "", "the root's private key file")
	name := fs.String("name", "", "the member's name (its -name)")
	keyText := fs.String("key", "", "the member's public key, base64 (agent identity and agent pubkey print it)")
	identity := fs.String("identity", "", "the member's identity file, instead of -key")
	valid := fs.Duration("valid", defaultCertValidity, "how long the certificate is valid; issue the next well before it ends")
	out := fs.String("out", "", "file to write the certificate to")
	if err := parseCommand(fs, args, 0); err != nil {
		return err
	}
	switch {
	case *rootFile == "":
		return usageErr(errors.New("cert: -root is required"))
	case *name == "":
		return usageErr(errors.New("cert: -name is required"))
	case (*keyText == "") == (*identity == ""):
		return usageErr(errors.New("cert: give the member's key with one of -key and -identity"))
	case *valid <= 0:
		return usageErr(fmt.Errorf("cert: -valid %v: must be positive", *valid))
	case *out == "":
		return usageErr(errors.New("cert: -out is required"))
	}
	warn := func(msg string) { fmt.Fprintln(stderr, "agent: warning:", msg) }
	root, err := readPrivateKey(*rootFile, warn)
	if err != nil {
		return usageErr(fmt.Errorf("cert: -root: %w", err))
	}
	var key ed25519.PublicKey
	if *identity != "" {
		id, err := readPrivateKey(*identity, warn)
		if err != nil {
			return usageErr(fmt.Errorf("cert: -identity: %w", err))
		}
		key = id.Public().(ed25519.PublicKey)
	} else if key, err = decodeBase64(strings.TrimSpace(*keyText), ed25519.PublicKeySize, "an Ed25519 public key"); err != nil {
		return usageErr(fmt.Errorf("cert: -key: %w", err))
	}
	notAfter := time.Now().Add(*valid).Truncate(time.Second)
	cert, err := certificate.New(root, *name, key, notAfter)
	if err != nil {
		return usageErr(fmt.Errorf("cert: %w", err))
	}
	if err := writeReplace(*out, []byte(encodeKey(cert)+"\n"), 0o644); err != nil {
		return fmt.Errorf("cert: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s: certificate for %q, key %s, until %s\n",
		*out, *name, encodeKey(key), notAfter.UTC().Format(time.RFC3339))
	return err
}
