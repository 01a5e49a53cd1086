package swim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/swim-go/swim/internal/claims"
	"github.com/swim-go/swim/internal/wire"
)

// startPushPull queues a push-pull with to; it reports false if our state
// did not encode (a bug, counted).
func (m *Machine) startPushPull(now time.Time, to netip.AddrPort, kind streamKind) (uint64, bool) {
	return m.startPushPullWith(now, to, kind, "")
}

// startPushPullWith is startPushPull to the member named peer, whose
// tombstone, if we hold one, the exchange carries (see encodeState).
func (m *Machine) startPushPullWith(now time.Time, to netip.AddrPort, kind streamKind, peer string) (uint64, bool) {
	m.sigs.Exchange()
	data, err := m.encodeState(kind == streamJoin, peer, peerView{})
	if err != nil {
		m.stats.EncodeErrors++
		return 0, false
	}
	m.stats.PushPulls++
	return m.startStream(now, to, kind, data, m.cfg.StreamTimeout), true
}

// startStream queues a TCP exchange for the driver and remembers its kind
// until HandleStreamResponse reports the outcome.
func (m *Machine) startStream(now time.Time, to netip.AddrPort, kind streamKind, data []byte, timeout time.Duration) uint64 {
	m.streamID++
	id := m.streamID
	m.streams[id] = pendingStream{kind: kind, to: to}
	m.out.Streams = append(m.out.Streams, StreamRequest{ID: id, To: to, Data: data, Timeout: timeout})
	m.after(now.Add(streamExpiry(timeout)), timerStream, id, 0, "")
	return id
}

// streamExpiry is how long the Machine waits for the outcome of a stream
// request with the given Timeout before it counts the exchange as failed
// (StreamsExpired): twice the Timeout, or the Timeout and a second if that
// is longer, so that a driver that honours Timeout has always reported
// first, and one that never reports (a bug, a request dropped on
// shutdown) leaks nothing.
func streamExpiry(timeout time.Duration) time.Duration {
	return timeout + max(timeout, time.Second)
}

// expireStream fails a stream request whose outcome never came.
func (m *Machine) expireStream(now time.Time, id uint64) {
	m.stats.StreamsExpired++
	_ = m.HandleStreamResponse(now, id, nil, errStreamExpired)
}

// errStreamExpired is the outcome of a stream request the driver never
// reported.
var errStreamExpired = errors.New("swim: stream request expired unanswered")

// encodeState encodes this member's whole view for a push-pull, straight
// from the table. The table holds less than MaxMembers, which Validate
// keeps within what a push-pull may carry, so an error here is a bug.
//
// When we hold a tombstone of peer, the member we exchange with, its entry
// is added as dead or left at the tombstone's incarnation: a member that
// was declared dead and forgotten (a partition, or a restart under the
// same name) learns it, and refutes, and its refutation is newer than the
// tombstones that would otherwise keep its news out.
func (m *Machine) encodeState(join bool, peer string, theirs peerView) ([]byte, error) {
	tomb := m.tombByName[peer]
	if tomb != nil && m.lookup(peer) != nil {
		tomb = nil
	}
	n := m.tableSize() - len(m.refusedChanges)
	if tomb != nil {
		n++
	}
	w := wire.NewPushPullWriter(nil, m.selfName, join, n)
	if tomb != nil {
		st := StateDead
		if tomb.left {
			st = StateLeft
		}
		var sig []byte
		switch {
		case !m.signing():
		case tomb.left:
			sig = m.sigs.LeaveSig(tomb.name, tomb.inc, tomb.life)
		default:
			sig = m.sigs.AccusationSig(claims.Accusation{Name: tomb.name, From: m.selfName, Inc: tomb.inc, Life: tomb.life})
		}
		w.AddSigned(tomb.name, tomb.addr, tomb.inc, uint8(st), nil, wire.Versions{}, tomb.life, nil, sig, nil)
	}
	add := func(s *memberState) {
		if _, out := m.refusedChanges[s.id]; out {
			return // this member's policy, not news (Config.Admission.Updates)
		}
		var key, sig, cert []byte
		if m.signing() && m.proofWanted(s, join, theirs) {
			key, sig, cert = m.entryProof(s)
		}
		w.AddSigned(m.nameOf(s), m.addrOf(s), s.inc(), uint8(s.state()), m.metaOf(s), m.versionsOf(s), m.lifeOf(s), key, sig, cert)
	}
	// Deterministic order: self, the ring, then the dead list.
	add(m.self)
	m.ring.each(func(id uint32) {
		if id != m.self.id {
			add(m.entry(id))
		}
	})
	m.dead.each(func(d deadEntry) { add(m.entry(d.id)) })
	data, err := w.Bytes()
	if err != nil {
		return nil, fmt.Errorf("swim: encode push-pull: %w", err)
	}
	return data, nil
}

