package main

import (
	"encoding/binary"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// payloadSize is the size of every broadcast's payload, identifier and
// timestamp included: the figure applications' small notifications have.
const payloadSize = 100

// payloadMagic marks the payloads of this command, so that anything else
// reaching a handler is counted as foreign rather than misread.
const payloadMagic = 0x62637374 // "bcst"

// The payload: magic, the broadcast's index k in the run (its unique
// identifier; the ticker numbers broadcasts 0, 1, … in the order it
// schedules them), the origin's member index, and when Broadcast was
// called, in nanoseconds since the run's clock started. Everything runs in
// one process, so one monotonic clock serves senders and receivers.
const (
	offMagic  = 0
	offIndex  = 4
	offOrigin = 8
	offSent   = 12
	offEnd    = 20
)

func encodePayload(k, origin int, sent time.Duration) []byte {
	p := make([]byte, payloadSize)
	binary.BigEndian.PutUint32(p[offMagic:], payloadMagic)
	binary.BigEndian.PutUint32(p[offIndex:], uint32(k))
	binary.BigEndian.PutUint32(p[offOrigin:], uint32(origin))
	binary.BigEndian.PutUint64(p[offSent:], uint64(sent))
	for i := offEnd; i < payloadSize; i++ {
		p[i] = byte(i) // padding: not zeros, which a compressing path would shrink
	}
	return p
}

// decodePayload returns the broadcast's index, origin and send time; ok is
// false for a payload this command did not make.
func decodePayload(p []byte) (k, origin int, sent time.Duration, ok bool) {
	if len(p) != payloadSize || binary.BigEndian.Uint32(p[offMagic:]) != payloadMagic {
		return 0, 0, 0, false
	}
	k = int(binary.BigEndian.Uint32(p[offIndex:]))
	origin = int(binary.BigEndian.Uint32(p[offOrigin:]))
	sent = time.Duration(binary.BigEndian.Uint64(p[offSent:]))
	return k, origin, sent, true
}

// The fate of a scheduled broadcast at its origin.
const (
	fatePending uint32 = iota // not handed to the library (yet)
	fateSent                  // Broadcast accepted it
	fateFull                  // swim refused it: ErrBroadcastQueueFull
	fateBacklog               // the origin's sender was still busy with earlier calls: never called
	fateError                 // Broadcast failed otherwise
	numFates
)

// tracker records, for every broadcast of a run, its fate at the origin,
// how many members delivered it and when the last did. Handlers of every
// member call it concurrently; everything is atomic, so that the
// measurement does not serialise the members it measures.
type tracker struct {
	n     int
	clock time.Time // the run's clock: payload times are offsets from it

	fate    []atomic.Uint32
	sentAt  []atomic.Int64 // the Broadcast call, ns on the clock
	reached []atomic.Int32 // members other than the origin that delivered it
	lastAt  []atomic.Int64 // the latest of those deliveries, ns on the clock
	// seen[i] is member i's set of delivered broadcasts, one bit each.
	seen [][]atomic.Uint64

	// Receptions as the applications' handlers see them: for memberlist
	// every NotifyMsg (duplicates included), for swim every delivery
	// (swim filters duplicates before its handler).
	handled atomic.Uint64
	// Anomalies: a member's handler given a broadcast it had delivered
	// already (deliveredTwice; memberlist's NotifyMsg gets duplicates by
	// design, so only swim's count), its own broadcast (selfDelivered), or
	// something that is not one of this run's payloads (foreign).
	deliveredTwice atomic.Uint64
	selfDelivered  atomic.Uint64
	foreign        atomic.Uint64
}

func newTracker(n, total int) *tracker {
	t := &tracker{
		n:       n,
		clock:   time.Now(),
		fate:    make([]atomic.Uint32, total),
		sentAt:  make([]atomic.Int64, total),
		reached: make([]atomic.Int32, total),
		lastAt:  make([]atomic.Int64, total),
		seen:    make([][]atomic.Uint64, n),
	}
	words := (total + 63) / 64
	for i := range t.seen {
		t.seen[i] = make([]atomic.Uint64, words)
	}
	return t
}

// now is the time on the run's clock (monotonic).
func (t *tracker) now() time.Duration { return time.Since(t.clock) }

// markSeen marks broadcast k delivered at member i; it reports whether it
// was the first time.
func (t *tracker) markSeen(i, k int) bool {
	bit := uint64(1) << (k % 64)
	return t.seen[i][k/64].Or(bit)&bit == 0
}

// receive records that member i's handler got payload p, and reports
// whether it is the member's first copy of a broadcast of this run (which
// memberlist's members then relay). dupsExpected says whether the library
// hands duplicates to the handler (memberlist) or must not (swim).
func (t *tracker) receive(i int, p []byte, dupsExpected bool) (first bool) {
	at := t.now()
	t.handled.Add(1)
	k, origin, _, ok := decodePayload(p)
	if !ok || k >= len(t.fate) || origin >= t.n {
		t.foreign.Add(1)
		return false
	}
	if origin == i {
		if !dupsExpected {
			t.selfDelivered.Add(1)
		}
		return false
	}
	if !t.markSeen(i, k) {
		if !dupsExpected {
			t.deliveredTwice.Add(1)
		}
		return false
	}
	t.reached[k].Add(1)
	for {
		last := t.lastAt[k].Load()
		if int64(at) <= last || t.lastAt[k].CompareAndSwap(last, int64(at)) {
			break
		}
	}
	return true
}

// outcome sums up a run's broadcasts.
type outcome struct {
	attempted int
	fates     [numFates]int
	complete  int             // sent and delivered by every member but the origin
	latencies []time.Duration // Broadcast call to the last delivery, complete ones
	reachedPc float64         // deliveries / (sent × (N-1)), in %
}

// allSentComplete reports whether every broadcast Broadcast accepted has
// reached every other member: nothing more to wait for.
func (t *tracker) allSentComplete(scheduled int) bool {
	for k := range scheduled {
		if t.fate[k].Load() == fateSent && int(t.reached[k].Load()) < t.n-1 {
			return false
		}
	}
	return true
}

func (t *tracker) summarise(scheduled int) outcome {
	o := outcome{attempted: scheduled}
	var deliveries int
	for k := range scheduled {
		f := t.fate[k].Load()
		o.fates[f]++
		if f != fateSent {
			continue
		}
		r := int(t.reached[k].Load())
		deliveries += r
		if r >= t.n-1 {
			o.complete++
			o.latencies = append(o.latencies, time.Duration(t.lastAt[k].Load()-t.sentAt[k].Load()))
		}
	}
	if s := o.fates[fateSent]; s > 0 && t.n > 1 {
		o.reachedPc = 100 * float64(deliveries) / float64(s*(t.n-1))
	}
	slices.Sort(o.latencies)
	return o
}

// percentile is the nearest-rank p-th percentile of sorted, 0 when empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
