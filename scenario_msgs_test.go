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