// HandleStream processes one stream request received from a peer (a
// push-pull, or a ping checking this member over TCP) and returns the reply
// message to write back. A push-pull of more than 1,024 members is
// applied a slice per Tick from then on (see NextDeadline), so the Machine
// keeps req until it is done: the caller must not change it.
func (m *Machine) HandleStream(now time.Time, from netip.AddrPort, req []byte) ([]byte, error) {
	if wire.IsPushPull(req) {
		peer, err := m.mergeState(now, req, mergePushPull, from)
		var r *refusal
		if errors.As(err, &r) {
			// The joiner is told why, rather than finding its stream
			// closed.
			return encodeRefusal(r, len(req))
		}
		if err != nil {
			return nil, fmt.Errorf("swim: stream from %s: %w", from, err)
		}
		// The reply is built once our own entry was merged, so a
		// refutation the request provoked travels back at once.
		reply, err := m.encodeState(false, peer, m.peerView(req))
		if err != nil {
			m.stats.EncodeErrors++
			return nil, err
		}
		return reply, nil
	}
	if wire.IsUser(req) {
		return m.handleStreamUser(from, req)
	}
	// Checked before decoding: a compound of push-pulls would cost a
	// dozen times its size to decode only to be refused.
	if err := wire.CheckSmallStreamPacket(req); err != nil {
		return nil, fmt.Errorf("swim: stream from %s: %w", from, err)
	}
	msgs, err := wire.DecodeStreamPacket(req)
	if err != nil {
		return nil, fmt.Errorf("swim: stream from %s: %w", from, err)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("swim: stream from %s: empty request", from)
	}
	switch first := msgs[0].(type) { // a push-pull in a compound was refused above
	case *wire.Ping:
		return m.handleStreamPing(now, from, first, msgs[1:])
	default:
		return nil, fmt.Errorf("swim: stream from %s: unexpected %T", from, first)
	}
}

