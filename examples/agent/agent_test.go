//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bounds of the waits on the agents (local profile over loopback): a
// healthy run needs a fraction of each.
const (
	waitLong  = 20 * time.Second
	pollEvery = 20 * time.Millisecond
)

// process is one agent process and the lines it printed.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when stdout is drained and the process reaped
	err  error         // from Wait, valid after done

	mu     sync.Mutex
	lines  []line
	stderr bytes.Buffer
}

// Write collects the agent's stderr.
func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

// logged counts the stderr lines that contain s.
func (p *process) logged(s string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Count(p.stderr.String(), s)
}

// keyrings returns the keyring lines the agent printed, in order.
func (p *process) keyrings() []line {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []line
	for _, l := range p.lines {
		if l.Ev == "keyring" {
			out = append(out, l)
		}
	}
	return out
}

// has reports whether the agent printed an event ev about node (any node
// when node is ""), in state (any when state is "").
func (p *process) has(ev, node, state string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.Ev == ev && (node == "" || l.Node == node) && (state == "" || l.State == state) {
			return true
		}
	}
	return false
}

func (p *process) ready() (string, bool) {
	l, ok := p.readyLine()
	return l.Addr, ok
}

// readyLine returns the agent's ready line, if it printed it.
func (p *process) readyLine() (line, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.Ev == "ready" {
			return l, true
		}
	}
	return line{}, false
}

// buildAgent compiles this command into a temporary directory.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// startAgent starts an agent and waits for its ready line; the test kills
// it at its end if it is still running.
func startAgent(t *testing.T, bin, name string, args ...string) (*process, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-name", name, "-port", "0", "-profile", "local"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = p
	require.NoError(t, cmd.Start())
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				// stdout must carry nothing but event lines.
				l = line{Ev: "garbage", Node: sc.Text()}
			}
			p.mu.Lock()
			p.lines = append(p.lines, l)
			p.mu.Unlock()
		}
		p.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	var addr string
	require.Eventually(t, func() bool {
		var ok bool
		addr, ok = p.ready()
		return ok
	}, waitLong, pollEvery, "%s printed no ready line", name)
	return p, addr
}

func TestAgentCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := buildAgent(t)
	start := time.Now()
	a, seed := startAgent(t, bin, "a")
	b, _ := startAgent(t, bin, "b", "-join", seed)
	c, _ := startAgent(t, bin, "c", "-join", seed)
	all := []*process{a, b, c}

	require.Eventually(t, func() bool {
		for _, p := range all {
			for _, q := range all {
				if p != q && !p.has("join", q.name, "") {
					return false
				}
			}
		}
		return true
	}, waitLong, pollEvery, "the agents did not all see each other join")
	t.Logf("cluster formed in %v", time.Since(start))

	// A crash: the others find out by themselves.
	require.NoError(t, c.cmd.Process.Kill())
	killed := time.Now()
	require.Eventually(t, func() bool {
		return a.has("leave", "c", "dead") && b.has("leave", "c", "dead")
	}, waitLong, pollEvery, "the survivors did not report c as dead")
	t.Logf("crash detected in %v", time.Since(killed))

	// A graceful leave: b says goodbye and keeps running.
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGUSR1))
	require.Eventually(t, func() bool {
		return b.has("left", "b", "") && a.has("leave", "b", "left")
	}, waitLong, pollEvery, "b did not leave gracefully")
	select {
	case <-b.done:
		t.Fatal("b exited on SIGUSR1")
	default:
	}

	// SIGTERM shuts down cleanly: exit status 0.
	for _, p := range []*process{a, b} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range []*process{a, b} {
		select {
		case <-p.done:
			require.NoError(t, p.err, "%s exit status", p.name)
		case <-time.After(waitLong):
			t.Fatalf("%s did not exit on SIGTERM", p.name)
		}
		require.False(t, p.has("garbage", "", ""), "stdout of %s holds a non-JSON line", p.name)
	}
}

