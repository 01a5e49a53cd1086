package swim

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/swim-go/swim/internal/wire"
)

// Scenario commands by which scripted peers talk to a Machine: recv (a
// packet), stream (a stream request) and reply (the outcome of the
// Machine's own stream request).

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