// HandleStreamResponse reports the outcome of a StreamRequest: the reply, or
// the error that ended the exchange. It returns nil when the reply was
// merged (or, for more than 1,024 members, accepted to be merged a
// slice per Tick; the Machine keeps resp until then).
func (m *Machine) HandleStreamResponse(now time.Time, id uint64, resp []byte, err error) error {
	pending, ok := m.streams[id]
	if !ok {
		return ErrUnknownStream
	}
	kind := pending.kind
	delete(m.streams, id)
	switch kind {
	case streamPing:
		return m.handleStreamPingReply(now, id, resp, err)
	case streamUser:
		err := userReply(resp, err)
		m.out.Outcomes = append(m.out.Outcomes, Outcome{ID: id, Err: err})
		return err
	}
	if err != nil {
		m.stats.PushPullsFailed++
		return err
	}
	if !wire.IsPushPull(resp) {
		m.stats.PushPullsFailed++
		if err := wire.CheckSmallStreamPacket(resp); err != nil {
			return fmt.Errorf("swim: push-pull reply: %w", err)
		}
		msgs, err := wire.DecodeStreamPacket(resp)
		if err != nil {
			return fmt.Errorf("swim: push-pull reply: %w", err)
		}
		if len(msgs) == 1 {
			if r, ok := msgs[0].(*wire.Refusal); ok {
				return fmt.Errorf("%w: %s", ErrJoinRefused, r.Reason)
			}
		}
		return errors.New("swim: push-pull reply: not a push-pull")
	}
	src := mergeReply
	if kind == streamFollowUp {
		// The seed's view again, with the members that joined through it
		// since it answered us, which the seed itself gossips: as for
		// the join, nothing is passed on. A cluster booting through one
		// seed at once would otherwise have every member queue every
		// other as news, since the seed admits a joiner only once its
		// address answered (newcomers.go), after its answer to the
		// joins that came with it.
		src = mergeFollowUp
	}
	if kind == streamJoin {
		src = mergeJoin
		// The seed's view was a snapshot: members joining at the same time
		// reach us only by gossip, which at first goes to the few members
		// that knew them early, and rumors leave rare holes. Extra
		// exchanges fill those holes (and spread what we know): the first
		// back with the seed, an eighth to a quarter of a period after the
		// join, when it has heard of everyone who joined through it
		// meanwhile; then with random members at doubling gaps (1-2, 2-4
		// periods). A cluster booting through one seed then converges
		// in a quarter of a second at 64 members, not in one second.
		m.scheduleFollowUps(now)
		m.joinedVia = pending.to
	}
	if _, err := m.mergeState(now, resp, src, pending.to); err != nil {
		m.stats.PushPullsFailed++
		return fmt.Errorf("swim: push-pull reply: %w", err)
	}
	return nil
}

// mergeState applies a peer's full view, the push-pull packet data. A
// peer's claim that a member is dead only makes it suspect here (as
// memberlist does): the member gets the chance to refute that our own probes
// would have given it, which is what lets two halves of a healed partition
// merge without killing each other. A malformed packet changes nothing, nor
// does one announcing more than MaxMembers members (refused before it is
// read).
//
// Our own entry is applied first. The rest is applied at once up to
// mergeSlice members; beyond that, the first slice now and one more at each
// Tick, so that a driver that holds a lock while it feeds the Machine (as
// Memberlist does) never holds it for long: merging 100,000 new members
// takes about a quarter of a second, long enough to miss every ack due
// meanwhile.
//
// peer is the stream's remote address. A peer's news of members not known
// is believed at once when this member started the exchange, or the peer
// is a live member at that host; otherwise the peer's own entry is checked
// and the rest held until it is admitted (newcomers.go).
func (m *Machine) mergeState(now time.Time, data []byte, src mergeSource, peer netip.AddrPort) (from string, err error) {
	return m.mergeStateHeld(now, data, src, peer, false)
}

// mergeStateHeld is mergeState; held is set for a push-pull held until its
// sender was admitted (newcomers.go), whose application state was handed on
// when it arrived.
func (m *Machine) mergeStateHeld(now time.Time, data []byte, src mergeSource, peer netip.AddrPort, held bool) (from string, err error) {
	pp, err := wire.ParsePushPullLimit(data, m.cfg.MaxMembers)
	if err != nil {
		if wire.TooManyMembers(err) {
			m.stats.PushPullsRefused++
		} else {
			// A bad field (a name over MaxNameLen): malformed, not a
			// refusal for its size, which the runtime reports as such.
			m.stats.PacketsDropped++
		}
		return "", err
	}
	if pp.Count > mergeSlice && len(m.merges) >= maxPendingMerges {
		m.stats.PushPullsRefused++
		return "", fmt.Errorf("swim: push-pull of %d members: %d large merges already in progress", pp.Count, len(m.merges))
	}
	if pp.Join && src == mergePushPull {
		if err := m.joinerProven(now, pp); err != nil {
			return "", err
		}
	}
	if pp.Join || src == mergeJoin {
		if err := m.admitJoin(pp); err != nil {
			if src == mergePushPull {
				return "", &refusal{"Admission.Join: " + err.Error()}
			}
			return "", fmt.Errorf("swim: join refused by Admission.Join: %w", err)
		}
	}
	if !held {
		m.takeState(pp, src)
	}
	o := m.pushPullTeller(pp.From, peer, src)
	var v wire.MemberView
	for c := pp.Cursor(); c.Next(&v); {
		if string(v.Name) == m.selfName {
			m.mergeMember(now, &v, pp.From, src, o)
			break
		}
	}
	if !o.member {
		// From a process not known as a live member: its own entry
		// first. A joiner is checked at its address, and the rest of its
		// view waits for its admission (newcomers.go); a member back
		// from the dead is a member again at once.
		if m.holdForNewcomer(now, pp, data, o) {
			return pp.From, nil
		}
		o = m.pushPullTeller(pp.From, peer, src)
	}
	o.signer = m.signing() && senderSigns(pp)
	mg := &pendingMerge{cursor: pp.Cursor(), from: pp.From, src: src, teller: o}
	if !m.mergeSome(now, mg, mergeSlice) {
		m.merges = append(m.merges, mg)
		m.armAt(timerMerge, now)
	}
	return pp.From, nil
}

