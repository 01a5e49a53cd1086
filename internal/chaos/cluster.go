//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildAgent compiles examples/agent of the repository the go command is
// run in into dir (which must be readable by the agents' uids) and returns
// the binary's path. goCmd is the go command.
func BuildAgent(goCmd, dir string) (string, error) {
	root, err := ModuleRoot(goCmd)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "agent")
	if err := BuildAgentAt(goCmd, root, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// ModuleRoot returns the directory of swim's root module, as the go
// command run in the working directory finds it.
func ModuleRoot(goCmd string) (string, error) {
	out, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}}", "github.com/swim-go/swim").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/swim-go/swim: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ClusterConfig describes the agents of a Cluster.
type ClusterConfig struct {
	N        int    // agents, named n00, n01, ...
	Profile  string // the agents' -profile: lan, wan or local
	Bin      string // the agent binary
	BasePort int    // agent i listens on 127.0.0.1:BasePort+i
	// BaseUID: agent i runs as uid BaseUID+i, so that nftables rules can
	// tell its sockets from the others' (meta skuid), which on one
	// loopback address the ephemeral ports of TCP connections cannot.
	BaseUID int
	LogDir  string // each agent's stderr goes to LogDir/<name>.log
	// Keys are the agents' -key: base64 AES keys, the primary first.
	// Empty: no encryption.
	Keys []string
	// Label is the agents' -label, the cluster label; "" for none.
	Label string
	// LoadRate is the agents' -load-rate: the broadcasts a second each
	// one sends, of LoadSize bytes (-load-size). 0 for none, and then
	// neither flag is given, so that agents built from a release without
	// them (TestUpgrade) start too.
	LoadRate float64
	LoadSize int
	// Signatures is the agents' -signatures (off, sign or required); ""
	// gives no flag, for agents built from a release without it.
	Signatures string
}

// Agent is one agent process.
type Agent struct {
	Name string
	Port int
	UID  int

	runs int // processes started under this name so far
	cmd  *exec.Cmd
	done chan struct{} // closed when its stdout is drained and it is reaped
	err  error         // from Wait, valid once done is closed
}

// Signal sends sig to the agent process.
func (a *Agent) Signal(sig syscall.Signal) error {
	select {
	case <-a.done:
		return fmt.Errorf("signal %v to %s: it has exited (%v)", sig, a.Name, a.err)
	default:
	}
	if err := a.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s: %w", sig, a.Name, err)
	}
	return nil
}

// Exited reports whether the agent process has ended.
func (a *Agent) Exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// Stopped reports whether the agent process is stopped (SIGSTOP): its state
// in /proc is T.
func (a *Agent) Stopped() bool {
	if a.Exited() {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...": comm may hold spaces, so look after its ")".
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'T'
}

// Addr is the agent's host:port.
func (a *Agent) Addr() string { return "127.0.0.1:" + strconv.Itoa(a.Port) }

// Cluster is a set of agents in one namespace and the events they print.
type Cluster struct {
	NS     *Namespace
	Agents []*Agent
	Log    *EventLog

	cfg ClusterConfig

	mu       sync.Mutex
	starvers []*Starver
	closed   bool
}

// StartCluster installs the suite's nftables table in ns and starts
// cfg.N agents in it, all joining through the first. It returns once every
// agent printed its ready line; on error, whatever it started is stopped.
func StartCluster(ns *Namespace, cfg ClusterConfig, readyWithin time.Duration) (*Cluster, error) {
	c := &Cluster{NS: ns, Log: NewEventLog(), cfg: cfg}
	for i := range cfg.N {
		c.Agents = append(c.Agents, &Agent{
			Name: fmt.Sprintf("n%02d", i),
			Port: cfg.BasePort + i,
			UID:  cfg.BaseUID + i,
			done: make(chan struct{}),
		})
	}
	if err := ns.Nft(c.tableScript()); err != nil {
		return nil, err
	}
	fail := func(err error) (*Cluster, error) {
		return nil, errors.Join(err, c.Close())
	}
	if err := c.start(c.Agents[0], cfg.Bin, ""); err != nil {
		return fail(err)
	}
	if !WaitUntil(readyWithin, func() bool { return c.ready(c.Agents[0]) }) {
		return fail(fmt.Errorf("%s printed no ready line within %v", c.Agents[0].Name, readyWithin))
	}
	for _, a := range c.Agents[1:] {
		if err := c.start(a, cfg.Bin, c.Agents[0].Addr()); err != nil {
			return fail(err)
		}
	}
	for _, a := range c.Agents {
		if !WaitUntil(readyWithin, func() bool { return c.ready(a) }) {
			return fail(fmt.Errorf("%s printed no ready line within %v", a.Name, readyWithin))
		}
	}
	return c, nil
}

