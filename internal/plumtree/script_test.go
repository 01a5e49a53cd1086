package plumtree

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swim-go/swim/internal/script"
	"github.com/swim-go/swim/internal/wire"
)

// The scripts in testdata/*.txt drive one Tree, "self", among members
// p1..pN of a scripted member table, in virtual time, in the manner of
// etcd raft's datadriven tests and of the root package's scenarios
// (testdata/scenarios/README.md there): a command is a directive line,
// optional input lines, a line "----" and what the command must print,
// ended by a blank line; lines starting with # between commands are
// comments. After a deliberate change of behaviour, rewrite the expected
// output and read the diff:
//
//	go test -run TestScripts ./internal/plumtree -rewrite
//
// The commands:
//
//	new [n=N] [off] [MaxOrigins=N] [RetainBytes=N] [FlushInterval=D] [GraftTimeout=D]
//	    a Tree among p1..pN (default 6), all alive, placed on the rings in
//	    turn (with trees on: the Machine tells a Tree that is off nothing of
//	    its members)
//	recv from=pI [off-tree]  + message lines
//	    messages from pI (off-tree: from a member that may not send tree
//	    messages); a broadcast prints its verdict and, fresh, is forwarded
//	originate [key=K] [size=N]  this member's own broadcast
//	flood from=pI origin=pJ [first=S] count=N size=N  broadcasts S.. of pJ
//	    from pI, printing how many had each verdict
//	tick T  advance the clock to T (an offset from the start, or +D from
//	    now), firing the timers due on the way, earliest first; a flush
//	    prints what it sent, if anything (brief: a line per neighbor)
//	suspect pI / dead pI / alive pI  a member's state changes, as the Machine
//	    tells the Tree (NeighborDown first when an alive member stops being)
//	piggyback to=pI [budget=N]  the announcements a packet to pI carries
//	neighbors  the links: rings, trees, what is queued
//	stats  the counters that are not zero
//	backed-up  whether own broadcasts must wait
//
// Message lines: "broadcast pJ/E/S [key=K] [size=N]", "ihave ID...",
// "graft [ID...] [origins=A,B]" ("-" is the shared tree), "prune [ORIGIN]".
// An ID is written origin/epoch/seq.
//
// Every command prints what the Tree asked for meanwhile: packets
// ("-> pI: frames"), and the timers it armed ("timer flush at T", "timer
// graft ID try=N at T").

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt with what the scripts print")

func TestScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runScript(t, path) })
	}
}

func runScript(t *testing.T, path string) {
	w := &world{}
	script.Run(t, path, *rewrite, func(cmd string, input []string) ([]string, error) {
		got, err := w.exec(cmd, input)
		if err == nil && len(got) == 0 {
			got = []string{"ok"}
		}
		return got, err
	})
}

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// member is one entry of the scripted member table.
type member struct {
	name  string
	key   uint64
	state string // alive, suspect, dead
}

// world is the scripted member table (a View) and the Machine's part: the
// clock, the timers the Tree asked for, and the names of broadcasts.
type world struct {
	tree    *Tree
	members []member // by id; 0 is self
	now     time.Time
	flushAt time.Time
	grafts  []GraftTimer
	names   map[uint64]string // broadcast ids as origin/epoch/seq
	seq     uint32
	brief   bool // print packets to each neighbor in one line
}

func (w *world) Key(id uint32) uint64 { return w.members[id].key }
func (w *world) Live(id uint32) bool {
	return int(id) < len(w.members) && w.members[id].state != "dead"
}
func (w *world) Alive(id uint32) bool {
	return int(id) < len(w.members) && w.members[id].state == "alive"
}
func (w *world) Member(name string) bool {
	return slices.ContainsFunc(w.members, func(m member) bool { return m.name == name })
}
func (w *world) Epoch(string) (uint64, bool) { return 0, false }
func (w *world) Eligible(f func(id uint32)) {
	for id := range w.members[1:] {
		if w.Live(uint32(id + 1)) {
			f(uint32(id + 1))
		}
	}
}

// args are a directive's words and key=value pairs.
type args struct {
	words []string
	kv    map[string]string
}

func parseArgs(fields []string) args {
	a := args{kv: map[string]string{}}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			a.kv[k] = v
		} else {
			a.words = append(a.words, f)
		}
	}
	return a
}