// pushPullTeller is the teller of a push-pull's news (newcomers.go): a
// member's, when this member started the exchange or the sender is a live
// member at the stream's host.
func (m *Machine) pushPullTeller(from string, peer netip.AddrPort, src mergeSource) teller {
	o := teller{from: peer, stream: true, sender: from, member: src != mergePushPull}
	if s := m.lookup(from); !o.member && s != nil && s != m.self && s.live() && m.addrOf(s).Addr() == peer.Addr() {
		o.member = true
	}
	return o
}

// RemoteState is the application state a peer sent in a push-pull, for
// the driver to hand to the application (Memberlist: Config.State's
// MergeRemoteState).
type RemoteState struct {
	From  string // the peer
	Join  bool   // the exchange was a join, the peer's or this member's
	State []byte
}

// takeState hands the application state in pp, if any, to the driver
// (Ready.States), unless it is over MaxStateSize.
func (m *Machine) takeState(pp *wire.PushPullView, src mergeSource) {
	st := pp.State()
	if len(st) == 0 {
		return
	}
	if len(st) > m.cfg.maxStateSize() {
		m.stats.StatesRefused++
		return
	}
	m.out.States = append(m.out.States, RemoteState{From: pp.From, Join: pp.Join || src == mergeJoin, State: bytes.Clone(st)})
}

// mergeSlice is how many members of a push-pull are applied per input: a
// few milliseconds of work when every one of them is new.
const mergeSlice = 1024

// maxPendingMerges bounds the large push-pulls being applied at once; more
// are refused. Each holds its packet, up to MaxStreamBytes.
const maxPendingMerges = 4

// pendingMerge is a push-pull being applied a slice at a time.
type pendingMerge struct {
	cursor *wire.PushPullCursor
	from   string
	src    mergeSource
	teller teller
}

// mergeSome applies up to n more members of mg, skipping our own entry
// (applied first, by mergeState), and reports whether mg is done.
func (m *Machine) mergeSome(now time.Time, mg *pendingMerge, n int) bool {
	var v wire.MemberView
	for range n {
		if !mg.cursor.Next(&v) {
			return true
		}
		if string(v.Name) != m.selfName {
			m.mergeMember(now, &v, mg.from, mg.src, mg.teller)
		}
	}
	return mg.cursor.Left() == 0
}

// tickMerges applies the next slice of the large push-pulls in progress.
func (m *Machine) tickMerges(now time.Time) {
	if len(m.merges) == 0 {
		return
	}
	if m.mergeSome(now, m.merges[0], mergeSlice) {
		m.merges[0] = nil
		m.merges = m.merges[1:]
	}
}

