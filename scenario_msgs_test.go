package swim

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// Messages in the scenarios' syntax: printing what the Machines send,
// parsing the messages and push-pull member lines a command's input lines
// carry, and encoding them as a packet.

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
func fmtMeta(meta []byte) string { return fmtBytes("meta", meta) }

// fmtBytes prints " NAME=B" (quoted when it must be), nothing for none.
func fmtBytes(name string, b []byte) string {
	if len(b) == 0 {
		return ""
	}
	s := string(b)
	if strings.ContainsAny(s, " \"\t\n") || !strconv.CanBackquote(s) {
		s = strconv.Quote(s)
	}
	return " " + name + "=" + s
}

// fmtMsg prints one message in the syntax parseMsgs reads; chosen says the
// message comes from a Machine (whose ping sequence numbers get names).
func (w *scenWorld) fmtMsg(msg wire.Message, chosen bool) string {
	switch m := msg.(type) {
	case *wire.Ping:
		s := fmt.Sprintf("ping seq=%s target=%s from=%s", w.seqText(m.Seq, chosen), m.Target, m.From)
		return s + w.fmtLifeField(m.TargetLife)
	case *wire.PingReq:
		return fmt.Sprintf("ping-req seq=%s target=%s%s from=%s", w.seqText(m.Seq, chosen), m.Target, w.fmtAddrOf(m.Target, m.TargetAddr), m.From)
	case *wire.Ack:
		return "ack seq=" + w.seqText(m.Seq, false)
	case *wire.Nack:
		return "nack seq=" + w.seqText(m.Seq, false)
	case *wire.Alive:
		return fmt.Sprintf("alive %s inc=%d%s%s", m.Name, m.Incarnation, w.fmtAddrOf(m.Name, m.Addr), fmtMeta(m.Meta)) +
			w.fmtVersions(m.Versions) + w.fmtLifeField(m.Life) +
			w.fmtProof(m.Name, m.Addr, m.Incarnation, m.Life, m.Meta, m.Versions, m.Key, m.Sig, m.Cert)
	case *wire.Suspect:
		s := fmt.Sprintf("suspect %s inc=%d from=%s", m.Name, m.Incarnation, m.From)
		if m.Silence != 0 {
			s += fmt.Sprintf(" silence=%v", time.Duration(m.Silence)*time.Millisecond)
		}
		return s + w.fmtLifeField(m.Life) + w.fmtAccusationSig(m.Name, m.From, m.Incarnation, m.Life, false, m.Sig)
	case *wire.Dead:
		var s string
		switch {
		case m.Left && m.From == m.Name:
			s = fmt.Sprintf("left %s inc=%d", m.Name, m.Incarnation)
		case m.Left:
			s = fmt.Sprintf("left %s inc=%d from=%s", m.Name, m.Incarnation, m.From)
		default:
			s = fmt.Sprintf("dead %s inc=%d from=%s", m.Name, m.Incarnation, m.From)
		}
		s += w.fmtLifeField(m.Life)
		if m.Left {
			return s + w.fmtLeaveSig(m.Name, m.Incarnation, m.Life, m.Sig)
		}
		return s + w.fmtAccusationSig(m.Name, m.From, m.Incarnation, m.Life, true, m.Sig)
	case *wire.PushPull:
		s := "push-pull from=" + m.From
		if m.Join {
			s += " join"
		}
		return s
	case *wire.Broadcast:
		s := fmt.Sprintf("broadcast %s epoch=%s seq=%d%s%s", m.Origin, fmtEpoch(m.Epoch), m.Seq, fmtBytes("key", []byte(m.Key)), fmtBytes("payload", m.Payload))
		w.bcastName(m.Origin, m.Epoch, m.Seq)
		if m.Sent != 0 && w.fields["sent"] {
			s += " sent=" + fmtEpoch(m.Sent)
		}
		return s
	case *wire.IHave:
		return "ihave " + w.fmtTreeIDs(m.IDs)
	case *wire.Graft:
		s := "graft"
		if len(m.IDs) > 0 {
			s += " " + w.fmtTreeIDs(m.IDs)
		}
		if len(m.Origins) > 0 {
			trees := make([]string, len(m.Origins))
			for i, o := range m.Origins {
				trees[i] = fmtTree(o)
			}
			s += " origins=" + strings.Join(trees, ",")
		}
		return s
	case *wire.Prune:
		return "prune " + fmtTree(m.Origin)
	case *wire.User:
		return "user from=" + m.From + fmtBytes("payload", m.Payload)
	case *wire.AckPayload:
		return "ack-payload seq=" + w.seqText(m.Seq, false) + fmtBytes("payload", m.Payload)
	case *wire.Heartbeat:
		return "heartbeat from=" + m.From
	case *wire.ViewDigest:
		return fmt.Sprintf("view-digest live=%d digest=%08x", m.Live, m.Digest)
	case *wire.Refusal:
		return "refusal reason=" + strconv.Quote(m.Reason)
	case *wire.Unknown:
		return fmt.Sprintf("unknown kind=%d", m.Kind)
	}
	return fmt.Sprintf("%T", msg)
}

