package wire

// Overheads used by senders to keep a compound packet within a byte budget.
const (
	// CompoundHeaderMax is the most bytes a compound packet adds before its
	// frames (version, type, array header).
	CompoundHeaderMax = 5
	// FrameOverheadMax is the most bytes a compound packet adds per frame
	// (the bin header), for frames shorter than 64 KiB.
	FrameOverheadMax = 3
)

// The functions of this package live by topic: AppendFrame, AppendPacket and
// AppendCompound in encode.go; DecodePacket, DecodeStreamPacket and
// DecodeFrame in decode.go; EncodeAddr and DecodeAddr in addr.go;
// WriteStreamMessage and ReadStreamMessage in stream.go; the msgpack
// primitives they share in msgpack.go; errors in errors.go.