// mergeMember applies one member of a peer's view. The views alias the
// packet: nothing here keeps them past the call (the handlers encode or
// copy what they store).
func (m *Machine) mergeMember(now time.Time, v *wire.MemberView, from string, src mergeSource, o teller) {
	if s := m.lookupBytes(v.Name); s != nil && s != m.self && precedence(s.state(), s.inc(), State(v.State), v.Incarnation) == stale &&
		(len(v.Sig) == 0 || !m.signing() || m.sigs.Holds(string(v.Name))) &&
		(State(v.State) != StateAlive || !otherLife(m.lifeOf(s), v.Life)) &&
		(State(v.State) != StateAlive || v.Versions == (wire.Versions{}) || v.Versions == m.versionsOf(s)) {
		// Nothing the handlers below would act on: the common case of a
		// periodic exchange, skipped before building a delta.
		return
	}
	if o.signer && len(v.Sig) == 0 {
		// A proof the sender left out: it deemed the news known here.
		// Missed news comes with its proof in the reply to this
		// member's own next exchange (proofWanted).
		return
	}
	name := string(v.Name)
	if State(v.State) != StateAlive && !o.member && (src == mergeGossip || src == mergePushPull) && m.accusationFromStranger(name, nil) {
		return
	}
	switch State(v.State) {
	case StateAlive:
		m.handleAlive(now, &wire.Alive{Name: name, Addr: v.Addr, Incarnation: v.Incarnation, Meta: v.Meta, Versions: v.Versions, Life: v.Life,
			Key: v.Key, Sig: v.Sig, Cert: v.Cert}, src, o)
	case StateDead:
		if name == m.selfName {
			if v.Life == 0 || v.Life == m.life {
				m.selfDeclaredDead(now, v.Incarnation)
			}
			return
		}
		m.handleSuspect(now, &wire.Suspect{Name: name, Incarnation: v.Incarnation, From: from, Life: v.Life, Sig: v.Sig})
	case StateSuspect:
		m.handleSuspect(now, &wire.Suspect{Name: name, Incarnation: v.Incarnation, From: from, Life: v.Life, Sig: v.Sig})
	case StateLeft:
		// A signed leave is the member's own word, relayed.
		by := from
		if len(v.Sig) > 0 && m.signing() {
			by = name
		}
		m.handleDead(now, &wire.Dead{Name: name, Incarnation: v.Incarnation, From: by, Left: true, Life: v.Life, Sig: v.Sig}, nil)
	}
}

// pushPullInterval scales PushPullInterval with the cluster size beyond 32
// members, so each member's share of full-state traffic stays bounded as
// the states grow.
func (m *Machine) pushPullInterval() time.Duration {
	n := m.NumMembers()
	if n <= 32 {
		return m.cfg.PushPullInterval
	}
	mult := math.Ceil(math.Log2(float64(n))-math.Log2(32)) + 1
	return time.Duration(mult * float64(m.cfg.PushPullInterval))
}

// scheduleFollowUps plans the early push-pulls of a join, the first an
// eighth to a quarter of a probe period from now.
func (m *Machine) scheduleFollowUps(now time.Time) {
	if m.cfg.PushPullInterval <= 0 {
		return
	}
	m.joinFollowUps = joinFollowUps
	if soon := now.Add(m.cfg.ProbeInterval/8 + m.jitter(m.cfg.ProbeInterval/8)); soon.Before(m.timers.due[timerPushPull]) {
		m.schedule(timerPushPull, soon)
	}
}

// joinFollowUps is how many early push-pulls follow a join.
const joinFollowUps = 3