// fmtTreeIDs prints the broadcast identifiers of an ihave or graft.
func (w *scenWorld) fmtTreeIDs(ids []uint64) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = w.fmtTreeID(id)
	}
	return strings.Join(names, " ")
}

// fmtAccusationSig prints the signature of an accusation, checked against
// the accuser's identity.
func (w *scenWorld) fmtAccusationSig(name, from string, inc, life uint64, dead bool, sig []byte) string {
	if !w.fields["sig"] {
		return ""
	}
	return fmtSig(w.pubOf(from), w.accusationClaim(name, from, inc, life, dead), sig)
}

// fmtLeaveSig prints the signature of a leave, checked against the
// leaving member's identity.
func (w *scenWorld) fmtLeaveSig(name string, inc, life uint64, sig []byte) string {
	if !w.fields["sig"] {
		return ""
	}
	return fmtSig(w.pubOf(name), w.leaveClaim(name, inc, life), sig)
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
				lines = append(lines, "  "+w.fmtMemberState(ms, pp.From))
			}
		}
	}
	if len(msgs) == 0 {
		lines = append(lines, head+"(no messages)")
	}
	return lines
}

// fmtMemberState prints a push-pull member line; from is the push-pull's
// sender, the author of the accusations its entries carry.
func (w *scenWorld) fmtMemberState(ms wire.MemberState, from string) string {
	s := fmt.Sprintf("%s %s inc=%d%s%s", ms.Name, State(ms.State), ms.Incarnation, w.fmtAddrOf(ms.Name, ms.Addr), fmtMeta(ms.Meta))
	s += w.fmtVersions(ms.Versions) + w.fmtLifeField(ms.Life)
	switch State(ms.State) {
	case StateAlive:
		s += w.fmtProof(ms.Name, ms.Addr, ms.Incarnation, ms.Life, ms.Meta, ms.Versions, ms.Key, ms.Sig, ms.Cert)
	case StateLeft:
		s += w.fmtLeaveSig(ms.Name, ms.Incarnation, ms.Life, ms.Sig)
	default:
		// A dead entry is taken as a suspicion (pushpull.go): its
		// accuser signs one.
		s += w.fmtAccusationSig(ms.Name, from, ms.Incarnation, ms.Life, false, ms.Sig)
	}
	return s
}