// start starts agent a from the binary bin, joining through seed unless it
// is "". Its stderr goes to LogDir/<name>.log for its first process and
// LogDir/<name>.<k>.log for its k-th restart, so a restart keeps the
// previous process's log.
func (c *Cluster) start(a *Agent, bin, seed string) error {
	uid := strconv.Itoa(a.UID)
	args := []string{
		// setpriv execs the agent in turn, so the process ip starts is the
		// agent itself. The parent-death signal is set again after the uid
		// changes (which clears it): if the suite dies without cleaning
		// up, its agents die with it.
		"--reuid", uid, "--regid", uid, "--clear-groups", "--pdeathsig", "SIGKILL",
		bin, "-name", a.Name, "-bind", "127.0.0.1", "-port", strconv.Itoa(a.Port), "-profile", c.cfg.Profile,
	}
	if len(c.cfg.Keys) > 0 {
		// On the command line, where any local user can read it: fine
		// for a test key that lives as long as the run.
		args = append(args, "-key", strings.Join(c.cfg.Keys, ","))
	}
	if c.cfg.Label != "" {
		args = append(args, "-label", c.cfg.Label)
	}
	if c.cfg.Signatures != "" {
		args = append(args, "-signatures", c.cfg.Signatures)
	}
	if c.cfg.LoadRate > 0 {
		args = append(args, "-load-rate", strconv.FormatFloat(c.cfg.LoadRate, 'g', -1, 64), "-load-size", strconv.Itoa(c.cfg.LoadSize))
	}
	if seed != "" {
		args = append(args, "-join", seed)
	}
	cmd := c.NS.Command("setpriv", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Pdeathsig: syscall.SIGKILL,
		Setpgid:   true, // a ^C at the terminal reaches the suite, not the agents
	}
	logName := a.Name + ".log"
	if a.runs > 0 {
		logName = fmt.Sprintf("%s.%d.log", a.Name, a.runs)
	}
	stderr, err := os.Create(filepath.Join(c.cfg.LogDir, logName))
	if err != nil {
		return err
	}
	defer stderr.Close() // the child has its own copy
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", a.Name, err)
	}
	a.cmd = cmd
	a.runs++
	done := a.done // a restart gives a a new channel once this one is closed
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.Log.add(a.Name, sc.Bytes(), time.Now())
		}
		a.err = cmd.Wait()
	}()
	return nil
}

// Keyring returns the last keyring line a printed (its keys by
// fingerprint, and its plaintext mode), and whether it printed one.
func (c *Cluster) Keyring(a *Agent) (Line, bool) {
	lines := c.Log.Select(func(e Event) bool { return e.Observer == a.Name && e.Ev == "keyring" })
	if len(lines) == 0 {
		return Line{}, false
	}
	return lines[len(lines)-1].Line, true
}

// Fingerprint names a key as the agents' keyring lines do: the first 8
// bytes of its SHA-256, in hex.
func Fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// ReadyLine returns a's last ready line.
func (c *Cluster) ReadyLine(a *Agent) (Line, bool) {
	lines := c.Log.Select(func(e Event) bool { return e.Observer == a.Name && e.Ev == "ready" })
	if len(lines) == 0 {
		return Line{}, false
	}
	return lines[len(lines)-1].Line, true
}

// ready reports whether a printed its ready line.
func (c *Cluster) ready(a *Agent) bool {
	_, ok := c.Log.First(func(e Event) bool { return e.Observer == a.Name && e.Ev == "ready" })
	return ok
}

// Agent returns the agent named name, or nil.
func (c *Cluster) Agent(name string) *Agent {
	for _, a := range c.Agents {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Converged reports whether every agent in members sees every other one
// alive (not suspect, dead or left), and every agent in members sees each
// one in gone as dead or left. It returns a description of the first
// difference when it does not.
func (c *Cluster) Converged(members, gone []*Agent) (bool, string) {
	for _, o := range members {
		for _, m := range members {
			if o != m {
				if v := c.Log.View(o.Name, m.Name); v != ViewAlive {
					return false, fmt.Sprintf("%s sees %s as %q", o.Name, m.Name, v)
				}
			}
		}
		for _, m := range gone {
			if v := c.Log.View(o.Name, m.Name); v != ViewDead && v != ViewLeft {
				return false, fmt.Sprintf("%s sees %s as %q, not gone", o.Name, m.Name, v)
			}
		}
	}
	return true, ""
}

// Close stops every starver, then every agent (SIGCONT, then SIGKILL) and
// waits for them, and deletes the suite's nftables table. It leaves the
// namespace to its owner. It may be called more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	starvers := c.starvers
	c.starvers = nil
	c.closed = true
	c.mu.Unlock()
	for _, s := range starvers {
		s.Stop()
	}
	var errs []error
	for _, a := range c.Agents {
		if a.cmd == nil {
			continue
		}
		_ = a.cmd.Process.Signal(syscall.SIGCONT)
		_ = a.cmd.Process.Kill()
	}
	for _, a := range c.Agents {
		if a.cmd == nil {
			continue
		}
		select {
		case <-a.done:
		case <-time.After(10 * time.Second):
			errs = append(errs, fmt.Errorf("%s (pid %d) not reaped 10s after SIGKILL", a.Name, a.cmd.Process.Pid))
		}
	}
	if _, err := c.NS.NftOutput("list", "table", "inet", nftTable); err == nil {
		if err := c.NS.Nft("delete table inet " + nftTable + "\n"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WaitUntil polls cond every 50ms until it returns true or within has
// passed, and reports whether it returned true.
func WaitUntil(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
