package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/certificate"
)

// configOf parses args and builds the configuration, as run does.
func configOf(t *testing.T, args ...string) (*options, *swim.Config, error) {
	t.Helper()
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := o.config()
	return o, cfg, err
}

// command runs an operator command through run and returns its stdout.
func command(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(args, &out, io.Discard)
	return out.String(), err
}

// mustCommand runs an operator command that must succeed and returns its
// stdout's one line.
func mustCommand(t *testing.T, args ...string) string {
	t.Helper()
	out, err := command(t, args...)
	require.NoError(t, err, "%q", args)
	return strings.TrimSpace(out)
}

func TestIdentityFileMadeThenKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.id")
	o, cfg, err := configOf(t, "-name", "a", "-identity", path)
	require.NoError(t, err)
	require.True(t, o.identityMade)
	require.Len(t, cfg.Claims.Identity, ed25519.PrivateKeySize)

	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, base64.StdEncoding.EncodeToString(cfg.Claims.Identity.Seed())+"\n", string(b), "the seed, base64, on one line")

	// The second start reads it: same key, nothing made.
	o2, cfg2, err := configOf(t, "-name", "a", "-identity", path)
	require.NoError(t, err)
	require.False(t, o2.identityMade)
	require.Equal(t, cfg.Claims.Identity, cfg2.Claims.Identity)
	require.Empty(t, o2.warnings)

	// pubkey prints its public key.
	assert.Equal(t, encodeKey(cfg.Claims.Identity.Public().(ed25519.PublicKey)), mustCommand(t, "pubkey", path))

	// A file others may read is used, with a warning.
	require.NoError(t, os.Chmod(path, 0o644))
	o3, cfg3, err := configOf(t, "-name", "a", "-identity", path)
	require.NoError(t, err)
	require.Equal(t, cfg.Claims.Identity, cfg3.Claims.Identity)
	require.Len(t, o3.warnings, 1)
	assert.Contains(t, o3.warnings[0], "readable by others")

	// Without -identity the library makes a key per process.
	_, cfg, err = configOf(t, "-name", "a")
	require.NoError(t, err)
	require.Nil(t, cfg.Claims.Identity)
}

func TestBadIdentityFile(t *testing.T) {
	dir := t.TempDir()
	seed := bytes.Repeat([]byte{9}, ed25519.SeedSize)
	b64 := base64.StdEncoding.EncodeToString(seed)
	for _, tc := range []struct{ name, content, err string }{
		{"empty", "", "empty"},
		{"blank", " \n\n", "empty"},
		{"not base64", b64[:10] + "*" + b64[11:] + "\n", "not base64"},
		{"31 bytes", base64.StdEncoding.EncodeToString(seed[:31]), "decodes to 31 bytes: want an Ed25519 seed, 32 bytes"},
		{"a private key, not a seed", base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed)), "decodes to 64 bytes"},
		{"two lines", b64[:20] + "\n" + b64[20:], "want one line of base64"},
		{"an AES key file", "# keys\n" + b64, "want one line of base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			_, _, err := configOf(t, "-identity", path)
			require.ErrorIs(t, err, errUsage, "a bad command line exits with status 2")
			require.ErrorContains(t, err, "-identity: ")
			require.ErrorContains(t, err, tc.err)
			assert.NotContains(t, err.Error(), b64, "an error must not quote a key")
			after, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, tc.content, string(after), "a bad identity file was overwritten")
		})
	}
	_, _, err := configOf(t, "-identity", dir)
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "-identity: "+dir+": not a regular file")
	_, _, err = configOf(t, "-identity", filepath.Join(dir, "no", "such", "dir", "id"))
	require.ErrorIs(t, err, errUsage)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestSignaturesFlag(t *testing.T) {
	_, cfg, err := configOf(t)
	require.NoError(t, err)
	require.Equal(t, swim.SignaturesOff, cfg.Claims.Signatures, "off by default")
	for _, mode := range []swim.SignatureMode{swim.SignaturesOff, swim.SignaturesSign, swim.SignaturesRequired} {
		_, cfg, err := configOf(t, "-signatures", mode.String())
		require.NoError(t, err)
		require.Equal(t, mode, cfg.Claims.Signatures)
	}
	for _, bad := range []string{"on", "", "Required"} {
		_, err := parseFlags([]string{"-signatures", bad}, io.Discard)
		require.ErrorIs(t, err, errUsage)
		require.ErrorContains(t, err, "-signatures: swim: signature mode")
	}
}

// signingFiles makes, with the operator commands, a root and identities
// and certificates for names, in dir.
type signingFiles struct {
	rootKey, rootPub string
	root             ed25519.PublicKey
}

func newRoot(t *testing.T, dir, name string) signingFiles {
	t.Helper()
	f := signingFiles{rootKey: filepath.Join(dir, name+".key"), rootPub: filepath.Join(dir, name+".pub")}
	printed := mustCommand(t, "root", "-private", f.rootKey, "-public", f.rootPub)
	var err error
	f.root, err = readPublicKey(f.rootPub)
	require.NoError(t, err)
	require.Equal(t, encodeKey(f.root), printed, "root prints the public key it wrote")
	st, err := os.Stat(f.rootKey)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	require.Equal(t, printed, mustCommand(t, "pubkey", f.rootKey), "the private file holds the same key pair")
	return f
}

