//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/swim-go/swim/internal/chaos"
	"github.com/swim-go/swim/internal/compare/procs/agent"
)

// unsupported says why this machine cannot run the comparison, or "".
func unsupported() string {
	if os.Geteuid() != 0 {
		return "needs root (it creates a network namespace)"
	}
	return ""
}

// run measures every library of o in turn, in one namespace. It returns
// what it measured so far along with an error.
func run(ctx context.Context, o *options) (rep *report, err error) {
	began := time.Now()
	rep = &report{N: o.n, Settle: o.settle, Windows: o.windows, Window: o.window, LoadStart: loadavg()}
	if o.massRestart {
		rep.RestartEvery, rep.RestartDown, rep.Hold = o.restartEvery, o.restartDown, o.holdFor
	}
	rep.machine()
	defer func() {
		rep.LoadEnd = loadavg()
		rep.Wall = time.Since(began)
	}()
	if err := ensureIP(); err != nil {
		return rep, err
	}
	// Leftovers of a killed run (of this tool or of the chaos suite) would
	// load the machine and skew the figures.
	if cleaned, err := chaos.CleanStaleNamespaces(); err != nil {
		logf("cleaning stale namespaces: %v", err)
	} else if len(cleaned) > 0 {
		logf("removed stale namespaces %v", cleaned)
	}
	chaos.CleanStaleBinDirs("")

	dir, err := chaos.NewBinDir("")
	if err != nil {
		return rep, err
	}
	defer func() {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
	}()
	// The agents' stderr goes beside their binaries, unless it is to be
	// kept: clean.sh removes build directories, not log directories.
	logDir := dir
	if o.keepLogs {
		if logDir, err = os.MkdirTemp("", "swimchaos-logs-procs-"); err != nil {
			return rep, err
		}
		defer logf("agents' logs kept in %s", logDir)
	}
	// Build every agent before any runs, so that no build competes with
	// a measurement; once per package (swim and swim-signed share theirs).
	bins := map[string]string{} // by package
	for _, name := range o.libs {
		pkg := libs[name].pkg
		if bins[pkg] != "" {
			continue
		}
		logf("building %s", path.Base(pkg))
		bin := filepath.Join(dir, path.Base(pkg))
		// By package path: the working directory must be in the
		// internal/compare module, as it is under make procs and go run.
		if out, err := exec.CommandContext(ctx, o.goCmd, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return rep, fmt.Errorf("go build %s (run from internal/compare): %w: %s", pkg, err, bytes.TrimSpace(out))
		}
		bins[pkg] = bin
	}

	ns, err := chaos.NewNamespace()
	if err != nil {
		return rep, err
	}
	defer func() {
		if delErr := ns.Delete(); delErr != nil {
			err = errors.Join(err, delErr)
		}
	}()
	if rep.LinkHeader, err = probeLoopback(ctx, ns); err != nil {
		return rep, err
	}
	logf("namespace %s; its loopback counts %d bytes per packet beyond the IP packet", ns.Name, rep.LinkHeader)

	for k, name := range o.libs {
		r, err := runLib(ctx, ns, o, name, bins[libs[name].pkg], o.basePort+k*portSpan, logDir, rep.LinkHeader)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		rep.Libs = append(rep.Libs, r)
	}
	return rep, nil
}

// ensureIP installs iproute2 with apt-get when ip is missing (the chaos
// suite's EnsureTools would install nftables and util-linux too, which this
// does not use).
func ensureIP() error {
	if _, err := exec.LookPath("ip"); err == nil {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("ip (iproute2) is missing and there is no apt-get to install it")
	}
	logf("installing iproute2 with apt-get")
	install := func() error {
		cmd := exec.Command("apt-get", "install", "-y", "-qq", "iproute2")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install iproute2: %w: %s", err, out)
		}
		return nil
	}
	if err := install(); err != nil {
		// The package lists may be missing or stale: refresh them once.
		logf("%v; running apt-get update", err)
		if out, err := exec.Command("apt-get", "update", "-qq").CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get update: %w: %s", err, out)
		}
		if err := install(); err != nil {
			return err
		}
	}
	_, err := exec.LookPath("ip")
	return err
}