// tickPushPull runs the periodic anti-entropy exchange with a random member.
func (m *Machine) tickPushPull(now time.Time) {
	if m.cfg.PushPullInterval <= 0 || now.Before(m.timers.due[timerPushPull]) {
		return
	}
	iv := m.pushPullInterval()
	m.timers.due[timerPushPull] = now.Add(iv/2 + m.jitter(iv))
	if m.joinFollowUps > 0 {
		m.joinFollowUps--
		if m.joinFollowUps > 0 {
			gap := m.cfg.ProbeInterval / 2 << (joinFollowUps - m.joinFollowUps)
			m.timers.due[timerPushPull] = now.Add(gap + m.jitter(gap))
		}
	}
	if m.self.state() != StateAlive {
		return
	}
	if via := m.joinedVia; via.IsValid() {
		// The first follow-up goes back to the seed, which heard of
		// every member that joined through it since it answered us.
		m.joinedVia = netip.AddrPort{}
		if s := m.byAddr(via); s != nil && s.state() == StateAlive {
			_, _ = m.startPushPull(now, via, streamFollowUp)
			return
		}
	}
	if peers := m.randomLive(1, nil); len(peers) == 1 {
		_, _ = m.startPushPull(now, m.addrOf(peers[0]), streamPushPull)
	}
}

// reconnectWanted reports whether there is anyone to reconnect to: a member
// declared dead, or the seeds while this member is alone.
func (m *Machine) reconnectWanted() bool {
	if m.cfg.ReconnectInterval <= 0 {
		return false
	}
	return m.deadTombs > 0 || m.hasDeadToRetry() || (m.numOthers() == 0 && len(m.seeds) > 0)
}

// hasDeadToRetry reports whether a member declared dead (not left) is in
// the dead list. NextDeadline asks it after every input, so it is a count,
// not a scan: after a mass leave the list is long and holds no target.
func (m *Machine) hasDeadToRetry() bool { return m.dead.failed > 0 }

// reconnectFanout is how many reconnect attempts the cluster makes per dead
// member per ReconnectInterval, about: enough that a member wrongly
// declared dead is reached within the interval (all miss it with
// probability e⁻⁸), few enough that a crash costs the cluster nothing much.
const reconnectFanout = 8

// tickReconnect retries one member declared dead (and, while this member is
// alone, the seeds) with a push-pull. If a partition caused the deaths, the
// exchange succeeds once it heals and the two views merge again.
func (m *Machine) tickReconnect(now time.Time) {
	if m.cfg.ReconnectInterval <= 0 || now.Before(m.timers.due[timerReconnect]) {
		return
	}
	m.timers.due[timerReconnect] = now.Add(m.cfg.ReconnectInterval/2 + m.jitter(m.cfg.ReconnectInterval))
	if m.self.state() != StateAlive {
		return
	}
	if m.numOthers() == 0 && len(m.seeds) > 0 {
		for _, addr := range m.seeds {
			if addr != m.addrOf(m.self) {
				m.stats.Reconnects++
				_, _ = m.startPushPull(now, addr, streamReconnect)
			}
		}
		return
	}
	// The candidates are the members declared dead in the dead list and
	// the tombstones of those forgotten, counted rather than listed: most
	// intervals, most members make no attempt (below), and after a mass
	// failure or leave both lists are long.
	candidates := m.dead.failed + m.deadTombs
	if candidates == 0 {
		return
	}
	// Try with probability reconnectFanout·dead/live (after Serf's
	// dead/live rule), so that the cluster as a whole makes about
	// reconnectFanout attempts per dead member per interval instead of
	// one per member: 10,000 members each pushing their full state at one
	// crashed host every 10 seconds would cost more than the rest of the
	// protocol. Where many are dead (a partition) everyone still tries
	// every interval, as before.
	if live := m.numOthers(); live > 0 && m.rng.Float64()*float64(live) >= float64(reconnectFanout*candidates) {
		return
	}
	addr, name, ok := m.reconnectCandidate(m.rng.IntN(candidates))
	if !ok {
		return
	}
	m.stats.Reconnects++
	_, _ = m.startPushPullWith(now, addr, streamReconnect, name)
}

