package swim

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

var scenRewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/scenarios/*.txt with what the scenarios print")

// TestScenarios runs the protocol scenarios in testdata/scenarios/*.txt,
// one subtest per file, in the manner of etcd raft's datadriven interaction
// tests. A file is a series of commands; each is a directive line, optional
// input lines, a line "----" and the output the command must print, ended
// by a blank line:
//
//	recv self from=stranger
//	suspect p001 inc=1 from=accuser
//	----
//	self event suspect: p001 suspect inc=1
//
// Lines starting with # between commands are comments. Everything runs on
// Machines through their public API, in virtual time from mtStart with
// seeded randomness, so the output is the same on every run. After a
// deliberate change of behaviour, regenerate the expected output and read
// the diff:
//
//	go test -run TestScenarios -rewrite
//	go test -run TestScenarios/probe -rewrite   # one file
//
// The commands are listed in testdata/scenarios/README.md and in
// scenCommands below.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			runScenarioFile(t, path)
		})
	}
}

// scenBlock is one command of a scenario file with what precedes it.
type scenBlock struct {
	lead  []string // comment and blank lines before the directive, kept as written
	line  int      // the directive's line number
	cmd   string   // the directive line
	input []string
	want  []string
}

// parseScenario splits a scenario file into its commands; trailing holds
// the comment and blank lines after the last one.
func parseScenario(data string) (blocks []*scenBlock, trailing []string, err error) {
	lines := strings.Split(strings.TrimRight(data, "\n"), "\n")
	for i := 0; i < len(lines); {
		b := &scenBlock{}
		for i < len(lines) && (strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(strings.TrimSpace(lines[i]), "#")) {
			b.lead = append(b.lead, lines[i])
			i++
		}
		if i == len(lines) {
			return blocks, b.lead, nil
		}
		b.line, b.cmd = i+1, lines[i]
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			b.input = append(b.input, lines[i])
		}
		if i == len(lines) {
			return nil, nil, fmt.Errorf("line %d: %q has no ---- line", b.line, b.cmd)
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			b.want = append(b.want, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks, nil, nil
}

// runScenarioFile runs the commands of one file in order, on one
// scenWorld, and compares what each prints with its expected output, or
// with -rewrite writes the output into the file instead.
func runScenarioFile(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	blocks, trailing, err := parseScenario(string(data))
	require.NoError(t, err, path)
	w := newScenWorld(t)
	var rewritten []string
	for _, b := range blocks {
		got, err := w.exec(b.cmd, b.input)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, b.line, b.cmd, err)
		}
		for _, l := range got {
			if strings.TrimSpace(l) == "" {
				t.Fatalf("%s:%d: %s printed a blank line, which would end its output", path, b.line, b.cmd)
			}
		}
		if *scenRewrite {
			rewritten = append(rewritten, b.lead...)
			rewritten = append(rewritten, b.cmd)
			rewritten = append(rewritten, b.input...)
			rewritten = append(rewritten, "----")
			rewritten = append(rewritten, got...)
			continue
		}
		if want := strings.Join(b.want, "\n"); want != strings.Join(got, "\n") {
			t.Errorf("%s:%d: %s\nwant:\n%s\ngot:\n%s", path, b.line, b.cmd, want, strings.Join(got, "\n"))
		}
	}
	if *scenRewrite {
		rewritten = append(rewritten, trailing...)
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(rewritten, "\n")+"\n"), 0o644))
	}
}

// scenArgs are a directive's arguments: bare words and key=value pairs
// (values may be double-quoted). Every key must be used by the command, so
// that a misspelt one is an error rather than ignored.
type scenArgs struct {
	words []string
	kv    map[string]string
	used  map[string]bool
}

// parseScenArgs sorts a directive's tokens into words and key=value pairs.
func parseScenArgs(tokens []string) *scenArgs {
	a := &scenArgs{kv: map[string]string{}, used: map[string]bool{}}
	for _, tok := range tokens {
		if k, v, ok := strings.Cut(tok, "="); ok {
			a.kv[k] = v
		} else {
			a.words = append(a.words, tok)
		}
	}
	return a
}

// scenFields splits a line at spaces, keeping double-quoted parts (Go
// syntax) together and unquoted.
func scenFields(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			u, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, fmt.Errorf("bad quote in %q: %w", s, err)
			}
			cur.WriteString(u)
			in = true
			i = j
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// get is the value of key k, taken (marked used).
func (a *scenArgs) get(k string) (string, bool) {
	v, ok := a.kv[k]
	if ok {
		a.used[k] = true
	}
	return v, ok
}

// str is the value of key k, def when it is absent.
func (a *scenArgs) str(k, def string) string {
	if v, ok := a.get(k); ok {
		return v
	}
	return def
}

// num is the value of key k as a number, def when it is absent.
func (a *scenArgs) num(k string, def uint64) (uint64, error) {
	v, ok := a.get(k)
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: %w", k, v, err)
	}
	return n, nil
}

// list is the value of key k split at commas, nil when absent or empty.
func (a *scenArgs) list(k string) []string {
	v, ok := a.get(k)
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// flag reports whether the bare word w was given, and takes it.
func (a *scenArgs) flag(w string) bool {
	i := slices.Index(a.words, w)
	if i < 0 {
		return false
	}
	a.words = slices.Delete(a.words, i, i+1)
	return true
}

// check fails on keys no command used and on words left over.
func (a *scenArgs) check() error {
	for k := range a.kv {
		if !a.used[k] {
			return fmt.Errorf("unknown argument %s=", k)
		}
	}
	if len(a.words) > 0 {
		return fmt.Errorf("unexpected %q", a.words)
	}
	return nil
}

// scenNode is one Machine of a scenario.
type scenNode struct {
	name string
	addr netip.AddrPort
	m    *Machine
}

// scenMsg is a packet or stream request in flight between a sender and a
// Machine.
type scenMsg struct {
	from   netip.AddrPort
	fromN  *scenNode // the sending Machine, nil for a scripted peer
	to     *scenNode
	data   []byte
	stream *StreamRequest // a stream request; else a packet
}

// scenStreamKey names a stream request: the Machine that made it and its
// ID.
type scenStreamKey struct {
	node string
	id   uint64
}

// scenWorld is the state of one scenario: the Machines, the clock, the
// names of addresses and sequence numbers, and the packets in flight.
// Packets between Machines are delivered by deliver and run, at once (no
// latency) unless an end is cut off; packets to any other address (a
// scripted peer) are printed, and answered only by run.
type scenWorld struct {
	t       *testing.T
	now     time.Time
	nodes   []*scenNode
	byName  map[string]*scenNode
	peers   map[string]netip.AddrPort // declared scripted peers
	seqName map[uint32]int            // sequence numbers the Machines chose, as #k
	seqs    []uint32
	flight  []scenMsg
	open    map[scenStreamKey]StreamRequest // stream requests to scripted peers, not answered yet
	cut     map[string]bool

	out   []string
	sizes bool // print packet sizes

	show map[string]bool // the kinds of output printed; nil: all

	// While run drives the Machines: its time stamps, and how the
	// scripted peers answer.
	running   bool
	stamped   time.Time // when the last "at" line was printed
	stampFrom time.Time // what it counted from
	answer    bool
	silent    map[netip.AddrPort]bool
	failOpen  bool
	autoQueue []scenMsg
}

// newScenWorld returns an empty scenario at mtStart.
func newScenWorld(t *testing.T) *scenWorld {
	return &scenWorld{
		t:       t,
		now:     mtStart,
		byName:  map[string]*scenNode{},
		peers:   map[string]netip.AddrPort{"seed": mtSeedAddr, "stranger": mtStranger},
		seqName: map[uint32]int{},
		open:    map[scenStreamKey]StreamRequest{},
		cut:     map[string]bool{},
	}
}

// scenCommands maps each directive to its implementation. The README in
// testdata/scenarios describes them.
var scenCommands = map[string]func(w *scenWorld, a *scenArgs, input []string) error{
	"new":         (*scenWorld).cmdNew,
	"peer":        (*scenWorld).cmdPeer,
	"reset":       (*scenWorld).cmdReset,
	"join":        (*scenWorld).cmdJoin,
	"join-start":  (*scenWorld).cmdJoinStart,
	"recv":        (*scenWorld).cmdRecv,
	"stream":      (*scenWorld).cmdStream,
	"reply":       (*scenWorld).cmdReply,
	"time":        (*scenWorld).cmdTime,
	"tick":        (*scenWorld).cmdTick,
	"next":        (*scenWorld).cmdNext,
	"deadline":    (*scenWorld).cmdDeadline,
	"run":         (*scenWorld).cmdRun,
	"deliver":     (*scenWorld).cmdDeliver,
	"drop":        (*scenWorld).cmdDrop,
	"heal":        (*scenWorld).cmdHeal,
	"members":     (*scenWorld).cmdMembers,
	"member":      (*scenWorld).cmdMember,
	"stats":       (*scenWorld).cmdStats,
	"health":      (*scenWorld).cmdHealth,
	"gossip":      (*scenWorld).cmdGossip,
	"settle":      (*scenWorld).cmdSettle,
	"leave":       (*scenWorld).cmdLeave,
	"leave-done":  (*scenWorld).cmdLeaveDone,
	"update-meta": (*scenWorld).cmdUpdateMeta,
}

// exec runs one command and returns what it printed.
func (w *scenWorld) exec(line string, input []string) ([]string, error) {
	tokens, err := scenFields(line)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, errors.New("empty directive")
	}
	fn, ok := scenCommands[tokens[0]]
	if !ok {
		return nil, fmt.Errorf("unknown command %q", tokens[0])
	}
	a := parseScenArgs(tokens[1:])
	w.out = nil
	w.sizes = a.flag("sizes")
	w.show = nil
	if kinds := a.list("show"); kinds != nil {
		w.show = map[string]bool{}
		for _, k := range kinds {
			if !slices.Contains([]string{"packets", "replies", "streams", "events"}, k) {
				return nil, fmt.Errorf("show=%s: not packets, replies, streams or events", k)
			}
			w.show[k] = true
		}
	}
	if err := fn(w, a, input); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return w.out, nil
}

// printf adds a line to the command's output; while run drives the
// Machines, it is preceded by the time when that changed.
func (w *scenWorld) printf(format string, args ...any) {
	if w.running && (w.stamped.IsZero() || w.stamped != w.now) {
		w.out = append(w.out, fmt.Sprintf("at %s (+%v)", w.since(w.now), w.now.Sub(w.stampFrom)))
		w.stamped, w.stampFrom = w.now, w.now
	}
	w.out = append(w.out, fmt.Sprintf(format, args...))
}

// shown reports whether output of the kind is printed: always, unless the
// command's show= argument names the kinds to print (packets, replies,
// streams, events).
func (w *scenWorld) shown(kind string) bool { return w.show == nil || w.show[kind] }

// since prints a time as its offset from mtStart.
func (w *scenWorld) since(at time.Time) string { return at.Sub(mtStart).String() }

// addrOf is the address a name lives at: a Machine's, a declared peer's,
// pNNN's (mtPeerAddr(NNN)), seed's or stranger's.
func (w *scenWorld) addrOf(name string) (netip.AddrPort, bool) {
	if n := w.byName[name]; n != nil {
		return n.addr, true
	}
	if a, ok := w.peers[name]; ok {
		return a, true
	}
	if len(name) == 4 && name[0] == 'p' {
		if i, err := strconv.Atoi(name[1:]); err == nil && i > 0 {
			return mtPeerAddr(i), true
		}
	}
	return netip.AddrPort{}, false
}

// mustAddr is addrOf, failing for a name that lives nowhere.
func (w *scenWorld) mustAddr(name string) (netip.AddrPort, error) {
	a, ok := w.addrOf(name)
	if !ok {
		return a, fmt.Errorf("no address for %q: not a Machine, pNNN, seed, stranger or a declared peer", name)
	}
	return a, nil
}

// nameAt is the name living at addr, or the address itself.
func (w *scenWorld) nameAt(addr netip.AddrPort) string {
	for _, n := range w.nodes {
		if n.addr == addr {
			return n.name
		}
	}
	for name, a := range w.peers {
		if a == addr {
			return name
		}
	}
	if b := addr.Addr().As16(); addr.Addr().Is4() && addr.Port() == 7946 && b[12] == 10 && b[13] == 1 {
		if i := int(b[14])<<8 | int(b[15]); i > 0 && mtPeerAddr(i) == addr {
			return mtPeer(i)
		}
	}
	return addr.String()
}

// nodeAt is the Machine at addr, nil if none.
func (w *scenWorld) nodeAt(addr netip.AddrPort) *scenNode {
	for _, n := range w.nodes {
		if n.addr == addr {
			return n
		}
	}
	return nil
}

// node takes the command's first word, the Machine it acts on.
func (w *scenWorld) node(a *scenArgs) (*scenNode, error) {
	if len(a.words) == 0 {
		return nil, errors.New("which Machine?")
	}
	name := a.words[0]
	a.words = a.words[1:]
	n := w.byName[name]
	if n == nil {
		return nil, fmt.Errorf("no Machine %q", name)
	}
	return n, nil
}

// when parses a time: an offset from mtStart ("4s", "4s+123ms-1ns") or,
// with a leading +, from now ("+500ms").
func (w *scenWorld) when(s string) (time.Time, error) {
	base := mtStart
	if strings.HasPrefix(s, "+") {
		base, s = w.now, s[1:]
	}
	var total time.Duration
	for len(s) > 0 {
		j := 1
		for j < len(s) && s[j] != '+' && s[j] != '-' {
			j++
		}
		d, err := time.ParseDuration(s[:j])
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: %w", s, err)
		}
		total += d
		s = s[j:]
	}
	return base.Add(total), nil
}

// seqText prints a sequence number: #k for the kth a Machine chose,
// registering it when chosen is set; otherwise the number.
func (w *scenWorld) seqText(seq uint32, chosen bool) string {
	if k, ok := w.seqName[seq]; ok {
		return fmt.Sprintf("#%d", k)
	}
	if chosen {
		w.seqs = append(w.seqs, seq)
		w.seqName[seq] = len(w.seqs)
		return fmt.Sprintf("#%d", len(w.seqs))
	}
	return strconv.FormatUint(uint64(seq), 10)
}

// parseSeq reads a sequence number: #k (as printed), #k+N, or a number.
func (w *scenWorld) parseSeq(s string) (uint32, error) {
	if rest, ok := strings.CutPrefix(s, "#"); ok {
		ks, off, plus := strings.Cut(rest, "+")
		k, err := strconv.Atoi(ks)
		if err != nil || k < 1 || k > len(w.seqs) {
			return 0, fmt.Errorf("no sequence number %s yet", s)
		}
		seq := w.seqs[k-1]
		if plus {
			n, err := strconv.ParseUint(off, 10, 32)
			if err != nil {
				return 0, fmt.Errorf("seq %s: %w", s, err)
			}
			seq += uint32(n)
		}
		return seq, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("seq %s: %w", s, err)
	}
	return uint32(n), nil
}

// fmtAddrOf prints " addr=A" unless encoded is name's own address.
func (w *scenWorld) fmtAddrOf(name string, encoded []byte) string {
	addr, err := wire.DecodeAddr(encoded)
	if err != nil {
		return fmt.Sprintf(" addr=%x", encoded)
	}
	if own, ok := w.addrOf(name); ok && own == addr {
		return ""
	}
	return " addr=" + addr.String()
}

// fmtMeta prints " meta=M" (quoted when it must be), nothing for none.
func fmtMeta(meta []byte) string {
	if len(meta) == 0 {
		return ""
	}
	s := string(meta)
	if strings.ContainsAny(s, " \"\t\n") || !strconv.CanBackquote(s) {
		s = strconv.Quote(s)
	}
	return " meta=" + s
}

// fmtMsg prints one message in the syntax parseMsgs reads; chosen says the
// message comes from a Machine (whose ping sequence numbers get names).
func (w *scenWorld) fmtMsg(msg wire.Message, chosen bool) string {
	switch m := msg.(type) {
	case *wire.Ping:
		return fmt.Sprintf("ping seq=%s target=%s from=%s", w.seqText(m.Seq, chosen), m.Target, m.From)
	case *wire.PingReq:
		return fmt.Sprintf("ping-req seq=%s target=%s%s from=%s", w.seqText(m.Seq, chosen), m.Target, w.fmtAddrOf(m.Target, m.TargetAddr), m.From)
	case *wire.Ack:
		return "ack seq=" + w.seqText(m.Seq, false)
	case *wire.Nack:
		return "nack seq=" + w.seqText(m.Seq, false)
	case *wire.Alive:
		return fmt.Sprintf("alive %s inc=%d%s%s", m.Name, m.Incarnation, w.fmtAddrOf(m.Name, m.Addr), fmtMeta(m.Meta))
	case *wire.Suspect:
		s := fmt.Sprintf("suspect %s inc=%d from=%s", m.Name, m.Incarnation, m.From)
		if m.Silence != 0 {
			s += fmt.Sprintf(" silence=%v", time.Duration(m.Silence)*time.Millisecond)
		}
		return s
	case *wire.Dead:
		switch {
		case m.Left && m.From == m.Name:
			return fmt.Sprintf("left %s inc=%d", m.Name, m.Incarnation)
		case m.Left:
			return fmt.Sprintf("left %s inc=%d from=%s", m.Name, m.Incarnation, m.From)
		}
		return fmt.Sprintf("dead %s inc=%d from=%s", m.Name, m.Incarnation, m.From)
	case *wire.PushPull:
		s := "push-pull from=" + m.From
		if m.Join {
			s += " join"
		}
		return s
	}
	return fmt.Sprintf("%T", msg)
}

// fmtMsgs prints a packet or stream message: the first message after
// head, each other one on a line of its own ("  + msg"), and a push-pull's
// members indented below it.
func (w *scenWorld) fmtMsgs(head string, msgs []wire.Message, chosen bool) []string {
	var lines []string
	for i, msg := range msgs {
		s := w.fmtMsg(msg, chosen)
		if i == 0 {
			lines = append(lines, head+s)
		} else {
			lines = append(lines, "  + "+s)
		}
		if pp, ok := msg.(*wire.PushPull); ok {
			for _, ms := range pp.Members {
				lines = append(lines, fmt.Sprintf("  %s %s inc=%d%s%s", ms.Name, State(ms.State), ms.Incarnation, w.fmtAddrOf(ms.Name, ms.Addr), fmtMeta(ms.Meta)))
			}
		}
	}
	if len(msgs) == 0 {
		lines = append(lines, head+"(no messages)")
	}
	return lines
}

// fmtMember prints a member as members and events show it.
func (w *scenWorld) fmtMember(m Member) string {
	s := fmt.Sprintf("%s %s inc=%d", m.Name, m.State, m.Incarnation)
	if own, ok := w.addrOf(m.Name); !ok || own != m.Addr {
		s += " addr=" + m.Addr.String()
	}
	return s + fmtMeta(m.Meta)
}

// parseMsgs reads the messages of a packet or stream, one a line in the
// syntax fmtMsg prints; indented lines after a push-pull are its members
// ("NAME STATE inc=N [addr=A] [meta=M]"). sender is the default From, and
// receiver the default target of a ping.
func (w *scenWorld) parseMsgs(lines []string, sender, receiver string) ([]wire.Message, error) {
	var msgs []wire.Message
	for _, line := range lines {
		indented := strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
		tokens, err := scenFields(line)
		if err != nil {
			return nil, err
		}
		if len(tokens) == 0 {
			continue
		}
		if indented {
			var pp *wire.PushPull
			if len(msgs) > 0 {
				pp, _ = msgs[len(msgs)-1].(*wire.PushPull)
			}
			if pp == nil {
				return nil, fmt.Errorf("indented line %q not after a push-pull", line)
			}
			ms, err := w.parseMember(tokens)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
			pp.Members = append(pp.Members, ms)
			continue
		}
		msg, err := w.parseMsg(tokens, sender, receiver)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// parseMember reads a push-pull member line: NAME STATE inc=N [addr=A]
// [meta=M].
func (w *scenWorld) parseMember(tokens []string) (wire.MemberState, error) {
	a := parseScenArgs(tokens)
	if len(a.words) != 2 {
		return wire.MemberState{}, errors.New("want NAME STATE inc=N")
	}
	name := a.words[0]
	st, err := parseState(a.words[1])
	if err != nil {
		return wire.MemberState{}, err
	}
	a.words = nil
	inc, err := a.num("inc", 0)
	if err != nil {
		return wire.MemberState{}, err
	}
	addr, err := w.addrArg(a, name)
	if err != nil {
		return wire.MemberState{}, err
	}
	ms := wire.MemberState{Name: name, Addr: wire.EncodeAddr(addr), Incarnation: inc, State: uint8(st)}
	if v, ok := a.get("meta"); ok {
		ms.Meta = []byte(v)
	}
	return ms, a.check()
}

// parseState reads a State by its name.
func parseState(s string) (State, error) {
	for _, st := range []State{StateAlive, StateSuspect, StateDead, StateLeft} {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown state %q", s)
}

// addrArg is addr= (an address or a name) or name's own address.
func (w *scenWorld) addrArg(a *scenArgs, name string) (netip.AddrPort, error) {
	if v, ok := a.get("addr"); ok {
		if ap, err := netip.ParseAddrPort(v); err == nil {
			return ap, nil
		}
		return w.mustAddr(v)
	}
	return w.mustAddr(name)
}

// parseMsg reads one message line (see parseMsgs).
func (w *scenWorld) parseMsg(tokens []string, sender, receiver string) (wire.Message, error) {
	kind := tokens[0]
	a := parseScenArgs(tokens[1:])
	subject := func() (string, error) {
		if len(a.words) == 0 {
			return "", fmt.Errorf("%s: about whom?", kind)
		}
		s := a.words[0]
		a.words = a.words[1:]
		return s, nil
	}
	seq := func() (uint32, error) {
		v, ok := a.get("seq")
		if !ok {
			return 0, errors.New("seq= missing")
		}
		return w.parseSeq(v)
	}
	var msg wire.Message
	switch kind {
	case "ping":
		s, err := seq()
		if err != nil {
			return nil, err
		}
		msg = &wire.Ping{Seq: s, Target: a.str("target", receiver), From: a.str("from", sender)}
	case "ping-req":
		s, err := seq()
		if err != nil {
			return nil, err
		}
		target := a.str("target", "")
		addr, err := w.addrArg(a, target)
		if err != nil {
			return nil, err
		}
		msg = &wire.PingReq{Seq: s, Target: target, TargetAddr: wire.EncodeAddr(addr), From: a.str("from", sender)}
	case "ack", "nack":
		s, err := seq()
		if err != nil {
			return nil, err
		}
		if kind == "ack" {
			msg = &wire.Ack{Seq: s}
		} else {
			msg = &wire.Nack{Seq: s}
		}
	case "alive", "suspect", "dead", "left":
		name, err := subject()
		if err != nil {
			return nil, err
		}
		inc, err := a.num("inc", 0)
		if err != nil {
			return nil, err
		}
		switch kind {
		case "alive":
			addr, err := w.addrArg(a, name)
			if err != nil {
				return nil, err
			}
			al := &wire.Alive{Name: name, Addr: wire.EncodeAddr(addr), Incarnation: inc}
			if v, ok := a.get("meta"); ok {
				al.Meta = []byte(v)
			}
			msg = al
		case "suspect":
			s := &wire.Suspect{Name: name, Incarnation: inc, From: a.str("from", sender)}
			if v, ok := a.get("silence"); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					return nil, err
				}
				s.Silence = uint32(d / time.Millisecond)
			}
			msg = s
		case "dead":
			msg = &wire.Dead{Name: name, Incarnation: inc, From: a.str("from", sender)}
		case "left":
			msg = &wire.Dead{Name: name, Incarnation: inc, From: a.str("from", name), Left: true}
		}
	case "push-pull":
		msg = &wire.PushPull{From: a.str("from", sender), Join: a.flag("join")}
	default:
		return nil, fmt.Errorf("unknown message %q", kind)
	}
	return msg, a.check()
}

// encodeMsgs encodes msgs as one packet, compound when there are several.
func encodeMsgs(msgs []wire.Message) ([]byte, error) {
	frames := make([][]byte, 0, len(msgs))
	for _, msg := range msgs {
		f, err := wire.AppendFrame(nil, msg)
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
	}
	return wire.AppendCompound(nil, frames), nil
}

// payload is the bytes a command sends: raw=HEX, or its input lines
// encoded.
func (w *scenWorld) payload(a *scenArgs, input []string, sender, receiver string) ([]byte, error) {
	if v, ok := a.get("raw"); ok {
		return hex.DecodeString(v)
	}
	msgs, err := w.parseMsgs(input, sender, receiver)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, errors.New("no messages to send")
	}
	return encodeMsgs(msgs)
}

// collect takes n's outputs and prints them: packets and stream requests,
// queued for delivery when they go to a Machine, and events.
func (w *scenWorld) collect(n *scenNode) {
	r := n.m.Ready()
	for _, p := range r.Packets {
		msgs, err := wire.DecodePacket(p.Data)
		require.NoError(w.t, err, "%s sent a packet that does not decode", n.name)
		head := fmt.Sprintf("%s -> %s ", n.name, w.nameAt(p.To))
		to := w.nodeAt(p.To)
		lost := to != nil && (w.cut[n.name] || w.cut[to.name])
		lines := w.fmtMsgs(head, msgs, true)
		if w.sizes {
			lines[0] += fmt.Sprintf(" (%d bytes)", len(p.Data))
		}
		if lost {
			lines[0] += " (lost)"
		}
		if w.shown("packets") {
			for _, l := range lines {
				w.printf("%s", l)
			}
		}
		switch {
		case to != nil && !lost:
			w.flight = append(w.flight, scenMsg{from: n.addr, fromN: n, to: to, data: p.Data})
		case to == nil && w.running && w.answer && !w.silent[p.To]:
			w.autoAnswer(n, p.To, msgs)
		}
	}
	for i := range r.Streams {
		s := r.Streams[i]
		msgs, err := wire.DecodeStreamPacket(s.Data)
		require.NoError(w.t, err, "%s sent a stream request that does not decode", n.name)
		head := fmt.Sprintf("%s => %s stream=%d timeout=%v ", n.name, w.nameAt(s.To), s.ID, s.Timeout)
		if w.shown("streams") {
			for _, l := range w.fmtMsgs(head, msgs, true) {
				w.printf("%s", l)
			}
		}
		if to := w.nodeAt(s.To); to != nil {
			w.flight = append(w.flight, scenMsg{from: n.addr, fromN: n, to: to, stream: &s})
		} else {
			w.open[scenStreamKey{n.name, s.ID}] = s
			if w.running && w.failOpen {
				w.autoQueue = append(w.autoQueue, scenMsg{fromN: n, stream: &s})
			}
		}
	}
	for _, e := range r.Events {
		if w.shown("events") {
			w.printf("%s event %s: %s", n.name, e.Kind, w.fmtMember(e.Member))
		}
	}
}

// autoAnswer queues what a live scripted peer at addr answers to msgs: an
// ack for a ping, and for a ping-req whose target is not silent the ack it
// relays.
func (w *scenWorld) autoAnswer(n *scenNode, addr netip.AddrPort, msgs []wire.Message) {
	for _, msg := range msgs {
		var seq uint32
		switch msg := msg.(type) {
		case *wire.Ping:
			seq = msg.Seq
		case *wire.PingReq:
			target, err := wire.DecodeAddr(msg.TargetAddr)
			if err != nil || w.silent[target] {
				continue
			}
			seq = msg.Seq
		default:
			continue
		}
		data, err := encodeMsgs([]wire.Message{&wire.Ack{Seq: seq}})
		require.NoError(w.t, err)
		w.autoQueue = append(w.autoQueue, scenMsg{from: addr, to: n, data: data})
	}
}

// deliver hands one message in flight to its Machine and prints what
// follows.
func (w *scenWorld) deliver(f scenMsg) {
	if f.stream != nil && f.to == nil { // an open stream run fails on the spot
		delete(w.open, scenStreamKey{f.fromN.name, f.stream.ID})
		err := f.fromN.m.HandleStreamResponse(w.now, f.stream.ID, nil, errors.New("not answered"))
		w.printErr(f.fromN.name, err)
		w.collect(f.fromN)
		return
	}
	if f.stream != nil {
		var resp []byte
		var err error
		if w.cut[f.fromN.name] || w.cut[f.to.name] {
			err = errors.New("unreachable")
		} else {
			resp, err = f.to.m.HandleStream(w.now, f.from, f.stream.Data)
			w.printErr(f.to.name, err)
		}
		w.collect(f.to)
		w.printErr(f.fromN.name, f.fromN.m.HandleStreamResponse(w.now, f.stream.ID, resp, err))
		w.collect(f.fromN)
		return
	}
	if f.fromN == nil && w.shown("replies") {
		msgs, err := wire.DecodePacket(f.data)
		require.NoError(w.t, err)
		for _, l := range w.fmtMsgs(fmt.Sprintf("%s -> %s ", w.nameAt(f.from), f.to.name), msgs, false) {
			w.printf("%s", l)
		}
	}
	w.printErr(f.to.name, f.to.m.HandlePacket(w.now, f.from, f.data))
	w.collect(f.to)
}

// printErr prints a Machine's error, if any, as part of the output.
func (w *scenWorld) printErr(who string, err error) {
	if err != nil {
		w.printf("%s error: %v", who, err)
	}
}

// settle delivers everything in flight, and what that provokes, until the
// Machines have nothing more to say.
func (w *scenWorld) settle() error {
	for i := 0; ; i++ {
		if i > 100000 {
			return errors.New("the Machines never fall quiet")
		}
		for _, n := range w.nodes {
			w.collect(n)
		}
		if len(w.flight) == 0 && len(w.autoQueue) == 0 {
			return nil
		}
		batch := append(w.flight, w.autoQueue...)
		w.flight, w.autoQueue = nil, nil
		for _, f := range batch {
			w.deliver(f)
		}
	}
}

// cmdNew: new NAME... [seed=N] [Field=value...] creates Machines with
// mtConfig and the Config fields given. The kth Machine created draws from
// PCG(k, 2) unless seed= says otherwise (the first from PCG(1, 2), as
// newMT does).
func (w *scenWorld) cmdNew(a *scenArgs, _ []string) error {
	names := a.words
	a.words = nil
	if len(names) == 0 {
		return errors.New("new: no names")
	}
	seed, err := a.num("seed", 0)
	if err != nil {
		return err
	}
	for _, name := range names {
		if w.byName[name] != nil {
			return fmt.Errorf("%s exists", name)
		}
		cfg := mtConfig()
		cfg.Name = name
		for k := range a.kv {
			if k == "seed" {
				continue
			}
			v, _ := a.get(k)
			if err := setConfigField(cfg, k, v); err != nil {
				return err
			}
		}
		addr, ok := w.addrOf(name)
		switch {
		case name == mtSelf:
			addr = mtSelfAddr
		case !ok:
			addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + len(w.nodes))}), 7946)
		}
		s := seed
		if s == 0 {
			s = uint64(len(w.nodes) + 1)
		}
		m, err := NewMachine(cfg, addr, rand.New(rand.NewPCG(s, 2)), w.now)
		if err != nil {
			return err
		}
		n := &scenNode{name: name, addr: addr, m: m}
		w.nodes = append(w.nodes, n)
		w.byName[name] = n
	}
	return nil
}

// setConfigField sets the Config field named k from its text.
func setConfigField(cfg *Config, k, v string) error {
	f := reflect.ValueOf(cfg).Elem().FieldByName(k)
	if !f.IsValid() {
		return fmt.Errorf("no Config field %s", k)
	}
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetInt(int64(n))
	case f.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		f.SetFloat(x)
	case f.Kind() == reflect.String:
		f.SetString(v)
	case f.Type() == reflect.TypeOf([]byte(nil)):
		f.SetBytes([]byte(v))
	default:
		return fmt.Errorf("Config field %s: type %s not supported", k, f.Type())
	}
	return nil
}

// cmdPeer: peer NAME [addr=A] declares a scripted peer (pNNN, seed and
// stranger need no declaration).
func (w *scenWorld) cmdPeer(a *scenArgs, _ []string) error {
	if len(a.words) != 1 {
		return errors.New("peer NAME [addr=A]")
	}
	name := a.words[0]
	a.words = nil
	v, ok := a.get("addr")
	if !ok {
		return errors.New("peer: addr= missing")
	}
	addr, err := netip.ParseAddrPort(v)
	if err != nil {
		return err
	}
	w.peers[name] = addr
	return nil
}

// cmdReset: reset starts a new scenario in the same file.
func (w *scenWorld) cmdReset(*scenArgs, []string) error {
	*w = *newScenWorld(w.t)
	return nil
}

// cmdJoin: join NODE [peers=N inc=I] [via=NAME], with input member lines,
// joins NODE through via (default seed). A scripted via answers with a
// push-pull of the members given (pNNN for N of peers=, at incarnation
// inc=, and the input lines); the join's own request and events are not
// printed, only the count of live members NODE then knows. A Machine via
// runs the exchange for real, printed in full.
func (w *scenWorld) cmdJoin(a *scenArgs, input []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	via := a.str("via", "seed")
	viaAddr, err := w.mustAddr(via)
	if err != nil {
		return err
	}
	if w.nodeAt(viaAddr) != nil {
		n.m.Join(w.now, []netip.AddrPort{viaAddr})
		return w.settle()
	}
	peers, err := a.num("peers", 0)
	if err != nil {
		return err
	}
	inc, err := a.num("inc", 0)
	if err != nil {
		return err
	}
	pp := &wire.PushPull{From: via}
	for i := 1; i <= int(peers); i++ {
		pp.Members = append(pp.Members, mtMember(i, StateAlive, inc))
	}
	for _, line := range input {
		tokens, err := scenFields(line)
		if err != nil {
			return err
		}
		ms, err := w.parseMember(tokens)
		if err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		pp.Members = append(pp.Members, ms)
	}
	n.m.Ready()
	ids := n.m.Join(w.now, []netip.AddrPort{viaAddr})
	if len(ids) != 1 {
		return fmt.Errorf("join: %d streams", len(ids))
	}
	n.m.Ready() // the request, answered here
	reply, err := wire.AppendPacket(nil, pp)
	if err != nil {
		return err
	}
	if err := n.m.HandleStreamResponse(w.now, ids[0], reply, nil); err != nil {
		return err
	}
	r := n.m.Ready()
	if len(r.Packets) > 0 || len(r.Streams) > 0 {
		return fmt.Errorf("join: %d packets and %d streams out", len(r.Packets), len(r.Streams))
	}
	w.printf("%s knows %d live members", n.name, n.m.NumMembers())
	return nil
}

// cmdJoinStart: join-start NODE seeds=A,B,... calls Join and prints the
// requests, which reply answers.
func (w *scenWorld) cmdJoinStart(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	var seeds []netip.AddrPort
	for _, s := range a.list("seeds") {
		addr, err := netip.ParseAddrPort(s)
		if err != nil {
			if addr, err = w.mustAddr(s); err != nil {
				return err
			}
		}
		seeds = append(seeds, addr)
	}
	ids := n.m.Join(w.now, seeds)
	w.printf("ids %v", ids)
	w.collect(n)
	return nil
}

// inbound reads what recv and stream share: the node, the sender
// (from=NAME) and the payload (input lines or raw=HEX).
func (w *scenWorld) inbound(a *scenArgs, input []string) (n *scenNode, fromName string, from netip.AddrPort, data []byte, err error) {
	if n, err = w.node(a); err != nil {
		return nil, "", netip.AddrPort{}, nil, err
	}
	fromName = a.str("from", "")
	if from, err = w.mustAddr(fromName); err != nil {
		return nil, "", netip.AddrPort{}, nil, err
	}
	data, err = w.payload(a, input, fromName, n.name)
	return n, fromName, from, data, err
}

// cmdRecv: recv NODE from=NAME [repeat=N] [raw=HEX], with the messages
// as input lines, hands NODE one packet carrying them (N times) and prints
// what it answers. A Machine's answers to other Machines are queued for
// deliver.
func (w *scenWorld) cmdRecv(a *scenArgs, input []string) error {
	n, fromName, from, data, err := w.inbound(a, input)
	if err != nil {
		return err
	}
	repeat, err := a.num("repeat", 1)
	if err != nil {
		return err
	}
	if w.sizes {
		w.printf("%s <- %s (%d bytes)", n.name, fromName, len(data))
	}
	for range repeat {
		w.printErr(n.name, n.m.HandlePacket(w.now, from, data))
	}
	w.collect(n)
	return nil
}

// cmdStream: stream NODE from=NAME [raw=HEX], with the request's messages
// as input lines, hands NODE a stream request and prints its reply.
func (w *scenWorld) cmdStream(a *scenArgs, input []string) error {
	n, _, from, data, err := w.inbound(a, input)
	if err != nil {
		return err
	}
	reply, err := n.m.HandleStream(w.now, from, data)
	if err != nil {
		w.printErr(n.name, err)
	} else {
		msgs, err := wire.DecodeStreamPacket(reply)
		if err != nil {
			return fmt.Errorf("the reply does not decode: %w", err)
		}
		for _, l := range w.fmtMsgs("reply: ", msgs, true) {
			w.printf("%s", l)
		}
	}
	w.collect(n)
	return nil
}

// cmdReply: reply NODE stream=ID [error=TEXT] [raw=HEX], with the reply's
// messages as input lines, reports the outcome of one of NODE's stream
// requests to a scripted peer.
func (w *scenWorld) cmdReply(a *scenArgs, input []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	id, err := a.num("stream", 0)
	if err != nil {
		return err
	}
	key := scenStreamKey{n.name, id}
	sr, ok := w.open[key]
	peer := "stranger"
	if ok {
		peer = w.nameAt(sr.To)
		delete(w.open, key)
	}
	var data []byte
	var failure error
	if msg, ok := a.get("error"); ok {
		failure = errors.New(msg)
	} else if len(input) > 0 || a.kv["raw"] != "" {
		if data, err = w.payload(a, input, peer, n.name); err != nil {
			return err
		}
	}
	w.printErr(n.name, n.m.HandleStreamResponse(w.now, id, data, failure))
	w.collect(n)
	return nil
}

// cmdTime: time T sets the clock without ticking anyone.
func (w *scenWorld) cmdTime(a *scenArgs, _ []string) error {
	if len(a.words) != 1 {
		return errors.New("time T")
	}
	at, err := w.when(a.words[0])
	a.words = nil
	if err != nil {
		return err
	}
	if at.Before(w.now) {
		return fmt.Errorf("time %s is before now (%s)", w.since(at), w.since(w.now))
	}
	w.now = at
	return nil
}

// cmdTick: tick NODE [T] moves the clock to T (default: now) and ticks
// NODE.
func (w *scenWorld) cmdTick(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	if len(a.words) > 0 {
		if err := w.cmdTime(a, nil); err != nil {
			return err
		}
	}
	n.m.Tick(w.now)
	w.collect(n)
	return nil
}

// cmdNext: next NODE ticks NODE at its NextDeadline (now, if that is
// past) and prints the time, then what it sent.
func (w *scenWorld) cmdNext(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	d := n.m.NextDeadline()
	if d.IsZero() {
		w.printf("no deadline")
		return nil
	}
	from := w.now
	if d.After(w.now) {
		w.now = d
	}
	w.printf("at %s (+%v)", w.since(w.now), w.now.Sub(from))
	n.m.Tick(w.now)
	w.collect(n)
	return nil
}

// cmdDeadline: deadline NODE prints NODE's NextDeadline.
func (w *scenWorld) cmdDeadline(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	if d := n.m.NextDeadline(); d.IsZero() {
		w.printf("none")
	} else {
		sign := "+"
		if d.Before(w.now) {
			sign = ""
		}
		w.printf("%s (now%s%v)", w.since(d), sign, d.Sub(w.now))
	}
	return nil
}

// cmdRun: run [NODE...] until=T [silent=NAME,...] [answer=false]
// [streams=fail] [stop=Stat] drives the
// Machines (default: all) from their deadlines up to T, as a driver would:
// packets between Machines are delivered at once, scripted peers ack the
// pings sent to them and relay acks for the ping-reqs whose target is not
// silent (unless silent themselves, or answer=false), and their streams
// stay open (or fail at once: streams=fail). It prints what happened
// under the time it happened at. With stop= it
// ends early, after the step in which that Stats counter of a Machine
// changed.
func (w *scenWorld) cmdRun(a *scenArgs, _ []string) error {
	nodes := w.nodes
	if len(a.words) > 0 {
		nodes = nil
		for len(a.words) > 0 {
			n, err := w.node(a)
			if err != nil {
				return err
			}
			nodes = append(nodes, n)
		}
	}
	v, ok := a.get("until")
	if !ok {
		return errors.New("run: until= missing")
	}
	until, err := w.when(v)
	if err != nil {
		return err
	}
	w.silent = map[netip.AddrPort]bool{}
	for _, name := range a.list("silent") {
		addr, err := w.mustAddr(name)
		if err != nil {
			return err
		}
		w.silent[addr] = true
	}
	w.answer = a.str("answer", "true") == "true"
	w.failOpen = a.str("streams", "open") == "fail"
	stop := a.str("stop", "")
	if stop != "" {
		if !reflect.ValueOf(Stats{}).FieldByName(stop).IsValid() {
			return fmt.Errorf("no Stats field %s", stop)
		}
	}
	before := statOf(nodes, stop)
	w.running, w.stamped, w.stampFrom = true, time.Time{}, w.now
	defer func() { w.running = false }()
	if err := w.settle(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		if i > 100000 {
			return errors.New("run: NextDeadline does not advance")
		}
		var d time.Time
		for _, n := range nodes {
			if nd := n.m.NextDeadline(); !nd.IsZero() && (d.IsZero() || nd.Before(d)) {
				d = nd
			}
		}
		if d.IsZero() || d.After(until) {
			break
		}
		if d.After(w.now) {
			w.now = d
		}
		for _, n := range nodes {
			if nd := n.m.NextDeadline(); !nd.IsZero() && !nd.After(w.now) {
				n.m.Tick(w.now)
			}
		}
		if err := w.settle(); err != nil {
			return err
		}
		if stop != "" && stopped(nodes, stop, before) {
			w.printf("stopped: %s changed", stop)
			return nil
		}
	}
	w.now = until
	return nil
}

// statOf is the Stats field named f of each node (nothing when f is
// empty).
func statOf(nodes []*scenNode, f string) []any {
	if f == "" {
		return nil
	}
	vals := make([]any, len(nodes))
	for i, n := range nodes {
		vals[i] = reflect.ValueOf(n.m.Stats()).FieldByName(f).Interface()
	}
	return vals
}

// stopped reports whether a node's Stats field f differs from before.
func stopped(nodes []*scenNode, f string, before []any) bool {
	return !reflect.DeepEqual(statOf(nodes, f), before)
}

// cmdDeliver: deliver hands the packets and streams in flight between
// Machines to their receivers, and what those answer, until none is left.
func (w *scenWorld) cmdDeliver(*scenArgs, []string) error { return w.settle() }

// cmdDrop: drop NAME... cuts Machines off: every packet to or from them is
// lost and every stream fails, until heal.
func (w *scenWorld) cmdDrop(a *scenArgs, _ []string) error {
	for _, name := range a.words {
		w.cut[name] = true
	}
	a.words = nil
	return nil
}

// cmdHeal: heal NAME... ends drop.
func (w *scenWorld) cmdHeal(a *scenArgs, _ []string) error {
	for _, name := range a.words {
		delete(w.cut, name)
	}
	a.words = nil
	return nil
}

// cmdMembers: members NODE prints NODE's table, one member a line.
func (w *scenWorld) cmdMembers(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	for _, m := range n.m.Members() {
		w.printf("%s", w.fmtMember(m))
	}
	return nil
}

// cmdMember: member NODE NAME... prints NODE's view of each name.
func (w *scenWorld) cmdMember(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	for _, name := range a.words {
		if m, ok := n.m.Member(name); ok {
			w.printf("%s", w.fmtMember(m))
		} else {
			w.printf("%s unknown", name)
		}
	}
	a.words = nil
	return nil
}

// cmdStats: stats NODE Field... prints the named counters of Stats.
func (w *scenWorld) cmdStats(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	st := reflect.ValueOf(n.m.Stats())
	var parts []string
	for _, f := range a.words {
		v := st.FieldByName(f)
		if !v.IsValid() {
			return fmt.Errorf("no Stats field %s", f)
		}
		parts = append(parts, fmt.Sprintf("%s=%v", f, v.Interface()))
	}
	a.words = nil
	w.printf("%s", strings.Join(parts, " "))
	return nil
}

// cmdHealth: health NODE prints the local health score.
func (w *scenWorld) cmdHealth(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	w.printf("health %d", n.m.HealthScore())
	return nil
}

// gossipOf prints NODE's pending outputs, then has a member it knows
// (the first live one by name, else the first dead or left one) ping it,
// and returns the deltas riding on the ack: what NODE has queued for
// gossip, as the next packet carries it.
func (w *scenWorld) gossipOf(n *scenNode) ([]wire.Message, error) {
	w.collect(n)
	var asker netip.AddrPort
	for _, live := range []bool{true, false} {
		for _, mem := range n.m.Members() {
			isLive := mem.State == StateAlive || mem.State == StateSuspect
			if mem.Name != n.name && isLive == live && !asker.IsValid() {
				asker = mem.Addr
			}
		}
	}
	if !asker.IsValid() {
		return nil, fmt.Errorf("%s knows nobody to ask for its gossip", n.name)
	}
	const seq = 0xfeed
	data, err := encodeMsgs([]wire.Message{&wire.Ping{Seq: seq, Target: n.name, From: "asker"}})
	if err != nil {
		return nil, err
	}
	if err := n.m.HandlePacket(w.now, asker, data); err != nil {
		return nil, err
	}
	r := n.m.Ready()
	var found [][]wire.Message
	for _, p := range r.Packets {
		if p.To == asker {
			msgs, err := wire.DecodePacket(p.Data)
			if err != nil {
				return nil, err
			}
			found = append(found, msgs)
		}
	}
	if len(found) != 1 || len(found[0]) == 0 || !reflect.DeepEqual(found[0][0], &wire.Ack{Seq: seq}) {
		return nil, fmt.Errorf("%s answered a ping with %d packets, not one ack", n.name, len(found))
	}
	return found[0][1:], nil
}

// cmdGossip: gossip NODE prints the deltas NODE's next packet carries
// (each is sent once more by it).
func (w *scenWorld) cmdGossip(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	deltas, err := w.gossipOf(n)
	if err != nil {
		return err
	}
	if len(deltas) == 0 {
		w.printf("no gossip")
	}
	for _, d := range deltas {
		w.printf("gossip %s", w.fmtMsg(d, false))
	}
	return nil
}

// cmdSettle: settle NODE empties NODE's broadcast queue, printing nothing.
func (w *scenWorld) cmdSettle(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	for range 10000 {
		deltas, err := w.gossipOf(n)
		if err != nil {
			return err
		}
		if len(deltas) == 0 {
			return nil
		}
	}
	return errors.New("the broadcast queue never drains")
}

// cmdLeave: leave NODE calls Leave.
func (w *scenWorld) cmdLeave(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	w.printErr(n.name, n.m.Leave(w.now))
	w.collect(n)
	return nil
}

// cmdLeaveDone: leave-done NODE prints LeaveDone.
func (w *scenWorld) cmdLeaveDone(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	w.printf("leave done: %v", n.m.LeaveDone())
	return nil
}

// cmdUpdateMeta: update-meta NODE meta=TEXT | size=N calls UpdateMeta
// with TEXT, or with N bytes of x.
func (w *scenWorld) cmdUpdateMeta(a *scenArgs, _ []string) error {
	n, err := w.node(a)
	if err != nil {
		return err
	}
	meta := []byte(a.str("meta", ""))
	if size, err := a.num("size", 0); err != nil {
		return err
	} else if size > 0 {
		meta = []byte(strings.Repeat("x", int(size)))
	}
	w.printErr(n.name, n.m.UpdateMeta(w.now, meta))
	w.collect(n)
	return nil
}
