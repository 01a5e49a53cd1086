package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/swim-go/swim"
)

// testKey returns a key of n bytes, all b, and its base64.
func testKey(n int, b byte) ([]byte, string) {
	k := bytes.Repeat([]byte{b}, n)
	return k, base64.StdEncoding.EncodeToString(k)
}

func TestDecodeKey(t *testing.T) {
	k16, b16 := testKey(16, 1)
	k24, b24 := testKey(24, 2)
	k32, b32 := testKey(32, 3)
	raw16 := strings.TrimRight(b16, "=")
	_, b20 := testKey(20, 4)
	for _, tc := range []struct {
		name, in string
		want     []byte
		err      string
	}{
		{"AES-128", b16, k16, ""},
		{"AES-192", b24, k24, ""},
		{"AES-256", b32, k32, ""},
		{"no padding", raw16, k16, ""},
		{"20 bytes", b20, nil, "decodes to 20 bytes: an AES key is 16, 24 or 32"},
		{"not base64", "not*base64*at*all*!!", nil, "not base64"},
		{"URL alphabet", "-_-_-_-_-_-_-_-_-_-_-w", nil, "not base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeKey(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseKeys(t *testing.T) {
	k1, b1 := testKey(16, 1)
	k2, b2 := testKey(32, 2)
	got, err := parseKeys(b1 + ", " + b2)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{k1, k2}, got, "in order, the primary first")

	for _, tc := range []struct{ in, err string }{
		{b1 + ",," + b2, "key 2 is empty"},
		{b1 + ",", "key 2 is empty"},
		{"", "key 1 is empty"},
		{b1 + "," + b2 + "," + b1, "key 3 repeats key 1"},
		{b1 + ",AAAA", "key 2: decodes to 3 bytes"},
	} {
		_, err := parseKeys(tc.in)
		require.ErrorContains(t, err, tc.err, "%q", tc.in)
		assert.NotContains(t, err.Error(), b1, "an error must not quote a key")
	}
}

func TestParseAllow(t *testing.T) {
	got, err := parseAllow("10.0.0.0/8, 192.168.1.7/24,fd00::/8,127.0.0.1,::1")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.168.1.0/24"), // masked
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("::1/128"),
	}, got)

	for _, tc := range []struct{ in, err string }{
		{"10.0.0.0/33", `"10.0.0.0/33" is not a network in CIDR notation`},
		{"10.0.0/8", `"10.0.0/8" is not a network in CIDR notation`},
		{"example.com", `"example.com" is neither a network`},
		{"fe80::1%eth0", `"fe80::1%eth0" is neither a network`},
		{"10.0.0.0/8,", "empty item"},
		{",", "empty item"},
	} {
		_, err := parseAllow(tc.in)
		require.ErrorContains(t, err, tc.err, "%q", tc.in)
	}
}