// fmtMember prints a member as members and events show it.
func (w *scenWorld) fmtMember(m Member) string {
	s := fmt.Sprintf("%s %s inc=%d", m.Name, m.State, m.Incarnation)
	if own, ok := w.addrOf(m.Name); !ok || own != m.Addr {
		s += " addr=" + m.Addr.String()
	}
	return s + fmtMeta(m.Meta) + w.fmtLifeField(m.Life)
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
			ms, err := w.parseMember(tokens, pp.From)
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
// [meta=M] [ver=V] [life=L] [key=K sig=S cert=C]; from is the
// push-pull's sender, who signs the accusations (sig= of a suspect or
// dead entry).
func (w *scenWorld) parseMember(tokens []string, from string) (wire.MemberState, error) {
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
	if ms.Versions, err = versionsArg(a); err != nil {
		return ms, err
	}
	if ms.Life, err = w.lifeArg(a); err != nil {
		return ms, err
	}
	switch st {
	case StateAlive:
		if ms.Key, err = w.keyArg(a, name); err != nil {
			return ms, err
		}
		if ms.Cert, err = w.certArg(a, name, ms.Key); err != nil {
			return ms, err
		}
		ms.Sig, err = w.signArg(a, w.signerOf(ms.Key, name), w.aliveClaim(name, ms.Addr, inc, ms.Life, ms.Meta, ms.Versions, ms.Key))
	case StateLeft:
		ms.Sig, err = w.signArg(a, name, w.leaveClaim(name, inc, ms.Life))
	default:
		ms.Sig, err = w.signArg(a, from, w.accusationClaim(name, from, inc, ms.Life, false))
	}
	if err != nil {
		return ms, err
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
		life, err := w.lifeArg(a)
		if err != nil {
			return nil, err
		}
		msg = &wire.Ping{Seq: s, Target: a.str("target", receiver), From: a.str("from", sender), TargetLife: life}
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
		life, err := w.lifeArg(a)
		if err != nil {
			return nil, err
		}
		switch kind {
		case "alive":
			addr, err := w.addrArg(a, name)
			if err != nil {
				return nil, err
			}
			al := &wire.Alive{Name: name, Addr: wire.EncodeAddr(addr), Incarnation: inc, Life: life}
			if v, ok := a.get("meta"); ok {
				al.Meta = []byte(v)
			}
			if al.Versions, err = versionsArg(a); err != nil {
				return nil, err
			}
			if al.Key, err = w.keyArg(a, name); err != nil {
				return nil, err
			}
			if al.Cert, err = w.certArg(a, name, al.Key); err != nil {
				return nil, err
			}
			if al.Sig, err = w.signArg(a, w.signerOf(al.Key, name), w.aliveClaim(name, al.Addr, inc, life, al.Meta, al.Versions, al.Key)); err != nil {
				return nil, err
			}
			msg = al
		case "suspect":
			s := &wire.Suspect{Name: name, Incarnation: inc, From: a.str("from", sender), Life: life}
			if v, ok := a.get("silence"); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					return nil, err
				}
				s.Silence = uint32(d / time.Millisecond)
			}
			if s.Sig, err = w.signArg(a, s.From, w.accusationClaim(name, s.From, inc, life, false)); err != nil {
				return nil, err
			}
			msg = s
		case "dead":
			d := &wire.Dead{Name: name, Incarnation: inc, From: a.str("from", sender), Life: life}
			if d.Sig, err = w.signArg(a, d.From, w.accusationClaim(name, d.From, inc, life, true)); err != nil {
				return nil, err
			}
			msg = d
		case "left":
			d := &wire.Dead{Name: name, Incarnation: inc, From: a.str("from", name), Left: true, Life: life}
			if d.Sig, err = w.signArg(a, name, w.leaveClaim(name, inc, life)); err != nil {
				return nil, err
			}
			msg = d
		}
	case "push-pull":
		msg = &wire.PushPull{From: a.str("from", sender), Join: a.flag("join")}
	case "broadcast":
		origin, err := subject()
		if err != nil {
			return nil, err
		}
		b := &wire.Broadcast{Origin: origin, Epoch: 1, Key: a.str("key", ""), Payload: []byte(a.str("payload", ""))}
		if v, ok := a.get("epoch"); ok {
			if b.Epoch, err = parseEpoch(v); err != nil {
				return nil, err
			}
		}
		seq, err := a.num("seq", 1)
		if err != nil {
			return nil, err
		}
		b.Seq = uint32(seq)
		if v, ok := a.get("sent"); ok {
			if b.Sent, err = parseEpoch(v); err != nil {
				return nil, err
			}
		}
		w.bcastName(b.Origin, b.Epoch, b.Seq)
		msg = b
	case "ihave", "graft":
		var ids []uint64
		for _, word := range a.words {
			id, err := w.parseTreeID(word)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		a.words = nil
		if kind == "ihave" {
			msg = &wire.IHave{IDs: ids}
			break
		}
		g := &wire.Graft{IDs: ids}
		for _, t := range a.list("origins") {
			g.Origins = append(g.Origins, parseTree(t))
		}
		msg = g
	case "prune":
		tree, err := subject()
		if err != nil {
			return nil, err
		}
		msg = &wire.Prune{Origin: parseTree(tree)}
	case "user":
		msg = &wire.User{From: a.str("from", sender), Payload: []byte(a.str("payload", ""))}
	case "heartbeat":
		msg = &wire.Heartbeat{From: a.str("from", sender)}
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