func TestCertificateCommand(t *testing.T) {
	dir := t.TempDir()
	r := newRoot(t, dir, "root")
	id := filepath.Join(dir, "a.id")
	pub := mustCommand(t, "identity", id)
	key, err := readPrivateKey(id, nil)
	require.NoError(t, err)
	require.Equal(t, encodeKey(key.Public().(ed25519.PublicKey)), pub, "identity prints the key it wrote")

	// From the identity file, and from the key: both certificates verify
	// for the name and key, and only for them.
	before := time.Now()
	for i, keyArgs := range [][]string{{"-identity", id}, {"-key", pub}} {
		out := filepath.Join(dir, "a.cert")
		args := append([]string{"cert", "-root", r.rootKey, "-name", "a", "-out", out}, keyArgs...)
		if i == 1 {
			args = append(args, "-valid", "1h")
		}
		printed := mustCommand(t, args...)
		assert.Contains(t, printed, `certificate for "a", key `+pub)
		cert, err := readCertificate(out)
		require.NoError(t, err)
		roots := []ed25519.PublicKey{r.root}
		pk := key.Public().(ed25519.PublicKey)
		require.NoError(t, certificate.Verify(cert, "a", pk, roots, time.Now()))
		require.ErrorIs(t, certificate.Verify(cert, "b", pk, roots, time.Now()), certificate.ErrMismatch)
		other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey)
		require.ErrorIs(t, certificate.Verify(cert, "a", pk, []ed25519.PublicKey{other}, time.Now()), certificate.ErrUnknownRoot)

		valid := defaultCertValidity
		if i == 1 {
			valid = time.Hour
		}
		c, err := certificate.Parse(cert)
		require.NoError(t, err)
		require.WithinDuration(t, before.Add(valid), c.NotAfter, 2*time.Second)
		require.ErrorIs(t, certificate.Verify(cert, "a", pk, roots, before.Add(valid+2*time.Second)), certificate.ErrExpired)
	}

	// Files are not overwritten, but for certificates (renewal).
	_, err = command(t, "identity", id)
	require.ErrorIs(t, err, os.ErrExist)
	_, err = command(t, "root", "-private", filepath.Join(dir, "new.key"), "-public", r.rootPub)
	require.ErrorIs(t, err, os.ErrExist)
	_, err = os.Stat(filepath.Join(dir, "new.key"))
	require.ErrorIs(t, err, os.ErrNotExist, "a root's private key was left without its public key")
	got, err := readPrivateKey(id, nil)
	require.NoError(t, err)
	require.Equal(t, key, got)

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"identity"}, "want 1 arguments"},
		{[]string{"identity", "a", "b"}, "want 1 arguments"},
		{[]string{"pubkey"}, "want 1 arguments"},
		{[]string{"root", "-private", "x"}, "-private and -public are both required"},
		{[]string{"root", "-private", "x", "-public", "x"}, "name the same file"},
		{[]string{"cert", "-name", "a", "-key", pub, "-out", "x"}, "-root is required"},
		{[]string{"cert", "-root", r.rootKey, "-key", pub, "-out", "x"}, "-name is required"},
		{[]string{"cert", "-root", r.rootKey, "-name", "a", "-out", "x"}, "one of -key and -identity"},
		{[]string{"cert", "-root", r.rootKey, "-name", "a", "-key", pub, "-identity", id, "-out", "x"}, "one of -key and -identity"},
		{[]string{"cert", "-root", r.rootKey, "-name", "a", "-key", pub, "-valid", "-1h", "-out", "x"}, "-valid -1h0m0s: must be positive"},
		{[]string{"cert", "-root", r.rootKey, "-name", "a", "-key", pub}, "-out is required"},
		{[]string{"cert", "-root", r.rootPub, "-name", "a", "-key", "AAAA", "-out", "x"}, "-key: decodes to 3 bytes"},
		{[]string{"cert", "-root", filepath.Join(dir, "none"), "-name", "a", "-key", pub, "-out", "x"}, "-root: open"},
		{[]string{"cert", "-root", r.rootKey, "-name", strings.Repeat("n", 300), "-key", pub, "-out", "x"}, "certificate name of 300 bytes"},
		{[]string{"cert", "-bogus"}, "flag provided but not defined: -bogus"},
	} {
		_, err := command(t, tc.args...)
		require.ErrorIs(t, err, errUsage, "%q", tc.args)
		require.ErrorContains(t, err, tc.err, "%q", tc.args)
	}
	_, err = command(t, "cert", "-h")
	require.True(t, errors.Is(err, flag.ErrHelp))
}

