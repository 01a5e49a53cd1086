package plumtree

// seenWindow records which of one origin's broadcasts of one epoch were
// delivered: the highest sequence number, and a bit for each of the
// seenSpan before it. A broadcast further behind than that is taken as
// seen: by then it has been delivered or its spreading is long over.
type seenWindow struct {
	epoch uint64
	top   uint32
	bits  [seenSpan / 64]uint64 // bit i: top-i was delivered
}

const seenSpan = 256

// seenWindows keeps the windows of two of an origin's epochs: its two
// latest, or, once the origin's first epoch is known (pin), that one and
// its latest other. A single forged broadcast claiming a far later epoch
// cannot silence the origin's real ones: unpinned they keep the second
// window, pinned their window is never given up.
type seenWindows struct {
	w      [2]seenWindow // w[0] the later epoch, or the latest other than the pinned
	pinned bool          // w[1] is the origin's first epoch's, kept
}

// pin keeps the window of epoch home, the origin's first, for good: it
// becomes w[1] (from w[0] if that held it), and whatever was there is
// forgotten if it was not later.
func (ws *seenWindows) pin(home uint64) {
	if ws.pinned && ws.w[1].epoch == home {
		return
	}
	switch {
	case ws.w[1].epoch == home:
	case ws.w[0].epoch == home:
		ws.w[1], ws.w[0] = ws.w[0], ws.w[1]
		if ws.w[0].epoch < home {
			ws.w[0] = seenWindow{}
		}
	default:
		if ws.w[1].epoch > ws.w[0].epoch {
			ws.w[0] = ws.w[1]
		}
		ws.w[1] = seenWindow{epoch: home}
	}
	ws.pinned = true
}

// mark records the broadcast (epoch, seq) and reports whether it is new.
func (ws *seenWindows) mark(epoch uint64, seq uint32) bool {
	switch {
	case epoch == ws.w[0].epoch:
		return ws.w[0].mark(seq)
	case epoch == ws.w[1].epoch:
		return ws.w[1].mark(seq)
	case ws.pinned:
		if epoch < ws.w[0].epoch {
			return false // older than the latest other epoch
		}
		ws.w[0] = seenWindow{epoch: epoch}
		return ws.w[0].mark(seq)
	case epoch > ws.w[0].epoch:
		ws.w[1] = ws.w[0]
		ws.w[0] = seenWindow{epoch: epoch}
		return ws.w[0].mark(seq)
	case epoch > ws.w[1].epoch:
		ws.w[1] = seenWindow{epoch: epoch}
		return ws.w[1].mark(seq)
	}
	return false // older than both
}

// behind reports whether (epoch, seq) is too far behind the windows to
// tell whether it was delivered.
func (ws *seenWindows) behind(epoch uint64, seq uint32) bool {
	for i := range ws.w {
		if w := &ws.w[i]; w.epoch == epoch {
			return seq < w.top && w.top-seq >= seenSpan
		}
	}
	return false
}

func (w *seenWindow) mark(seq uint32) bool {
	if seq > w.top {
		w.shift(seq - w.top)
		w.top = seq
		w.bits[0] |= 1
		return true
	}
	back := w.top - seq
	if back >= seenSpan {
		return false
	}
	word, bit := back/64, back%64
	if w.bits[word]&(1<<bit) != 0 {
		return false
	}
	w.bits[word] |= 1 << bit
	return true
}

// shift moves the window n sequence numbers forward.
func (w *seenWindow) shift(n uint32) {
	if n >= seenSpan {
		w.bits = [seenSpan / 64]uint64{}
		return
	}
	words, bits := int(n/64), n%64
	for i := len(w.bits) - 1; i >= 0; i-- {
		var v uint64
		if j := i - words; j >= 0 {
			v = w.bits[j] << bits
			if bits > 0 && j > 0 {
				v |= w.bits[j-1] >> (64 - bits)
			}
		}
		w.bits[i] = v
	}
}