// TestAgentKeyfileReload rotates the primary key of a running agent by
// editing its key file and sending SIGHUP, checking each step in the
// keyring lines (ListKeys and Plaintext of the running member); a bad file
// changes nothing. A second agent given the same key with -key and the same
// label joins it.
func TestAgentKeyfileReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := buildAgent(t)
	keyA, b64A := testKey(16, 'A')
	keyB, b64B := testKey(32, 'B')
	fpA, fpB := fingerprint(keyA), fingerprint(keyB)
	path := filepath.Join(t.TempDir(), "keys")

	// Flags that cannot work stop the agent at once, naming the flag.
	out, err := exec.Command(bin, "-port", "0", "-key", b64A+",AAAA").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "-key: key 2: decodes to 3 bytes")
	require.NotContains(t, string(out), b64A, "the error quotes a key")
	out, err = exec.Command(bin, "-port", "0", "-allow", "10.1.2.0/99").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), `-allow: "10.1.2.0/99" is not a network in CIDR notation`)

	writeKeyFile(t, path, "# the primary first", b64A)
	a, seed := startAgent(t, bin, "a", "-keyfile", path, "-label", "test", "-allow", "127.0.0.0/8")
	b, _ := startAgent(t, bin, "b", "-key", b64A, "-label", "test", "-allow", "127.0.0.1", "-join", seed)

	// waitKeyring waits for a's n-th keyring line and checks it.
	waitKeyring := func(n int, keys []string, mode string) {
		t.Helper()
		require.Eventually(t, func() bool { return len(a.keyrings()) >= n }, waitLong, pollEvery,
			"a printed %d keyring lines, want %d", len(a.keyrings()), n)
		got := a.keyrings()
		require.Len(t, got, n, "a printed more keyring lines than reloads")
		require.Equal(t, keys, got[n-1].Keys, "keyring line %d", n)
		require.Equal(t, mode, got[n-1].Plaintext, "keyring line %d", n)
	}
	reload := func(lines ...string) {
		t.Helper()
		writeKeyFile(t, path, lines...)
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGHUP))
	}
	waitKeyring(1, []string{fpA}, "refuse")
	require.Eventually(t, func() bool { return a.has("join", "b", "") && b.has("join", "a", "") }, waitLong, pollEvery,
		"agents with the same key and label did not see each other join")

	reload(b64A, b64B) // install B
	waitKeyring(2, []string{fpA, fpB}, "refuse")
	reload(b64B, b64A) // use B
	waitKeyring(3, []string{fpB, fpA}, "refuse")

	// A bad file is logged and changes nothing.
	reload(b64B, b64A[:4]+"*"+b64A[5:])
	require.Eventually(t, func() bool { return a.logged("key file not applied") == 1 }, waitLong, pollEvery,
		"a did not log the bad key file")
	require.Equal(t, 1, a.logged("line 2: not base64"), "the log does not say what is wrong")
	require.Len(t, a.keyrings(), 3, "a bad file changed the keyring")

	reload(b64B, "plaintext accept") // remove A, and a mode change
	waitKeyring(4, []string{fpB}, "accept")
	require.Equal(t, 3, a.logged("keyring changed"), "one log line per reload that applied")

	// Without -keyfile, SIGHUP is logged and the agent runs on.
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return b.logged("no -keyfile to re-read") == 1 }, waitLong, pollEvery)
	require.Empty(t, b.keyrings()[1:], "b printed a keyring line after a SIGHUP without -keyfile")

	for _, p := range []*process{a, b} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range []*process{a, b} {
		select {
		case <-p.done:
			require.NoError(t, p.err, "%s exit status", p.name)
		case <-time.After(waitLong):
			t.Fatalf("%s did not exit on SIGTERM", p.name)
		}
		require.False(t, p.has("garbage", "", ""), "stdout of %s holds a non-JSON line", p.name)
	}
}

// TestAgentExitStatus: a bad command line exits with status 2 and says
// what is wrong, -h with 0, a failure to start with 1.
func TestAgentExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := buildAgent(t)
	status := func(args ...string) (int, string) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil {
			return 0, string(out)
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		return ee.ExitCode(), string(out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-profile", "local", "-pause-tolerance", "1ms"}, "-pause-tolerance: PauseTolerance (1ms) must be at least ProbeInterval"},
		{[]string{"-indirect-checks", "-2"}, "-indirect-checks -2: must be at least 1"},
		{[]string{"-http", "nowhere"}, `-http "nowhere": want host:port`},
	} {
		code, out := status(append([]string{"-port", "0"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, out)
		require.Contains(t, out, tc.want)
	}
	code, out := status("-h")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "-pause-tolerance")

	// A port taken by another agent: the command line is fine, the start
	// fails.
	_, addr := startAgent(t, bin, "a")
	code, out = status("-name", "b", "-port", addr[strings.LastIndexByte(addr, ':')+1:])
	require.Equal(t, 1, code, out)
}

// TestAgentHealthEndpoint: /health answers 200 while the member runs and
// 503 once it has left; /members lists the peer with its round trip.
func TestAgentHealthEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := buildAgent(t)
	a, seed := startAgent(t, bin, "a", "-http", "127.0.0.1:0")
	startAgent(t, bin, "b", "-join", seed, "-meta", "zone=x")
	var web string
	require.Eventually(t, func() bool {
		var ok bool
		web, ok = a.httpAddr()
		return ok
	}, waitLong, pollEvery)
	fetch := func(path string, v any) int {
		res, err := http.Get("http://" + web + path)
		require.NoError(t, err)
		defer res.Body.Close()
		require.NoError(t, json.NewDecoder(res.Body).Decode(v))
		return res.StatusCode
	}
	var hb healthBody
	require.Equal(t, http.StatusOK, fetch("/health", &hb))
	require.Equal(t, "ok", hb.Status)
	require.Eventually(t, func() bool {
		var v membersView
		fetch("/members", &v)
		for _, m := range v.Members {
			if m.Name == "b" && m.State == "alive" && m.RTTMillis != nil && m.Labels["zone"] == "x" {
				return true
			}
		}
		return false
	}, waitLong, pollEvery, "/members does not show b alive with a round trip and its metadata")

	// /metrics: the Prometheus text of the member (swimprom), with the
	// table's gauge counting both members alive.
	res, err := http.Get("http://" + web + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), `swim_members{state="alive"} 2`)
	require.Contains(t, string(body), "swim_packets_sent_total ")
	require.Contains(t, string(body), "go_goroutines ")

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGUSR1))
	require.Eventually(t, func() bool { return a.has("left", "a", "") }, waitLong, pollEvery)
	require.Equal(t, http.StatusServiceUnavailable, fetch("/health", &hb))
	require.Equal(t, "left", hb.Status)
}