func TestParseKeyFile(t *testing.T) {
	k1, b1 := testKey(16, 1)
	k2, b2 := testKey(32, 2)
	t.Run("keys, comments, mode", func(t *testing.T) {
		kf, err := parseKeyFile([]byte("# cluster keys\n\n  " + b1 + "  \r\n\t# old one\n" + b2 + "\nplaintext accept\n"))
		require.NoError(t, err)
		assert.Equal(t, [][]byte{k1, k2}, kf.keys)
		assert.Equal(t, swim.PlaintextAccept, kf.plaintext)
	})
	t.Run("no mode line is refuse", func(t *testing.T) {
		kf, err := parseKeyFile([]byte(b1))
		require.NoError(t, err)
		assert.Equal(t, [][]byte{k1}, kf.keys)
		assert.Equal(t, swim.PlaintextRefuse, kf.plaintext)
	})
	t.Run("no key", func(t *testing.T) {
		kf, err := parseKeyFile([]byte("# no key yet\nplaintext refuse\n"))
		require.NoError(t, err)
		assert.Empty(t, kf.keys)
	})
	for _, tc := range []struct{ name, in, err string }{
		{"bad base64", "# c\n" + b1 + "\n" + b1[:5] + "*" + b1[6:] + "\n", "line 3: not base64"},
		{"bad length", "\n" + base64.StdEncoding.EncodeToString(make([]byte, 15)), "line 2: decodes to 15 bytes"},
		{"repeat", b1 + "\n" + b2 + "\n" + b1, "line 3: the key of line 1 again"},
		{"two words", b1 + " " + b2, "line 1: want one base64 key"},
		{"bad mode", b1 + "\nplaintext maybe", "line 2: swim: invalid config: plaintext mode \"maybe\""},
		{"mode without a value", b1 + "\nplaintext", "line 2: want \"plaintext refuse\""},
		{"two modes", b1 + "\nplaintext send\nplaintext accept", "line 3: a second plaintext line (the first is line 2)"},
		{"migration mode without a key", "plaintext send\n", "line 1: plaintext send without a key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseKeyFile([]byte(tc.in))
			require.ErrorContains(t, err, tc.err)
			assert.NotContains(t, err.Error(), b1, "an error must not quote a key")
		})
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	k1, b1 := testKey(16, 1)
	private := filepath.Join(dir, "private")
	require.NoError(t, os.WriteFile(private, []byte(b1+"\n"), 0o600))
	var warnings []string
	warn := func(msg string) { warnings = append(warnings, msg) }
	kf, err := readKeyFile(private, warn)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{k1}, kf.keys)
	assert.Empty(t, warnings)

	open := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(open, []byte(b1+"\n"), 0o644))
	require.NoError(t, os.Chmod(open, 0o644)) // whatever the umask
	_, err = readKeyFile(open, warn)
	require.NoError(t, err, "a readable file is used, with a warning")
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "readable by others")

	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("#\n"), maxKeyFileSize), 0o600))
	_, err = readKeyFile(big, warn)
	require.ErrorContains(t, err, "over 65536 bytes")

	_, err = readKeyFile(dir, warn)
	require.ErrorContains(t, err, "not a regular file")
	_, err = readKeyFile(filepath.Join(dir, "missing"), warn)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseFlagsSecurity(t *testing.T) {
	k1, b1 := testKey(16, 1)
	o, err := parseFlags([]string{"-key", b1, "-plaintext", "accept", "-label", "prod", "-allow", "10.0.0.0/8"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{k1}, o.keys)
	assert.Equal(t, swim.PlaintextAccept, o.plaintext)
	assert.Equal(t, "prod", o.label)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, o.allow)

	o, err = parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Empty(t, o.keys)
	assert.Empty(t, o.allow)
	assert.Equal(t, swim.PlaintextRefuse, o.plaintext)

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-key", "AAAA"}, "-key: key 1: decodes to 3 bytes"},
		{[]string{"-key", ""}, "-key: key 1 is empty"},
		{[]string{"-allow", "10.0.0.0/40"}, "-allow: \"10.0.0.0/40\" is not a network"},
		{[]string{"-allow", ""}, "-allow: empty item"},
		{[]string{"-key", b1, "-plaintext", "sometimes"}, "-plaintext: swim: invalid config: plaintext mode \"sometimes\""},
		{[]string{"-plaintext", "send"}, "-plaintext send needs -key"},
		{[]string{"-keyfile", "f", "-key", b1}, "-key and -keyfile exclude each other"},
		{[]string{"-keyfile", "f", "-plaintext", "refuse"}, "-plaintext and -keyfile exclude each other"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		require.ErrorContains(t, err, tc.err, "%q", tc.args)
	}
}

func TestPlanKeyChange(t *testing.T) {
	a, _ := testKey(16, 'a')
	b, _ := testKey(16, 'b')
	c, _ := testKey(32, 'c')
	keys := func(ks ...[]byte) [][]byte { return ks }
	for _, tc := range []struct {
		name    string
		cur     [][]byte
		mode    swim.PlaintextMode
		file    keyFile
		want    keyChange // warnings compared by count
		warns   int
		errText string
	}{
		{name: "no change", cur: keys(a, b), file: keyFile{keys: keys(a, b)},
			want: keyChange{}},
		{name: "order of the others does not matter", cur: keys(a, b, c), file: keyFile{keys: keys(a, c, b)},
			want: keyChange{}},
		{name: "install", cur: keys(a), file: keyFile{keys: keys(a, b)},
			want: keyChange{install: keys(b)}},
		{name: "use", cur: keys(a, b), file: keyFile{keys: keys(b, a)},
			want: keyChange{primary: b}},
		{name: "remove", cur: keys(b, a), file: keyFile{keys: keys(b)},
			want: keyChange{remove: keys(a)}},
		{name: "all at once warns twice", cur: keys(a), file: keyFile{keys: keys(b)},
			want: keyChange{install: keys(b), primary: b, remove: keys(a)}, warns: 2},
		{name: "mode only", cur: keys(a), mode: swim.PlaintextAccept, file: keyFile{keys: keys(a)},
			want: keyChange{fromMode: swim.PlaintextAccept}},
		{name: "first key with send", file: keyFile{keys: keys(a), plaintext: swim.PlaintextSend},
			want: keyChange{first: true, install: keys(a), primary: a, toMode: swim.PlaintextSend}},
		{name: "no key stays no key", file: keyFile{}, want: keyChange{}},
		{name: "first key without send", file: keyFile{keys: keys(a), plaintext: swim.PlaintextAccept},
			errText: "its first key needs \"plaintext send\""},
		{name: "last key", cur: keys(a), file: keyFile{},
			errText: "cannot drop its last key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planKeyChange(tc.cur, tc.mode, tc.file)
			if tc.errText != "" {
				require.ErrorIs(t, err, errKeyChange)
				require.ErrorContains(t, err, tc.errText)
				return
			}
			require.NoError(t, err)
			assert.Len(t, got.warnings, tc.warns)
			got.warnings = nil
			assert.Equal(t, tc.want, got)
			assert.Equal(t, got.install == nil && got.primary == nil && got.remove == nil && got.fromMode == got.toMode, got.empty())
		})
	}
}