func (a args) int(k string, def int) (int, error) {
	v, ok := a.kv[k]
	if !ok {
		return def, nil
	}
	return strconv.Atoi(v)
}

func (a args) dur(k string, def time.Duration) (time.Duration, error) {
	v, ok := a.kv[k]
	if !ok {
		return def, nil
	}
	return time.ParseDuration(v)
}

func (a args) has(word string) bool { return slices.Contains(a.words, word) }

func (w *world) id(name string) (uint32, error) {
	for id, m := range w.members {
		if m.name == name {
			return uint32(id), nil
		}
	}
	return 0, fmt.Errorf("no member %q", name)
}

func (w *world) exec(cmd string, input []string) ([]string, error) {
	fields := strings.Fields(cmd)
	a := parseArgs(fields[1:])
	if fields[0] != "new" && w.tree == nil {
		return nil, fmt.Errorf("no Tree: start with new")
	}
	var out []string
	switch fields[0] {
	case "new":
		if err := w.init(a); err != nil {
			return nil, err
		}
	case "recv":
		from, err := w.id(a.kv["from"])
		if err != nil {
			return nil, err
		}
		f := From{ID: from, OK: !a.has("off-tree") && w.Live(from)}
		for _, line := range input {
			lines, err := w.recv(f, line)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
			out = append(out, lines...)
		}
	case "originate":
		size, err := a.int("size", 8)
		if err != nil {
			return nil, err
		}
		w.seq++
		msg := &wire.Broadcast{Origin: "self", Epoch: 1, Seq: w.seq, Key: a.kv["key"], Payload: make([]byte, size)}
		w.tree.Originate(w.now, msg, w.frame(msg))
		out = append(out, "originated "+w.name(ID(msg.Origin, msg.Epoch, msg.Seq)))
	case "flood":
		from, err := w.id(a.kv["from"])
		if err != nil {
			return nil, err
		}
		count, err := a.int("count", 1)
		if err != nil {
			return nil, err
		}
		size, err := a.int("size", 8)
		if err != nil {
			return nil, err
		}
		verdicts := map[Verdict]int{}
		first, err := a.int("first", 1)
		if err != nil {
			return nil, err
		}
		for i := range count {
			msg := &wire.Broadcast{Origin: a.kv["origin"], Epoch: 1, Seq: uint32(first + i), Payload: make([]byte, size)}
			w.name(ID(msg.Origin, msg.Epoch, msg.Seq))
			v := w.tree.Receive(w.now, From{ID: from, OK: true}, msg)
			if v == Fresh {
				w.tree.Forward(w.now, From{ID: from, OK: true}, msg, w.frame(msg))
			}
			verdicts[v]++
		}
		for v := Own; v <= Fresh; v++ {
			if verdicts[v] > 0 {
				out = append(out, fmt.Sprintf("%s: %d", v, verdicts[v]))
			}
		}
	case "tick":
		if len(fields) < 2 {
			return nil, fmt.Errorf("tick takes a time")
		}
		to, err := w.timeArg(fields[1:2])
		if err != nil {
			return nil, err
		}
		w.brief = a.has("brief")
		return w.tick(to), nil
	case "suspect", "dead", "alive":
		if len(a.words) != 1 {
			return nil, fmt.Errorf("%s takes one member", fields[0])
		}
		id, err := w.id(a.words[0])
		if err != nil {
			return nil, err
		}
		if w.members[id].state == "alive" && fields[0] != "alive" {
			w.tree.NeighborDown(w.now, id)
		}
		w.members[id].state = fields[0]
		if w.tree.cfg.On {
			w.tree.MemberChanged(id, w.Live(id))
		}
	case "piggyback":
		to, err := w.id(a.kv["to"])
		if err != nil {
			return nil, err
		}
		budget, err := a.int("budget", 1300)
		if err != nil {
			return nil, err
		}
		f := w.tree.Piggyback(to, budget)
		if f == nil {
			out = append(out, "nothing")
		} else {
			out = append(out, w.frames([][]byte{f}))
		}
	case "neighbors":
		return w.neighbors(), nil
	case "stats":
		return w.stats(), nil
	case "backed-up":
		return []string{strconv.FormatBool(w.tree.BackedUp())}, nil
	default:
		return nil, fmt.Errorf("unknown command %q", fields[0])
	}
	return append(out, w.output()...), nil
}

