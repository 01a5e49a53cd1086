package swim

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// The world of a scenario (scenWorld), as etcd raft's InteractionEnv: the
// Machines and the scripted peers, their names and addresses, the clock,
// the names of the sequence numbers the Machines choose, the output of a
// command, and the driver that collects what the Machines send and
// delivers what is in flight between them. Messages print and parse in
// scenario_msgs_test.go; the commands are in scenario_cmd_*_test.go.

// scenNode is one Machine of a scenario.
type scenNode struct {
	name string
	addr netip.AddrPort
	m    *Machine
	cfg  *Config
	// delivered: what the Machine handed its application, as printed
	delivered []string
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

	// fields: the optional fields messages print (fields command): life,
	// ver, sig, sent. Off by default, so that the scripts about the
	// mechanisms without them read as before.
	fields map[string]bool
	// The names of keys, lives and broadcasts (scenario_claims_test.go),
	// and the cluster label claims are signed under.
	ids       map[string]ed25519.PrivateKey
	idNames   map[string]string // public key -> identity
	lifeNames map[uint64]string // a Machine's life -> NAME.k
	made      map[string]int    // Machines made of each name
	bcastIDs  map[uint64]string // TreeID -> ORIGIN/EPOCH/SEQ
	label     string

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

		fields:    map[string]bool{},
		ids:       map[string]ed25519.PrivateKey{},
		idNames:   map[string]string{},
		lifeNames: map[uint64]string{},
		made:      map[string]int{},
		bcastIDs:  map[uint64]string{},
	}
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
	for _, msg := range r.Messages {
		s := fmt.Sprintf("%s from=%s%s%s", msg.Kind, msg.From, fmtBytes("key", []byte(msg.Key)), fmtBytes("payload", msg.Payload))
		n.delivered = append(n.delivered, s)
		if w.shown("messages") {
			w.printf("%s delivers %s", n.name, s)
		}
	}
	for _, o := range r.Outcomes {
		if w.shown("messages") {
			res := "ok"
			if o.Err != nil {
				res = o.Err.Error()
			}
			w.printf("%s outcome id=%d: %s", n.name, o.ID, res)
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