// newMember starts a lone member on 127.0.0.1 with the given keys and
// plaintext mode; the test shuts it down.
func newMember(t *testing.T, keys [][]byte, mode swim.PlaintextMode) *swim.Memberlist {
	t.Helper()
	cfg := swim.DefaultLocalConfig()
	cfg.Name = t.Name()
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Security.Keys, cfg.Security.Plaintext = keys, mode
	ml, err := swim.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ml.Shutdown()) })
	return ml
}

// writeKeyFile writes lines to path, mode 0600.
func writeKeyFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
}

// TestReloadKeysRotation drives reloadKeys on a real Memberlist through
// the rotation of the primary key, the plaintext migration, and files
// that must change nothing.
func TestReloadKeysRotation(t *testing.T) {
	a, ba := testKey(16, 'a')
	b, bb := testKey(32, 'b')
	path := filepath.Join(t.TempDir(), "keys")
	core, logs := observer.New(zap.InfoLevel)
	logger := zap.New(core)
	ml := newMember(t, [][]byte{a}, swim.PlaintextRefuse)

	state := func() ([][]byte, swim.PlaintextMode) { return ml.ListKeys(), ml.Plaintext() }
	step := func(wantKeys [][]byte, wantMode swim.PlaintextMode, lines ...string) {
		t.Helper()
		writeKeyFile(t, path, lines...)
		require.NoError(t, reloadKeys(ml, path, logger))
		keys, mode := state()
		require.Equal(t, wantKeys, keys)
		require.Equal(t, wantMode, mode)
	}

	// Rotation: install b, use b, remove a.
	step([][]byte{a, b}, swim.PlaintextRefuse, ba, bb)
	require.Equal(t, []any{fingerprint(b)}, logs.FilterMessage("keyring changed").All()[0].ContextMap()["installed"])
	step([][]byte{b, a}, swim.PlaintextRefuse, bb, ba)
	step([][]byte{b}, swim.PlaintextRefuse, "# rotated", bb)
	require.Equal(t, 3, logs.FilterMessage("keyring changed").Len())
	require.Zero(t, logs.FilterLevelExact(zap.WarnLevel).Len(), "rotation in three steps draws no warning")

	// The same file again: nothing to do.
	step([][]byte{b}, swim.PlaintextRefuse, bb)
	require.Equal(t, 1, logs.FilterMessage("key file re-read: no change").Len())

	// Files that change nothing.
	for _, bad := range [][]string{
		{bb, "AAAA"},                // bad length
		{bb, "plaintext sometimes"}, // bad mode
		{"# no key"},                // would drop the last key
		{bb + "!"},                  // bad base64
	} {
		writeKeyFile(t, path, bad...)
		require.Error(t, reloadKeys(ml, path, logger), "%q", bad)
		keys, mode := state()
		require.Equal(t, [][]byte{b}, keys, "%q changed the keys", bad)
		require.Equal(t, swim.PlaintextRefuse, mode)
	}
	require.Error(t, reloadKeys(ml, filepath.Join(t.TempDir(), "missing"), logger))
	keys, _ := state()
	require.Equal(t, [][]byte{b}, keys)

	// All three steps in one reload: applied in the order that works
	// (RemoveKey refuses the primary until UseKey moved it), with a
	// warning for each step that cuts this member off until the others
	// took it too.
	warned := logs.FilterLevelExact(zap.WarnLevel).Len()
	step([][]byte{a}, swim.PlaintextRefuse, ba)
	require.Equal(t, warned+2, logs.FilterLevelExact(zap.WarnLevel).Len())
}

// TestReloadKeysMigration moves a member without keys to encryption by
// reloads: first key with plaintext send, then accept, then refuse.
func TestReloadKeysMigration(t *testing.T) {
	a, ba := testKey(24, 'a')
	path := filepath.Join(t.TempDir(), "keys")
	logger := zap.NewNop()
	ml := newMember(t, nil, swim.PlaintextRefuse)

	writeKeyFile(t, path, ba, "plaintext accept")
	require.ErrorContains(t, reloadKeys(ml, path, logger), "plaintext send")
	require.Empty(t, ml.ListKeys(), "a refused first key installs nothing")
	require.Equal(t, swim.PlaintextRefuse, ml.Plaintext())

	for _, mode := range []swim.PlaintextMode{swim.PlaintextSend, swim.PlaintextAccept, swim.PlaintextRefuse} {
		writeKeyFile(t, path, ba, "plaintext "+mode.String())
		require.NoError(t, reloadKeys(ml, path, logger))
		require.Equal(t, [][]byte{a}, ml.ListKeys())
		require.Equal(t, mode, ml.Plaintext())
	}
}