func (v Verdict) String() string {
	switch v {
	case Own:
		return "own"
	case Refused:
		return "refused"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	case Implausible:
		return "implausible"
	case Fresh:
		return "fresh"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

func (w *world) init(a args) error {
	n, err := a.int("n", 6)
	if err != nil {
		return err
	}
	cfg := Config{Self: "self", On: !a.has("off"), MaxOrigins: 64, RetainBytes: 8 << 20,
		FlushInterval: 10 * time.Millisecond, GraftTimeout: 500 * time.Millisecond}
	if cfg.MaxOrigins, err = a.int("MaxOrigins", cfg.MaxOrigins); err != nil {
		return err
	}
	if cfg.RetainBytes, err = a.int("RetainBytes", cfg.RetainBytes); err != nil {
		return err
	}
	if cfg.FlushInterval, err = a.dur("FlushInterval", cfg.FlushInterval); err != nil {
		return err
	}
	if cfg.GraftTimeout, err = a.dur("GraftTimeout", cfg.GraftTimeout); err != nil {
		return err
	}
	*w = world{now: start, names: map[uint64]string{}}
	// Keys spread over the ring keys' range, mixed per ring by RingKey.
	w.members = []member{{name: "self", key: 0x5e1f, state: "alive"}}
	for i := 1; i <= n; i++ {
		w.members = append(w.members, member{name: fmt.Sprintf("p%d", i), key: uint64(i) * 0x9e3779b97f4a7c15, state: "alive"})
	}
	w.tree = New(cfg, w, 0)
	for id := 1; id <= n && cfg.On; id++ {
		w.tree.MemberChanged(uint32(id), true)
	}
	return nil
}

// recv feeds one message line from f.
func (w *world) recv(f From, line string) ([]string, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty message")
	}
	a := parseArgs(fields[1:])
	switch fields[0] {
	case "broadcast":
		if len(a.words) != 1 {
			return nil, fmt.Errorf("broadcast takes one ID")
		}
		origin, epoch, seq, err := parseID(a.words[0])
		if err != nil {
			return nil, err
		}
		size, err := a.int("size", 8)
		if err != nil {
			return nil, err
		}
		msg := &wire.Broadcast{Origin: origin, Epoch: epoch, Seq: seq, Key: a.kv["key"], Payload: make([]byte, size)}
		w.name(ID(origin, epoch, seq))
		v := w.tree.Receive(w.now, f, msg)
		if v == Fresh {
			w.tree.Forward(w.now, f, msg, w.frame(msg))
		}
		return []string{fmt.Sprintf("%s: %s", a.words[0], v)}, nil
	case "ihave":
		ids, err := w.ids(a.words)
		if err != nil {
			return nil, err
		}
		w.tree.IHave(w.now, f, ids)
	case "graft":
		ids, err := w.ids(a.words)
		if err != nil {
			return nil, err
		}
		g := &wire.Graft{IDs: ids}
		if o, ok := a.kv["origins"]; ok {
			for _, origin := range strings.Split(o, ",") {
				g.Origins = append(g.Origins, strings.TrimPrefix(origin, "-"))
			}
		}
		w.tree.Graft(w.now, f, g)
	case "prune":
		origin := ""
		if len(a.words) > 0 {
			origin = a.words[0]
		}
		w.tree.Prune(w.now, f, origin)
	default:
		return nil, fmt.Errorf("unknown message %q", fields[0])
	}
	return nil, nil
}

func parseID(s string) (origin string, epoch uint64, seq uint32, err error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return "", 0, 0, fmt.Errorf("an ID is origin/epoch/seq, not %q", s)
	}
	e, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return "", 0, 0, err
	}
	q, err := strconv.ParseUint(parts[2], 10, 32)
	return parts[0], e, uint32(q), err
}

func (w *world) ids(words []string) ([]uint64, error) {
	var ids []uint64
	for _, s := range words {
		origin, epoch, seq, err := parseID(s)
		if err != nil {
			return nil, err
		}
		id := ID(origin, epoch, seq)
		w.names[id] = s
		ids = append(ids, id)
	}
	return ids, nil
}

// name returns the broadcast id as origin/epoch/seq, for the ids the
// script made.
func (w *world) name(id uint64) string {
	if n, ok := w.names[id]; ok {
		return n
	}
	for _, m := range w.members {
		for seq := uint32(1); seq <= 2048; seq++ {
			if ID(m.name, 1, seq) == id {
				w.names[id] = fmt.Sprintf("%s/1/%d", m.name, seq)
				return w.names[id]
			}
		}
	}
	return fmt.Sprintf("%016x", id)
}

