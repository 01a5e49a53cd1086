package wire

import (
	"io"
	"net/netip"
)

// Overheads used by senders to keep a compound packet within a byte budget.
const (
	// CompoundHeaderMax is the most bytes a compound packet adds before its
	// frames (version, type, array header).
	CompoundHeaderMax = 5
	// FrameOverheadMax is the most bytes a compound packet adds per frame
	// (the bin header), for frames shorter than 64 KiB.
	FrameOverheadMax = 3
)

// TODO(wire): implemented by the wire work item; signatures are fixed.

// AppendFrame appends msg's frame (type byte + msgpack body) to dst.
func AppendFrame(dst []byte, msg Message) ([]byte, error) { panic("todo") }

// AppendPacket appends a whole packet (version byte + frame) for msg to dst.
func AppendPacket(dst []byte, msg Message) ([]byte, error) { panic("todo") }

// AppendCompound appends a packet carrying frames to dst. With one frame it
// writes a plain packet (version byte + that frame), saving the overhead.
func AppendCompound(dst []byte, frames [][]byte) []byte { panic("todo") }

// DecodePacket decodes a packet, flattening a compound into its messages.
func DecodePacket(b []byte) ([]Message, error) { panic("todo") }

// DecodeFrame decodes one frame (type byte + body).
func DecodeFrame(b []byte) (Message, error) { panic("todo") }

// EncodeAddr returns the compact binary form of an address.
func EncodeAddr(ap netip.AddrPort) []byte { panic("todo") }

// DecodeAddr parses EncodeAddr's form.
func DecodeAddr(b []byte) (netip.AddrPort, error) { panic("todo") }

// WriteStreamMessage writes one length-prefixed packet to a stream.
func WriteStreamMessage(w io.Writer, packet []byte) error { panic("todo") }

// ReadStreamMessage reads one length-prefixed packet, refusing more than max bytes.
func ReadStreamMessage(r io.Reader, max int) ([]byte, error) { panic("todo") }