// TestAgentLeaveOnTerm: with -leave-on-term, SIGTERM makes the member
// leave gracefully before it exits, so its peers report it left, not dead.
func TestAgentLeaveOnTerm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := buildAgent(t)
	a, seed := startAgent(t, bin, "a", "-leave-on-term")
	b, _ := startAgent(t, bin, "b", "-join", seed)
	require.Eventually(t, func() bool { return a.has("join", "b", "") && b.has("join", "a", "") }, waitLong, pollEvery)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-a.done:
		require.NoError(t, a.err, "exit status")
	case <-time.After(waitLong):
		t.Fatal("a did not exit on SIGTERM")
	}
	require.True(t, a.has("left", "a", ""), "a printed no left line")
	require.Eventually(t, func() bool { return b.has("leave", "a", "left") }, waitLong, pollEvery, "b did not see a leave gracefully")
	require.False(t, b.has("leave", "a", "dead"))
}

// TestAgentSignedCluster: the operator commands make a root, identities
// and certificates; two agents started with them and -signatures required
// join each other, and print their identity and mode; an agent certified
// by another root is refused by both; a certificate for another name stops
// an agent at start with status 2.
func TestAgentSignedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := buildAgent(t)
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	agent := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "agent %q: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	agent("root", "-private", file("root.key"), "-public", file("root.pub"))
	agent("root", "-private", file("other.key"), "-public", file("other.pub"))
	keys := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		keys[n] = agent("identity", file(n+".id"))
		require.Equal(t, keys[n], agent("pubkey", file(n+".id")))
	}
	agent("cert", "-root", file("root.key"), "-name", "a", "-identity", file("a.id"), "-out", file("a.cert"))
	agent("cert", "-root", file("root.key"), "-name", "b", "-key", keys["b"], "-out", file("b.cert"))
	agent("cert", "-root", file("other.key"), "-name", "c", "-identity", file("c.id"), "-out", file("c.cert"), "-valid", "1h")
	signed := func(name, root string) []string {
		return []string{"-identity", file(name + ".id"), "-signatures", "required",
			"-trusted-root", file(root + ".pub"), "-cert", file(name + ".cert")}
	}

	a, seed := startAgent(t, bin, "a", append(signed("a", "root"), "-http", "127.0.0.1:0")...)
	b, _ := startAgent(t, bin, "b", append(signed("b", "root"), "-join", seed)...)
	for _, p := range []*process{a, b} {
		l, _ := p.readyLine()
		require.Equal(t, keys[p.name], l.Identity, "%s: the ready line's identity", p.name)
		require.Equal(t, "required", l.Signatures, p.name)
	}
	require.Eventually(t, func() bool { return a.has("join", "b", "") && b.has("join", "a", "") }, waitLong, pollEvery,
		"agents certified by the same root did not see each other join")

	var web string
	require.Eventually(t, func() bool {
		var ok bool
		web, ok = a.httpAddr()
		return ok
	}, waitLong, pollEvery)
	res, err := http.Get("http://" + web + "/members")
	require.NoError(t, err)
	var mv membersView
	require.NoError(t, json.NewDecoder(res.Body).Decode(&mv))
	res.Body.Close()
	require.Equal(t, "required", mv.Signatures)
	require.Equal(t, keys["a"], mv.Identity)

	// metric reads one counter of a's /metrics.
	metric := func(name string) string {
		res, err := http.Get("http://" + web + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		for l := range strings.SplitSeq(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				return v
			}
		}
		return ""
	}
	require.NotContains(t, []string{"", "0"}, metric("swim_signatures_verified_total"), "a verified no signature")

	// c holds a certificate of a root a and b do not trust: its claims
	// are refused, and it never joins.
	c, _ := startAgent(t, bin, "c", append(signed("c", "other"), "-join", seed)...)
	require.Eventually(t, func() bool {
		v := metric("swim_certificates_refused_total")
		return v != "" && v != "0"
	}, waitLong, pollEvery, "a refused no certificate")
	require.False(t, a.has("join", "c", ""), "a took c, certified by a root it does not trust")

	// A certificate for another name: status 2, naming the flag.
	out, err := exec.Command(bin, append([]string{"-name", "d", "-port", "0"}, signed("a", "root")...)...).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 2, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), `-cert: certificate is for another name or key: "a"`)

	for _, p := range []*process{a, b, c} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range []*process{a, b, c} {
		select {
		case <-p.done:
			require.NoError(t, p.err, "%s exit status", p.name)
		case <-time.After(waitLong):
			t.Fatalf("%s did not exit on SIGTERM", p.name)
		}
		require.False(t, p.has("garbage", "", ""), "stdout of %s holds a non-JSON line", p.name)
	}
}