// reconnectCandidate returns the i-th reconnect candidate: the members
// declared dead in the dead list, oldest first, then the tombstones of
// those that did not leave, oldest first (name is the tombstone's, which
// the exchange then carries; empty for a member still in the table). The
// walk is O(N), but only an attempt takes it, and the attempt's push-pull
// carries the whole table anyway.
func (m *Machine) reconnectCandidate(i int) (addr netip.AddrPort, name string, ok bool) {
	m.dead.each(func(d deadEntry) {
		if d.failed && !ok {
			if i == 0 {
				addr, ok = m.addrOf(m.entry(d.id)), true
			}
			i--
		}
	})
	if ok {
		return addr, "", true
	}
	for _, t := range m.tombs {
		if !t.gone && !t.left {
			if i == 0 {
				return t.addr, t.name, true
			}
			i--
		}
	}
	return netip.AddrPort{}, "", false
}

// Proofs in push-pull entries (signed claims): which entries carry their
// member's proof, and what a request told of the requester's view.

// entryProof returns the key, signature and certificate of s's push-pull
// entry: its signed alive, its leave, or this member's accusation.
func (m *Machine) entryProof(s *memberState) (key, sig, cert []byte) {
	if !m.signing() {
		return nil, nil, nil
	}
	name := m.nameOf(s)
	switch s.state() {
	case StateAlive:
		a := m.aliveOf(s)
		return a.Key, a.Sig, a.Cert
	case StateLeft:
		return nil, m.sigs.LeaveSig(name, s.inc(), m.lifeOf(s)), nil
	}
	return nil, m.sigs.AccusationSig(claims.Accusation{Name: name, From: m.selfName, Inc: s.inc(), Life: m.lifeOf(s)}), nil
}

// peerView is what a push-pull request said of each member: enough to
// tell which of this member's entries the requester lacks (entries; nil
// for this member's own requests). full: the requester started signing
// lately, and binds the keys of the names it holds from the proofs of the
// reply.
type peerView struct {
	entries map[string]peerEntry
	full    bool
}

type peerEntry struct {
	inc, life uint64
	state     State
}

// peerView reads the view of the push-pull request req (nil when not
// signing: no entry then carries a proof).
func (m *Machine) peerView(req []byte) peerView {
	if !m.signing() {
		return peerView{}
	}
	pp, err := wire.ParsePushPullLimit(req, m.cfg.MaxMembers)
	if err != nil {
		return peerView{full: true}
	}
	v := peerView{entries: make(map[string]peerEntry, pp.Count)}
	var mv wire.MemberView
	for c := pp.Cursor(); c.Next(&mv); {
		v.entries[string(mv.Name)] = peerEntry{inc: mv.Incarnation, life: mv.Life, state: State(mv.State)}
	}
	// Its key bound here lately (the request itself may have bound it):
	// it turned signatures on, or joined, lately.
	if m.sigs.BoundLately(pp.From) {
		v.full = true
	}
	return v
}

// proofWanted reports whether s's push-pull entry carries its proof (key,
// signature, certificate), which is most of an entry's size. A proof is
// what lets a member take news it missed; an entry the peer holds already
// needs none, and is dropped unverified. So: in a join, where the peer
// holds nothing yet; in a reply, where the requester's view (theirs)
// lacks the entry or holds an older one; in a request, for claims taken
// in this member's last claims.RecentExchanges exchanges, and for
// suspicions. A member behind on an older claim gets its proof in the
// reply to its own next exchange.
func (m *Machine) proofWanted(s *memberState, join bool, theirs peerView) bool {
	if join || s == m.self || theirs.full {
		return true // this member's own entry says it signs (senderSigns)
	}
	name := m.nameOf(s)
	if theirs.entries != nil {
		e, ok := theirs.entries[name]
		return !ok || otherLife(e.life, m.lifeOf(s)) || precedence(e.state, e.inc, s.state(), s.inc()) == supersedes
	}
	if s.state() == StateSuspect {
		return true
	}
	return m.sigs.Recent(name)
}

// senderSigns reports whether the push-pull pp's sender signed its own
// entry.
func senderSigns(pp *wire.PushPullView) bool {
	var v wire.MemberView
	for c := pp.Cursor(); c.Next(&v); {
		if string(v.Name) == pp.From {
			return len(v.Sig) > 0
		}
	}
	return false
}