// proc is one agent process.
type proc struct {
	name  string
	addr  string
	log   string // its stderr
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once its stdout is drained and it is reaped

	// Under cluster.mu.
	ready    bool
	live     int       // the last count it printed
	fullAt   time.Time // when it last reached N, zero while below
	joined   bool      // its Join succeeded
	retries  int       // its join attempts that failed before
	joinErr  string    // the first one's error
	startErr string    // its error line, if it could not start
	exitErr  error     // from Wait, once done is closed
}

// cluster is one library's agents.
type cluster struct {
	n       int
	env     []string // what each agent's environment adds (the library's)
	procs   []*proc
	mu      sync.Mutex
	changes int         // live lines received
	downs   []downEvent // down lines received
	told    []downEvent // up and restart lines received
}

// downEvent is an agent's report that its library declared node dead or
// left.
type downEvent struct {
	observer, node string
	at             time.Time
}

// runLib starts o.n agents of lib, joins them and measures the steady
// state.
func runLib(ctx context.Context, ns *chaos.Namespace, o *options, lib, bin string, basePort int, logDir string, linkHeader int) (libResult, error) {
	res := libResult{Lib: lib}
	c := &cluster{n: o.n, env: libs[lib].env}
	defer c.kill()
	logf("%s: starting %d agents", lib, o.n)
	for i := range o.n {
		p, err := c.start(ns, bin, fmt.Sprintf("%s-%02d", lib, i), basePort+i, logDir)
		if err != nil {
			return res, err
		}
		c.procs = append(c.procs, p)
	}
	if err := c.waitFor(ctx, o.readyBound, "every agent listening", func() (bool, string) {
		ready := 0
		for _, p := range c.procs {
			if p.startErr != "" {
				return false, fmt.Sprintf("%s: %s", p.name, p.startErr)
			}
			if p.ready {
				ready++
			}
		}
		return ready == c.n, fmt.Sprintf("%d of %d listening", ready, c.n)
	}); err != nil {
		return res, err
	}

	logf("%s: joining %d agents through %s", lib, o.n-1, c.procs[0].addr)
	joinStart := time.Now()
	for _, p := range c.procs[1:] {
		if _, err := fmt.Fprintf(p.stdin, "join %s\n", c.procs[0].addr); err != nil {
			return res, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	err := c.waitFor(ctx, o.joinBound, "every agent seeing all", func() (bool, string) {
		joined, short, missing, minLive := 0, 0, 0, c.n
		for _, p := range c.procs {
			if p.joined {
				joined++
			}
			if p.live < c.n {
				short++
				missing += c.n - p.live
			}
			minLive = min(minLive, p.live)
		}
		return short == 0, fmt.Sprintf("%d of %d joins done; %d agents see fewer than %d (%d members missing in all, the fewest seen %d)",
			joined, c.n-1, short, c.n, missing, minLive)
	})
	// A cluster that does not converge within the bound is a result,
	// not a failure of the run: its steady state is measured all the same.
	var timeout *timeoutError
	if errors.As(err, &timeout) {
		res.JoinNote = timeout.msg
		logf("%s: %s", lib, timeout.msg)
	} else if err != nil {
		return res, err
	}
	c.mu.Lock()
	// Each agent's time to see all: the last time its count reached N
	// (a count that dipped and came back counts from its return); +Inf
	// for one that never did within the bound.
	var each []float64
	for _, p := range c.procs {
		if p.fullAt.IsZero() {
			each = append(each, math.Inf(1))
		} else {
			each = append(each, p.fullAt.Sub(joinStart).Seconds())
		}
		if p.retries > 0 {
			res.JoinRetried++
			res.JoinRetries += p.retries
			if res.JoinError == "" {
				res.JoinError = p.joinErr
			}
		}
	}
	c.mu.Unlock()
	slices.Sort(each)
	res.JoinMedian = median(each)
	if res.JoinNote == "" {
		res.Join = each[len(each)-1]
		logf("%s: all see all after %.2fs, the median agent after %.2fs (%d joins retried); steady state in %v",
			lib, res.Join, res.JoinMedian, res.JoinRetried, o.settle)
	}

	if err := pause(ctx, o.settle); err != nil {
		return res, err
	}
	if o.massRestart {
		r, err := c.massRestart(ctx, ns, o, bin, basePort, logDir)
		res.Restart = &r
		return res, err
	}
	prev, err := c.sample()
	if err != nil {
		return res, err
	}
	changesBefore := c.changeCount()
	for w := range o.windows {
		if err := pause(ctx, o.window); err != nil {
			return res, err
		}
		s, err := c.sample()
		if err != nil {
			return res, err
		}
		win := measure(prev, s, c.n, linkHeader)
		logf("%s: window %d of %d: CPU %.3f ms, %.1f bytes, %.2f packets per member per s; RSS %.1f MiB; rest of the machine %.2f cores busy, %.2f stolen",
			lib, w+1, o.windows, win.CPUms, win.Bytes, win.Packets, win.RSSMiB, win.OtherCores, win.StealCores)
		res.Windows = append(res.Windows, win)
		prev = s
	}
	res.Changes = c.changeCount() - changesBefore
	return res, nil
}

// start starts one agent in ns, its stderr to logDir/<name>.log.
func (c *cluster) start(ns *chaos.Namespace, bin, name string, port int, logDir string) (*proc, error) {
	p := &proc{
		name: name,
		addr: "127.0.0.1:" + strconv.Itoa(port),
		log:  filepath.Join(logDir, name+".log"),
		done: make(chan struct{}),
	}
	cmd := ns.Command(bin, "-name", name, "-bind", "127.0.0.1", "-port", strconv.Itoa(port))
	cmd.Env = append(append(os.Environ(), "GOMAXPROCS=1"), c.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// ip netns exec execs the agent, which keeps the signal: if the
		// driver dies without cleaning up, its agents die with it.
		Pdeathsig: syscall.SIGKILL,
		Setpgid:   true, // a ^C at the terminal reaches the driver, which cleans up
	}
	stderr, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer stderr.Close() // the child has its own copy
	cmd.Stderr = stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	go c.read(p, stdout)
	return p, nil
}

// read takes p's lines until its stdout closes, then reaps it.
func (c *cluster) read(p *proc, stdout io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		at := time.Now()
		var l agent.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // not ours: nothing else writes to its stdout
		}
		c.mu.Lock()
		switch l.Ev {
		case agent.EvReady:
			p.ready = true
		case agent.EvError:
			p.startErr = l.Err
		case agent.EvJoined:
			p.joined = true
			p.retries = l.Attempts - 1
			p.joinErr = l.Err
		case agent.EvDown:
			c.downs = append(c.downs, downEvent{observer: p.name, node: l.Node, at: at})
		case agent.EvUp, agent.EvRestart:
			c.told = append(c.told, downEvent{observer: p.name, node: l.Node, at: at})
		case agent.EvLive:
			c.changes++
			p.live = l.N
			if l.N >= c.n {
				p.fullAt = at
			} else {
				p.fullAt = time.Time{}
			}
		}
		c.mu.Unlock()
	}
	err := p.cmd.Wait()
	c.mu.Lock()
	p.exitErr = err
	if err == nil {
		p.exitErr = errors.New("exited")
	}
	c.mu.Unlock()
}

