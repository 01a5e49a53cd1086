//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
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

	mu    sync.Mutex
	lines []line
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
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.Ev == "ready" {
			return l.Addr, true
		}
	}
	return "", false
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
	require.NoError(t, cmd.Start())
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
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
