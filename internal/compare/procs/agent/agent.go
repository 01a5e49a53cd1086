// Package agent is what the per-process comparison's agents have in common:
// one member of one library per process, driven over stdin and reporting
// on stdout, so that swimagent and mlagent differ only in how they start
// their library's member.
//
// Each agent is a binary of its own, linking one library only: a process
// that linked both would carry the other library's package initialisation
// and code pages in its RSS (a swim agent that also links memberlist starts
// at 8.1 MiB instead of 7.1).
//
// The protocol, one JSON Line per line on stdout:
//
//	{"ev":"ready","addr":"127.0.0.1:20000"}   the member listens
//	{"ev":"live","n":64}                      it now sees n live members, itself included
//	{"ev":"joined","join_ns":1234567,"attempts":1}
//	                                          its Join succeeded, after attempts tries
//	                                          (err: the first failure's, if any)
//	{"ev":"error","err":"..."}                it could not start
//	{"ev":"down","node":"name"}               its library reported name dead or left
//	{"ev":"up","node":"name"}                 its library reported name alive, after down or new
//	{"ev":"restart","node":"name"}            its library reported a new process of name (swim:
//	                                          EventRestart; memberlist: NotifyUpdate)
//
// and one command per line on stdin: "join HOST:PORT" joins through that
// seed, and tries again after JoinRetry for as long as it fails, as an
// application's start-up would. When stdin closes (the driver exited or closed it) the member shuts
// down and the process exits, so an agent never outlives its driver by more
// than that.
package agent

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Line is one line of an agent's stdout.
type Line struct {
	Ev       string `json:"ev"`
	Addr     string `json:"addr,omitempty"`
	N        int    `json:"n,omitempty"`
	JoinNS   int64  `json:"join_ns,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	Err      string `json:"err,omitempty"`
	Node     string `json:"node,omitempty"`
}

// The events of Line.Ev.
const (
	EvReady   = "ready"
	EvLive    = "live"
	EvJoined  = "joined"
	EvError   = "error"
	EvDown    = "down"
	EvUp      = "up"
	EvRestart = "restart"
)

// JoinRetry is the pause between two join attempts. Short, so that a
// refused attempt (swim's seed refuses streams beyond its share for one
// source address once its stream slots are full: under a join storm from
// one host) adds little to the join time, which the table reports beside
// the number of retries.
const JoinRetry = 100 * time.Millisecond

// Config is what the driver gives an agent on its command line.
type Config struct {
	Name string // the member's name, distinct in the cluster
	Bind string // the address it binds, UDP and TCP
	Port int    // the port it binds, UDP and TCP
}

// Member is a running member of either library.
type Member interface {
	Join(seed string) error
	Shutdown() error
}

// Start creates the member of cfg, reporting the members it sees come and
// go to live.
type Start func(cfg Config, live *Live) (Member, error)

// Main is an agent's main: it parses the command line, starts the member
// and serves stdin until it closes.
func Main(start Start) {
	var cfg Config
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.StringVar(&cfg.Name, "name", "", "member name")
	fs.StringVar(&cfg.Bind, "bind", "127.0.0.1", "address to bind")
	fs.IntVar(&cfg.Port, "port", 0, "port to bind (UDP and TCP)")
	_ = fs.Parse(os.Args[1:])
	if cfg.Name == "" || cfg.Port == 0 {
		fmt.Fprintln(os.Stderr, "agent: -name and -port are required")
		os.Exit(2)
	}
	out := &printer{enc: json.NewEncoder(os.Stdout)}
	live := &Live{self: cfg.Name, up: map[string]bool{}, out: out}
	m, err := start(cfg, live)
	if err != nil {
		out.print(Line{Ev: EvError, Err: err.Error()})
		os.Exit(1)
	}
	out.print(Line{Ev: EvReady, Addr: fmt.Sprintf("%s:%d", cfg.Bind, cfg.Port)})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch cmd {
		case "join":
			// In a goroutine: a slow join must not hold up a later
			// command, nor the exit when stdin closes.
			go func() {
				began := time.Now()
				l := Line{Ev: EvJoined}
				for {
					l.Attempts++
					err := m.Join(arg)
					if err == nil {
						break
					}
					if l.Err == "" {
						l.Err = err.Error()
					}
					time.Sleep(JoinRetry)
				}
				l.JoinNS = time.Since(began).Nanoseconds()
				out.print(l)
			}()
		case "":
		default:
			fmt.Fprintf(os.Stderr, "agent: unknown command %q\n", sc.Text())
		}
	}
	_ = m.Shutdown()
}

// printer writes Lines to stdout, one at a time: the libraries call back
// from goroutines of their own.
type printer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (p *printer) print(l Line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.enc.Encode(l)
}

// Live counts the live members an agent's member sees from its library's
// join and leave events, and prints the count each time it changes. It
// keeps its own set rather than asking the library: memberlist calls its
// event delegate with its node lock held, so a NumMembers from there would
// deadlock. Events about the member itself are ignored (memberlist reports
// its own join, swim does not): the count always includes it.
type Live struct {
	self string
	out  *printer

	mu sync.Mutex
	up map[string]bool
}

// Restarted records that the library reported a new process of name.
func (l *Live) Restarted(name string) {
	if name != l.self {
		l.out.print(Line{Ev: EvRestart, Node: name})
	}
}

// Up records that name is live.
func (l *Live) Up(name string) { l.set(name, true) }

// Down records that name is gone (dead or left).
func (l *Live) Down(name string) { l.set(name, false) }

func (l *Live) set(name string, up bool) {
	if name == l.self {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up[name] == up {
		return
	}
	if up {
		l.up[name] = true
		l.out.print(Line{Ev: EvUp, Node: name})
	} else {
		delete(l.up, name)
		l.out.print(Line{Ev: EvDown, Node: name})
	}
	l.out.print(Line{Ev: EvLive, N: 1 + len(l.up)})
}