func (c *cluster) changeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes
}

// timeoutError is waitFor's error when the bound passed first.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }

// waitFor polls cond (under c.mu) until it holds, an agent exits, ctx ends
// or within passes; cond's string says how far it got.
func (c *cluster) waitFor(ctx context.Context, within time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		ok, status := cond()
		exited := c.exited()
		c.mu.Unlock()
		switch {
		case ok:
			return nil
		case exited != "":
			return errors.New(exited)
		case time.Now().After(deadline):
			return &timeoutError{fmt.Sprintf("not %s within %v: %s", what, within, status)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// exited describes the first agent that has exited, or is "". The caller
// holds c.mu.
func (c *cluster) exited() string {
	for _, p := range c.procs {
		if p.exitErr != nil {
			return fmt.Sprintf("agent %s exited: %v (its stderr: %s)", p.name, p.exitErr, p.log)
		}
	}
	return ""
}

// pause waits d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// kill ends every agent (SIGKILL: nothing they would do on the way out
// matters) and waits until each is reaped.
func (c *cluster) kill() {
	for _, p := range c.procs {
		_ = p.cmd.Process.Kill()
		_ = p.stdin.Close()
	}
	for _, p := range c.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			logf("%s (pid %d) not reaped 10s after SIGKILL", p.name, p.cmd.Process.Pid)
		}
	}
}

// sample is the counters of a cluster at one instant.
type sample struct {
	at    time.Time
	ticks uint64      // utime+stime summed over the agents
	cpu   machineCPU  // the whole machine's
	lo    devCounters // the namespace's loopback
	rss   []float64   // each agent's VmRSS, bytes
}

func (c *cluster) sample() (sample, error) {
	c.mu.Lock()
	exited := c.exited()
	c.mu.Unlock()
	if exited != "" {
		return sample{}, errors.New(exited)
	}
	s := sample{at: time.Now()}
	procStat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return sample{}, err
	}
	if s.cpu, err = parseProcStat(procStat); err != nil {
		return sample{}, err
	}
	for _, p := range c.procs {
		dir := "/proc/" + strconv.Itoa(p.cmd.Process.Pid)
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			return sample{}, fmt.Errorf("%s: %w", p.name, err)
		}
		ticks, err := parseStatCPU(stat)
		if err != nil {
			return sample{}, fmt.Errorf("%s: %w", p.name, err)
		}
		s.ticks += ticks
		status, err := os.ReadFile(dir + "/status")
		if err != nil {
			return sample{}, fmt.Errorf("%s: %w", p.name, err)
		}
		rss, err := parseVmRSS(status)
		if err != nil {
			return sample{}, fmt.Errorf("%s: %w", p.name, err)
		}
		s.rss = append(s.rss, float64(rss))
	}
	// Any process in the namespace shows its devices in its net/dev.
	netdev, err := os.ReadFile("/proc/" + strconv.Itoa(c.procs[0].cmd.Process.Pid) + "/net/dev")
	if err != nil {
		return sample{}, err
	}
	if s.lo, err = parseNetDev(netdev, "lo"); err != nil {
		return sample{}, err
	}
	return s, nil
}

