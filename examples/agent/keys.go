package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/swim-go/swim"
)

// maxKeyFileSize bounds what a key file may hold: far more than any
// keyring needs, and it keeps a wrong path (a log, a device) from being
// read whole.
const maxKeyFileSize = 64 << 10

// decodeKey decodes one base64 key (standard alphabet, padding optional)
// and checks that it is an AES key. Errors never quote the key.
func decodeKey(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if !strings.HasSuffix(s, "=") {
		enc = base64.RawStdEncoding
	}
	k, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64 (standard alphabet): %w", err)
	}
	switch len(k) {
	case 16, 24, 32:
		return k, nil
	}
	return nil, fmt.Errorf("decodes to %d bytes: an AES key is 16, 24 or 32 bytes (AES-128, -192, -256)", len(k))
}

// parseKeys parses the -key flag: base64 keys separated by commas, the
// primary first.
func parseKeys(list string) ([][]byte, error) {
	var keys [][]byte
	for i, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			// "-key $A,$B" with $B unset: say so rather than run with
			// fewer keys than meant.
			return nil, fmt.Errorf("key %d is empty", i+1)
		}
		k, err := decodeKey(f)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		if j := slices.IndexFunc(keys, func(o []byte) bool { return bytes.Equal(o, k) }); j >= 0 {
			return nil, fmt.Errorf("key %d repeats key %d", i+1, j+1)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// parseAllow parses the -allow flag: networks in CIDR notation, or single
// addresses, separated by commas.
func parseAllow(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			// An empty item is a typo or an unset variable; skipping it
			// could leave the list empty, which allows every source.
			return nil, fmt.Errorf("empty item in %q", list)
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a network in CIDR notation (10.0.0.0/8, fd00::/8): %w", f, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is neither a network in CIDR notation (10.0.0.0/8, fd00::/8) nor an IP address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// keyFile is what a key file says: the keys, primary first, and the
// plaintext mode (refuse when the file has no plaintext line).
type keyFile struct {
	keys      [][]byte
	plaintext swim.PlaintextMode
}

// readKeyFile reads and parses the key file at path (see the command's
// doc). warn receives a complaint about the file's permissions, which does
// not stop it from being used.
func readKeyFile(path string, warn func(msg string)) (keyFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return keyFile{}, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return keyFile{}, fmt.Errorf("key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return keyFile{}, fmt.Errorf("key file %s: not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && warn != nil {
		warn(fmt.Sprintf("key file %s is readable by others (mode %v): chmod 600 it", path, perm))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return keyFile{}, fmt.Errorf("key file: %w", err)
	}
	if len(b) > maxKeyFileSize {
		return keyFile{}, fmt.Errorf("key file %s: over %d bytes", path, maxKeyFileSize)
	}
	kf, err := parseKeyFile(b)
	if err != nil {
		return keyFile{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return kf, nil
}

// parseKeyFile parses the text of a key file. Errors give the line number
// and never the line itself, which may hold a key.
func parseKeyFile(b []byte) (keyFile, error) {
	var kf keyFile
	keyLine := make([]int, 0, 4) // the line of each key, for repeats
	modeLine := 0
	for i, raw := range strings.Split(string(b), "\n") {
		n := i + 1
		s := strings.TrimSpace(raw)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		fields := strings.Fields(s)
		if fields[0] == "plaintext" {
			if len(fields) != 2 {
				return keyFile{}, fmt.Errorf("line %d: want \"plaintext refuse\", \"plaintext accept\" or \"plaintext send\"", n)
			}
			if modeLine != 0 {
				return keyFile{}, fmt.Errorf("line %d: a second plaintext line (the first is line %d)", n, modeLine)
			}
			mode, err := swim.ParsePlaintextMode(fields[1])
			if err != nil {
				return keyFile{}, fmt.Errorf("line %d: %w", n, err)
			}
			kf.plaintext, modeLine = mode, n
			continue
		}
		if len(fields) != 1 {
			return keyFile{}, fmt.Errorf("line %d: want one base64 key, or \"plaintext MODE\"", n)
		}
		k, err := decodeKey(s)
		if err != nil {
			return keyFile{}, fmt.Errorf("line %d: %w", n, err)
		}
		if j := slices.IndexFunc(kf.keys, func(o []byte) bool { return bytes.Equal(o, k) }); j >= 0 {
			return keyFile{}, fmt.Errorf("line %d: the key of line %d again", n, keyLine[j])
		}
		kf.keys = append(kf.keys, k)
		keyLine = append(keyLine, n)
	}
	if len(kf.keys) == 0 && kf.plaintext != swim.PlaintextRefuse {
		return keyFile{}, fmt.Errorf("line %d: plaintext %s without a key: there is nothing to migrate to", modeLine, kf.plaintext)
	}
	return kf, nil
}

// fingerprint names a key in logs and keyring lines without revealing it:
// the first 8 bytes of its SHA-256, in hex.
func fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

func fingerprints(keys [][]byte) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fingerprint(k)
	}
	return out
}

// keyring is the part of *swim.Memberlist that a reload drives.
type keyring interface {
	InstallKey(key []byte) error
	UseKey(key []byte) error
	RemoveKey(key []byte) error
	ListKeys() [][]byte
	SetPlaintext(mode swim.PlaintextMode) error
	Plaintext() swim.PlaintextMode
}

var _ keyring = (*swim.Memberlist)(nil)

// keyChange is the difference between a member's keyring and a key file,
// as the steps that apply it.
type keyChange struct {
	first    bool     // the member has no key yet: PlaintextSend before the first install
	install  [][]byte // keys the member does not hold, in file order
	primary  []byte   // the new primary; nil when it stays
	remove   [][]byte // keys the file no longer lists
	fromMode swim.PlaintextMode
	toMode   swim.PlaintextMode
	// warnings are steps that are allowed but break traffic between
	// members until every one of them took the same step.
	warnings []string
}

func (c *keyChange) empty() bool {
	return len(c.install) == 0 && c.primary == nil && len(c.remove) == 0 && c.fromMode == c.toMode
}

// errKeyChange: a key file that parses but that the running member cannot
// move to.
var errKeyChange = errors.New("cannot apply the key file")

// planKeyChange works out the steps from the keyring cur (primary first)
// and mode to kf, or why there are none; it changes nothing.
func planKeyChange(cur [][]byte, mode swim.PlaintextMode, kf keyFile) (keyChange, error) {
	c := keyChange{fromMode: mode, toMode: kf.plaintext}
	if len(kf.keys) == 0 {
		if len(cur) > 0 {
			// RemoveKey never removes the primary: a member that holds
			// keys keeps at least one until it restarts.
			return keyChange{}, fmt.Errorf("%w: it lists no key, and a running member cannot drop its last key:"+
				" set every member to plaintext send, then restart them without keys", errKeyChange)
		}
		// parseKeyFile allows no other mode without a key.
		return c, nil
	}
	if len(cur) == 0 {
		if kf.plaintext != swim.PlaintextSend {
			return keyChange{}, fmt.Errorf("%w: this member runs without a key, and its first key needs \"plaintext send\""+
				" (then accept, then refuse, each on every member: see docs/security.md)", errKeyChange)
		}
		c.first = true
	}
	held := func(keys [][]byte, k []byte) bool {
		return slices.ContainsFunc(keys, func(o []byte) bool { return bytes.Equal(o, k) })
	}
	for _, k := range kf.keys {
		if !held(cur, k) {
			c.install = append(c.install, k)
		}
	}
	if len(cur) == 0 || !bytes.Equal(cur[0], kf.keys[0]) {
		c.primary = kf.keys[0]
		if len(cur) > 0 && !held(cur, kf.keys[0]) {
			c.warnings = append(c.warnings, "the new primary key was installed by this same reload:"+
				" members that do not hold it yet cannot open what this member sends (install a key on every member before making it primary)")
		}
	}
	for _, k := range cur {
		if !held(kf.keys, k) {
			c.remove = append(c.remove, k)
		}
	}
	if len(cur) > 0 && !held(kf.keys, cur[0]) {
		c.warnings = append(c.warnings, "the former primary key was removed by this same reload:"+
			" what members still sending under it send is refused (make the new key primary on every member before removing the old one)")
	}
	return c, nil
}

// apply carries out the steps in their safe order: install, use, remove,
// then the plaintext mode (first of all for a member's first key, which
// InstallKey requires). It stops at the first error.
func (c *keyChange) apply(kr keyring) error {
	if c.first {
		if err := kr.SetPlaintext(swim.PlaintextSend); err != nil {
			return fmt.Errorf("set plaintext send: %w", err)
		}
	}
	for _, k := range c.install {
		if err := kr.InstallKey(k); err != nil {
			return fmt.Errorf("install key %s: %w", fingerprint(k), err)
		}
	}
	if c.primary != nil {
		if err := kr.UseKey(c.primary); err != nil {
			return fmt.Errorf("use key %s: %w", fingerprint(c.primary), err)
		}
	}
	for _, k := range c.remove {
		if err := kr.RemoveKey(k); err != nil {
			return fmt.Errorf("remove key %s: %w", fingerprint(k), err)
		}
	}
	if kr.Plaintext() != c.toMode {
		if err := kr.SetPlaintext(c.toMode); err != nil {
			return fmt.Errorf("set plaintext %s: %w", c.toMode, err)
		}
	}
	return nil
}

// reloadKeys re-reads the key file at path and applies the difference to
// kr, logging what changed. A file that cannot be read or parsed, or that
// asks for a change the member cannot make, changes nothing.
func reloadKeys(kr keyring, path string, logger *zap.Logger) error {
	kf, err := readKeyFile(path, func(msg string) { logger.Warn(msg) })
	if err != nil {
		return err
	}
	c, err := planKeyChange(kr.ListKeys(), kr.Plaintext(), kf)
	if err != nil {
		return fmt.Errorf("key file %s: %w", path, err)
	}
	if c.empty() {
		logger.Info("key file re-read: no change", zap.String("path", path))
		return nil
	}
	for _, w := range c.warnings {
		logger.Warn(w, zap.String("path", path))
	}
	if err := c.apply(kr); err != nil {
		// The steps were checked against the keyring just read, so only
		// another change made meanwhile (none in this command) gets here.
		return fmt.Errorf("key file %s: applied in part, keys now %v, plaintext %s: %w",
			path, fingerprints(kr.ListKeys()), kr.Plaintext(), err)
	}
	fields := []zap.Field{zap.String("path", path)}
	if len(c.install) > 0 {
		fields = append(fields, zap.Strings("installed", fingerprints(c.install)))
	}
	if c.primary != nil {
		fields = append(fields, zap.String("primary", fingerprint(c.primary)))
	}
	if len(c.remove) > 0 {
		fields = append(fields, zap.Strings("removed", fingerprints(c.remove)))
	}
	if c.fromMode != c.toMode {
		fields = append(fields, zap.String("plaintext", c.fromMode.String()+" -> "+c.toMode.String()))
	}
	logger.Info("keyring changed", fields...)
	return nil
}