func (w *world) frame(msg wire.Message) []byte {
	f, err := wire.AppendFrame(nil, msg)
	if err != nil {
		panic(err)
	}
	return f
}

func (w *world) timeArg(words []string) (time.Time, error) {
	if len(words) != 1 {
		return time.Time{}, fmt.Errorf("a time: T from the start or +D from now")
	}
	if d, ok := strings.CutPrefix(words[0], "+"); ok {
		dd, err := time.ParseDuration(d)
		return w.now.Add(dd), err
	}
	d, err := time.ParseDuration(words[0])
	return start.Add(d), err
}

func (w *world) at(t time.Time) string { return t.Sub(start).String() }

// output takes what the Tree asked for: it prints the packets, and keeps
// the timers as the Machine's queue would (one flush, the earliest asked;
// every graft timer).
func (w *world) output() []string {
	out := w.tree.TakeOutput()
	var lines []string
	if w.brief {
		lines = w.briefPackets(out.Packets)
	} else {
		for _, p := range out.Packets {
			lines = append(lines, fmt.Sprintf("-> %s: %s", w.members[p.To].name, w.frames(p.Frames)))
		}
	}
	if !out.FlushAt.IsZero() && (w.flushAt.IsZero() || out.FlushAt.Before(w.flushAt)) {
		w.flushAt = out.FlushAt
		lines = append(lines, "timer flush at "+w.at(out.FlushAt))
	}
	for _, g := range out.Grafts {
		w.grafts = append(w.grafts, g)
		lines = append(lines, fmt.Sprintf("timer graft %s try=%d at %s", w.name(g.ID), g.Try, w.at(g.At)))
	}
	return lines
}

// tick fires the timers due up to to, earliest first (a flush before a
// graft due at the same instant, as in the Machine's queue).
func (w *world) tick(to time.Time) []string {
	var lines []string
	for {
		at, fire := w.flushAt, "flush"
		gi := -1
		for i, g := range w.grafts {
			if (gi < 0 || g.At.Before(w.grafts[gi].At)) && (fire == "" || at.IsZero() || g.At.Before(at)) {
				gi = i
			}
		}
		if gi >= 0 {
			at, fire = w.grafts[gi].At, "graft"
		}
		if at.IsZero() || at.After(to) {
			break
		}
		w.now = at
		if fire == "flush" {
			// A flush prints what it sent; one that sent nothing is left
			// out, and so is the next flush it asks for.
			w.flushAt = time.Time{}
			w.tree.Flush(at, 1300)
			out := w.output()
			if len(out) > 0 && strings.HasPrefix(out[0], "-> ") {
				lines = append(lines, "at "+w.at(at)+": flush")
				lines = append(lines, slices.DeleteFunc(out, func(l string) bool { return strings.HasPrefix(l, "timer flush") })...)
			}
			continue
		} else {
			g := w.grafts[gi]
			w.grafts = append(w.grafts[:gi], w.grafts[gi+1:]...)
			if !w.tree.GraftPending(g.ID, g.Try) {
				continue
			}
			lines = append(lines, fmt.Sprintf("at %s: graft %s try=%d", w.at(at), w.name(g.ID), g.Try))
			w.tree.GraftDue(at, g.ID)
		}
		lines = append(lines, w.output()...)
	}
	w.now = to
	return lines
}

// briefPackets prints the packets to each neighbor in one line: how many,
// and the first frames.
func (w *world) briefPackets(pkts []Packet) []string {
	var order []uint32
	frames := map[uint32][][]byte{}
	count := map[uint32]int{}
	for _, p := range pkts {
		if count[p.To] == 0 {
			order = append(order, p.To)
		}
		count[p.To]++
		frames[p.To] = append(frames[p.To], p.Frames...)
	}
	var lines []string
	for _, to := range order {
		fs := frames[to]
		line := fmt.Sprintf("-> %s: %d packets, %d frames: %s", w.members[to].name, count[to], len(fs), w.frames(fs[:min(3, len(fs))]))
		if len(fs) > 3 {
			line += "; ..."
		}
		lines = append(lines, line)
	}
	return lines
}