// measure turns two samples of n agents into a window's figures per member
// per second, less linkHeader bytes per packet.
func measure(a, b sample, n int, linkHeader int) window {
	secs := b.at.Sub(a.at).Seconds()
	per := float64(n) * secs
	packets := float64(b.lo.txPackets - a.lo.txPackets)
	return window{
		Seconds: secs,
		CPUms:   float64(b.ticks-a.ticks) * 1000 / userHZ / per,
		Bytes:   (float64(b.lo.txBytes-a.lo.txBytes) - float64(linkHeader)*packets) / per,
		Packets: packets / per,
		RSSMiB:  median(b.rss) / (1 << 20),
		// Busy time outside the agents' own utime+stime: other processes,
		// and interrupt work (some of it the agents' packets) charged to
		// no process.
		OtherCores: (float64(b.cpu.busy-a.cpu.busy) - float64(b.ticks-a.ticks)) / userHZ / secs,
		StealCores: float64(b.cpu.steal-a.cpu.steal) / userHZ / secs,
	}
}

// loProbeFlag runs this binary as the loopback probe (see runLoProbe).
const loProbeFlag = "lo-probe"

// loProbeResult is what the probe measured: the counters' growth while it
// sent Sent datagrams of IPBytes IP bytes in all to itself.
type loProbeResult struct {
	Sent       int    `json:"sent"`
	IPBytes    uint64 `json:"ip_bytes"`
	SysBytes   uint64 `json:"sys_tx_bytes"` // /sys/class/net/lo/statistics
	SysPackets uint64 `json:"sys_tx_packets"`
	DevBytes   uint64 `json:"dev_tx_bytes"` // /proc/self/net/dev
	DevPackets uint64 `json:"dev_tx_packets"`
}