// TestTrustedRootsAndCertificate: the files the commands make load into
// the configuration, which the library starts with; what cannot start
// is an error of the flag that is wrong.
func TestTrustedRootsAndCertificate(t *testing.T) {
	dir := t.TempDir()
	r1, r2, r3 := newRoot(t, dir, "r1"), newRoot(t, dir, "r2"), newRoot(t, dir, "r3")
	id := filepath.Join(dir, "a.id")
	cert := filepath.Join(dir, "a.cert")
	mustCommand(t, "identity", id)
	mustCommand(t, "cert", "-root", r2.rootKey, "-name", "a", "-identity", id, "-out", cert)

	o, cfg, err := configOf(t, "-name", "a", "-bind", "127.0.0.1", "-port", "0", "-profile", "local",
		"-identity", id, "-signatures", "required", "-trusted-root", r1.rootPub+","+r2.rootPub, "-trusted-root", r3.rootPub, "-cert", cert)
	require.NoError(t, err)
	require.Equal(t, listFlag{r1.rootPub, r2.rootPub, r3.rootPub}, o.roots)
	require.Equal(t, []ed25519.PublicKey{r1.root, r2.root, r3.root}, cfg.Claims.TrustedRoots)
	c, err := readCertificate(cert)
	require.NoError(t, err)
	require.Equal(t, c, cfg.Claims.Certificate)
	require.Equal(t, swim.SignaturesRequired, cfg.Claims.Signatures)

	ml, err := swim.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ml.Shutdown()) })
	require.Equal(t, swim.SignaturesRequired, ml.Signatures())
	require.Equal(t, cfg.Claims.Identity.Public(), ml.IdentityKey())

	otherID := filepath.Join(dir, "b.id")
	mustCommand(t, "identity", otherID)
	badRoot := filepath.Join(dir, "bad.pub")
	require.NoError(t, os.WriteFile(badRoot, []byte(base64.StdEncoding.EncodeToString(make([]byte, 31))), 0o644))
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-name", "b", "-identity", id, "-trusted-root", r2.rootPub, "-cert", cert},
			`-cert: certificate is for another name or key: "a"`},
		{[]string{"-name", "a", "-identity", otherID, "-trusted-root", r2.rootPub, "-cert", cert},
			`-cert: certificate is for another name or key: "a"`},
		{[]string{"-name", "a", "-identity", id, "-trusted-root", r1.rootPub, "-cert", cert},
			"-cert: certificate not signed by a trusted root"},
		{[]string{"-name", "a", "-identity", id, "-cert", cert},
			"-cert: Claims.Certificate is set without Claims.TrustedRoots"},
		{[]string{"-name", "a", "-trusted-root", r2.rootPub, "-cert", cert},
			"-cert needs -identity"},
		{[]string{"-name", "a", "-identity", id, "-trusted-root", r2.rootPub, "-signatures", "sign"},
			"-signatures sign with -trusted-root needs -cert"},
		{[]string{"-name", "a", "-identity", id, "-trusted-root", r2.rootPub, "-cert", r2.rootPub},
			"-cert: " + r2.rootPub + ": malformed certificate"},
		{[]string{"-trusted-root", badRoot}, "-trusted-root: " + badRoot + ": decodes to 31 bytes: want an Ed25519 public key"},
		{[]string{"-trusted-root", filepath.Join(dir, "none")}, "-trusted-root: open"},
		{[]string{"-trusted-root", r1.rootPub + ",,"}, "empty item"},
	} {
		_, _, err := configOf(t, tc.args...)
		require.ErrorIs(t, err, errUsage, "%q", tc.args)
		require.ErrorContains(t, err, tc.err, "%q", tc.args)
	}

	// An expired certificate: refused at start, under -cert.
	rootKey, err := readPrivateKey(r2.rootKey, nil)
	require.NoError(t, err)
	idKey, err := readPrivateKey(id, nil)
	require.NoError(t, err)
	old, err := certificate.New(rootKey, "a", idKey.Public().(ed25519.PublicKey), time.Now().Add(-time.Minute))
	require.NoError(t, err)
	expired := filepath.Join(dir, "expired.cert")
	require.NoError(t, os.WriteFile(expired, []byte(encodeKey(old)+"\n"), 0o644))
	_, _, err = configOf(t, "-name", "a", "-identity", id, "-trusted-root", r2.rootPub, "-cert", expired)
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "-cert: certificate expired at")
}

// TestSigningFieldsNameTheirFlags: a configuration error in a signing
// field is reported under its flag.
func TestSigningFieldsNameTheirFlags(t *testing.T) {
	for field, flagName := range map[string]string{
		"Claims.Identity": "identity", "Claims.Signatures": "signatures", "Claims.TrustedRoots[1]": "trusted-root", "Claims.Certificate": "cert",
	} {
		err := flagError(&swim.ConfigError{Field: field, Reason: "is wrong"})
		require.ErrorIs(t, err, errUsage, field)
		require.EqualError(t, err, "usage: -"+flagName+": "+field+" is wrong")
	}
	require.NoError(t, flagError(&swim.ConfigError{Field: "Events", Reason: "is wrong"}), "no flag sets Events")
	require.NoError(t, flagError(errors.New("other")))
}