// frames prints frames as messages, "; " between them.
func (w *world) frames(frames [][]byte) string {
	var parts []string
	for _, f := range frames {
		msg, err := wire.DecodeFrame(f)
		if err != nil {
			parts = append(parts, "undecodable: "+err.Error())
			continue
		}
		switch m := msg.(type) {
		case *wire.Broadcast:
			parts = append(parts, "broadcast "+w.name(ID(m.Origin, m.Epoch, m.Seq)))
		case *wire.IHave:
			parts = append(parts, "ihave "+w.idList(m.IDs))
		case *wire.Graft:
			s := "graft"
			if len(m.IDs) > 0 {
				s += " " + w.idList(m.IDs)
			}
			if len(m.Origins) > 0 {
				s += " origins=" + origins(m.Origins)
			}
			parts = append(parts, s)
		case *wire.Prune:
			parts = append(parts, "prune "+origins([]string{m.Origin}))
		default:
			parts = append(parts, fmt.Sprintf("%T", msg))
		}
	}
	return strings.Join(parts, "; ")
}

func (w *world) idList(ids []uint64) string {
	if len(ids) > 8 {
		return fmt.Sprintf("%s .. %s (%d)", w.name(ids[0]), w.name(ids[len(ids)-1]), len(ids))
	}
	var s []string
	for _, id := range ids {
		s = append(s, w.name(id))
	}
	return strings.Join(s, " ")
}

// origins prints trees by origin, "-" for the shared one.
func origins(os []string) string {
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = cmp(o, "-")
	}
	return strings.Join(s, ",")
}

func cmp(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

func (w *world) neighbors() []string {
	var lines []string
	for _, p := range w.tree.peers {
		line := fmt.Sprintf("%s rings=%03b shared=%s", w.members[p.id].name, p.rings, eagerWord(!p.sharedLazy))
		if p.settled {
			line += " settled"
		}
		if len(p.own) > 0 {
			keys := make([]string, 0, len(p.own))
			for o := range p.own {
				keys = append(keys, o)
			}
			sort.Strings(keys)
			var own []string
			for _, o := range keys {
				own = append(own, o+":"+eagerWord(p.own[o]))
			}
			line += " own=" + strings.Join(own, ",")
		}
		if len(p.push) > 0 {
			by := map[string]int{}
			for _, b := range p.push {
				by[b.origin]++
			}
			keys := make([]string, 0, len(by))
			for o := range by {
				keys = append(keys, o)
			}
			sort.Strings(keys)
			var q []string
			for _, o := range keys {
				q = append(q, fmt.Sprintf("%s:%d", o, by[o]))
			}
			line += fmt.Sprintf(" push=%s (%dB)", strings.Join(q, ","), p.pushBytes)
		}
		if len(p.announce) > 0 {
			line += " announce=" + w.idList(p.announce)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		lines = append(lines, "none")
	}
	return lines
}

func eagerWord(eager bool) string {
	if eager {
		return "eager"
	}
	return "lazy"
}

func (w *world) stats() []string {
	s := w.tree.Stats()
	fields := []struct {
		name string
		v    uint64
	}{
		{"PushesSent", s.PushesSent}, {"PushesDropped", s.PushesDropped}, {"Redundant", s.Redundant},
		{"PrunesSent", s.PrunesSent}, {"PrunesReceived", s.PrunesReceived},
		{"AnnouncementsSent", s.AnnouncementsSent}, {"AnnouncementsReceived", s.AnnouncementsReceived},
		{"GraftsSent", s.GraftsSent}, {"GraftsReceived", s.GraftsReceived},
		{"JoinsSent", s.JoinsSent}, {"JoinsReceived", s.JoinsReceived},
		{"GraftsUnknown", s.GraftsUnknown}, {"GraftsAbandoned", s.GraftsAbandoned},
		{"Refused", s.Refused}, {"StateForgotten", s.StateForgotten}, {"EncodeErrors", s.EncodeErrors},
		{"Peers", uint64(s.Peers)}, {"LazyLinks", uint64(s.LazyLinks)}, {"QueueBytes", uint64(s.QueueBytes)},
		{"RetainedBytes", uint64(s.RetainedBytes)}, {"Missing", uint64(s.Missing)}, {"Origins", uint64(s.Origins)},
	}
	var lines []string
	for _, f := range fields {
		if f.v != 0 {
			lines = append(lines, fmt.Sprintf("%s=%d", f.name, f.v))
		}
	}
	return lines
}