// probeLoopback runs the probe in ns (which must carry no other traffic)
// and returns the bytes its loopback counts per packet beyond the IP
// packet.
func probeLoopback(ctx context.Context, ns *chaos.Namespace) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := ns.Command(exe, "-"+loProbeFlag)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("loopback probe: %w", err)
	}
	var r loProbeResult
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("loopback probe: %w: %q", err, out)
	}
	switch {
	case r.SysPackets != uint64(r.Sent):
		return 0, fmt.Errorf("loopback probe: sent %d datagrams, lo counted %d packets", r.Sent, r.SysPackets)
	case r.DevBytes != r.SysBytes || r.DevPackets != r.SysPackets:
		return 0, fmt.Errorf("loopback probe: /proc/self/net/dev (%d bytes, %d packets) differs from /sys/class/net/lo/statistics (%d, %d)",
			r.DevBytes, r.DevPackets, r.SysBytes, r.SysPackets)
	case r.SysBytes < r.IPBytes || (r.SysBytes-r.IPBytes)%uint64(r.Sent) != 0:
		return 0, fmt.Errorf("loopback probe: lo counted %d bytes for %d datagrams of %d IP bytes: no fixed overhead per packet",
			r.SysBytes, r.Sent, r.IPBytes)
	}
	return int((r.SysBytes - r.IPBytes) / uint64(r.Sent)), nil
}

// runLoProbe is main for the probe, run inside the namespace by `ip netns
// exec`, which mounts that namespace's sysfs: it sends UDP datagrams of
// several sizes to itself and prints a loProbeResult.
func runLoProbe() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "lo probe:", err)
		return 1
	}
	before, err := loCounters()
	if err != nil {
		return fail(err)
	}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	var r loProbeResult
	const ipv4Header, udpHeader = 20, 8
	buf := make([]byte, 2048)
	for _, size := range []int{1, 100, 1000, 1400} {
		for range 4 {
			if _, err := conn.WriteTo(buf[:size], conn.LocalAddr()); err != nil {
				return fail(err)
			}
			// Reading each back makes sure the loopback has handled
			// it before the counters are read again.
			if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				return fail(err)
			}
			if _, _, err := conn.ReadFrom(buf); err != nil {
				return fail(err)
			}
			r.Sent++
			r.IPBytes += uint64(ipv4Header + udpHeader + size)
		}
	}
	after, err := loCounters()
	if err != nil {
		return fail(err)
	}
	r.SysBytes = after.sys.txBytes - before.sys.txBytes
	r.SysPackets = after.sys.txPackets - before.sys.txPackets
	r.DevBytes = after.dev.txBytes - before.dev.txBytes
	r.DevPackets = after.dev.txPackets - before.dev.txPackets
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return fail(err)
	}
	return 0
}

// loReadings are lo's counters read both ways.
type loReadings struct{ sys, dev devCounters }

func loCounters() (loReadings, error) {
	var r loReadings
	for _, f := range []struct {
		name string
		to   *uint64
	}{
		{"tx_bytes", &r.sys.txBytes},
		{"tx_packets", &r.sys.txPackets},
	} {
		s := readString("/sys/class/net/lo/statistics/" + f.name)
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return r, fmt.Errorf("/sys/class/net/lo/statistics/%s: %q", f.name, s)
		}
		*f.to = v
	}
	netdev, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return r, err
	}
	r.dev, err = parseNetDev(netdev, "lo")
	return r, err
}
