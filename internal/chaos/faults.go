//go:build linux

package chaos

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The suite's nftables table in the namespace. Its chain "owner" (output
// hook) marks each new connection with the uid of the socket that opened it
// (agent i runs as uid BaseUID+i), so that the chain "faults" (input hook)
// can tell who is at the ephemeral-port end of a TCP connection. Faults
// replace the rules of "faults"; Heal empties it.
const (
	nftTable  = "swimchaos"
	nftFaults = "faults"
)

func (c *Cluster) tableScript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", nftTable)
	b.WriteString("\tchain owner {\n\t\ttype filter hook output priority 0; policy accept;\n")
	for _, a := range c.Agents {
		fmt.Fprintf(&b, "\t\tmeta skuid %d ct state new ct mark set %d\n", a.UID, a.UID)
	}
	b.WriteString("\t}\n")
	fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook input priority 0; policy accept;\n\t}\n}\n", nftFaults)
	return b.String()
}

// Rule is one nftables match whose packets a fault drops. Name labels its
// drop counter; rules may share a name, their counts add up.
type Rule struct {
	Name  string
	Match string // an nft match expression, e.g. "udp sport 7001 udp dport 7002"
}

// UDPLoss drops pct% of all UDP packets, at random.
func UDPLoss(pct int) Rule {
	return Rule{"udp-loss", fmt.Sprintf("meta l4proto udp numgen random mod 100 < %d", pct)}
}

// TCPLoss drops pct% of all TCP segments, at random.
func TCPLoss(pct int) Rule {
	return Rule{"tcp-loss", fmt.Sprintf("meta l4proto tcp numgen random mod 100 < %d", pct)}
}

// OneWay drops every packet from a to b, UDP and TCP, while b's packets to
// a still arrive: a's datagrams to b, a's segments on connections a opened
// to b (they go to b's port), and a's segments on connections b opened to a
// (they come from a's port, on a connection marked with b's uid).
func OneWay(a, b *Agent) []Rule {
	name := fmt.Sprintf("%s->%s", a.Name, b.Name)
	return []Rule{
		{name + " udp", fmt.Sprintf("udp sport %d udp dport %d", a.Port, b.Port)},
		{name + " tcp", fmt.Sprintf("ct mark %d tcp dport %d", a.UID, b.Port)},
		{name + " tcp", fmt.Sprintf("ct mark %d tcp sport %d", b.UID, a.Port)},
	}
}

// Deaf drops pct% of the packets sent to a, at random, UDP and TCP, while
// every packet a sends arrives: datagrams to its port, segments to its port
// on connections others opened, and segments coming back to it on
// connections it opened (ct direction reply).
func Deaf(a *Agent, pct int) []Rule {
	name := "deaf " + a.Name
	loss := fmt.Sprintf("numgen random mod 100 < %d", pct)
	return []Rule{
		{name, fmt.Sprintf("udp dport %d %s", a.Port, loss)},
		{name, fmt.Sprintf("tcp dport %d %s", a.Port, loss)},
		{name, fmt.Sprintf("ct mark %d ct direction reply %s", a.UID, loss)},
	}
}

// Isolate drops every packet to or from a: on its port, UDP and TCP, and on
// the connections it opened.
func Isolate(a *Agent) []Rule {
	name := "isolate " + a.Name
	return []Rule{
		{name, fmt.Sprintf("udp sport %d", a.Port)},
		{name, fmt.Sprintf("udp dport %d", a.Port)},
		{name, fmt.Sprintf("tcp sport %d", a.Port)},
		{name, fmt.Sprintf("tcp dport %d", a.Port)},
		{name, fmt.Sprintf("ct mark %d", a.UID)},
	}
}

// SetFaults replaces the fault rules with rules, atomically.
func (c *Cluster) SetFaults(rules ...Rule) error {
	var b strings.Builder
	fmt.Fprintf(&b, "flush chain inet %s %s\n", nftTable, nftFaults)
	for _, r := range rules {
		fmt.Fprintf(&b, "add rule inet %s %s %s counter drop comment %q\n", nftTable, nftFaults, r.Match, r.Name)
	}
	return c.NS.Nft(b.String())
}

var counterRE = regexp.MustCompile(`counter packets (\d+) bytes \d+ drop comment "([^"]*)"`)

// Drops returns, per rule name, how many packets the current fault rules
// dropped so far.
func (c *Cluster) Drops() (map[string]uint64, error) {
	out, err := c.NS.NftOutput("list", "chain", "inet", nftTable, nftFaults)
	if err != nil {
		return nil, err
	}
	drops := make(map[string]uint64)
	for _, m := range counterRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		drops[m[2]] += n
	}
	return drops, nil
}

// Heal ends every fault: it stops the starvers (which resume their
// members), resumes every agent that may be stopped, and removes the fault
// rules.
func (c *Cluster) Heal() error {
	c.mu.Lock()
	starvers := c.starvers
	c.starvers = nil
	c.mu.Unlock()
	for _, s := range starvers {
		s.Stop()
	}
	for _, a := range c.Agents {
		if !a.Exited() {
			_ = a.Signal(syscall.SIGCONT)
		}
	}
	return c.SetFaults()
}

// Starver starves agents of CPU: in every period each runs (SIGCONT) for
// one slice of length active and is stopped (SIGSTOP) for the rest. The
// slice sits at a random point of the period, drawn anew each period and
// for each agent, so the stalls between slices vary from 0 to
// 2·(period-active), as a scheduler starving a process hands it its share
// at irregular times (a regular pattern would lock onto the protocol
// period). One goroutine per agent drives it; its sleeps time the fault.
type Starver struct {
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu     sync.Mutex
	cycles int // slices granted, over all agents
}

// Starve starts starving agents, seeding the slice placement with seed.
// The cluster stops it at Heal or Close; Stop stops it sooner.
func (c *Cluster) Starve(agents []*Agent, active, period time.Duration, seed uint64) (*Starver, error) {
	if active <= 0 || active >= period {
		return nil, fmt.Errorf("starve: active %v must be in (0, period %v)", active, period)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("starve: cluster closed")
	}
	s := &Starver{stop: make(chan struct{})}
	for i, a := range agents {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		s.wg.Go(func() { s.drive(a, active, period, rng) })
	}
	c.starvers = append(c.starvers, s)
	return s, nil
}

// drive starves one agent until Stop, and resumes it.
func (s *Starver) drive(a *Agent, active, period time.Duration, rng *rand.Rand) {
	defer func() { _ = a.Signal(syscall.SIGCONT) }()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := func(until time.Time) bool {
		timer.Reset(time.Until(until))
		select {
		case <-timer.C:
			return true
		case <-s.stop:
			return false
		}
	}
	for start := time.Now(); ; start = start.Add(period) {
		_ = a.Signal(syscall.SIGSTOP)
		slice := start.Add(time.Duration(rng.Int64N(int64(period - active + 1))))
		if !wait(slice) {
			return
		}
		_ = a.Signal(syscall.SIGCONT)
		s.mu.Lock()
		s.cycles++
		s.mu.Unlock()
		if !wait(slice.Add(active)) {
			return
		}
		// The period ends; if this goroutine fell behind, catch up.
		if next := start.Add(period); time.Now().After(next.Add(period)) {
			start = time.Now().Add(-period)
		}
	}
}

// Stop ends the starvation and resumes the agents; it returns once they
// run. It may be called more than once.
func (s *Starver) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
}

// Slices returns how many running slices the agents were granted so far.
func (s *Starver) Slices() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cycles
}
