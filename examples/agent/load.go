package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim"
)

// The broadcast load of -load-rate: application broadcasts beside the
// membership protocol, to see what they cost it (the chaos suite's load
// pass runs its fault cases under such a load).

const (
	// loadRateMax keeps the interval between two broadcasts at a
	// microsecond or more, which a Ticker can keep to; any load worth
	// measuring is far below it.
	loadRateMax = 1e6
	// loadReportEvery is how often the agent prints a load line.
	loadReportEvery = 10 * time.Second
	// loadSeqGrowth: a broadcast's sequence number takes one byte on the
	// wire at first and up to five as it grows, so a payload must leave
	// four bytes more than the first broadcast of a member needs.
	loadSeqGrowth = 4
)

// loadCounts are what the load did so far, printed in load lines.
type loadCounts struct {
	// Sent counts the broadcasts BroadcastWait accepted, Failed those it
	// refused (ErrMessageTooLarge while a member of an older release
	// halves the room, for one), Received the other members' broadcasts
	// delivered to this one.
	Sent     uint64 `json:"sent"`
	Failed   uint64 `json:"failed"`
	Received uint64 `json:"received"`
}

// broadcastLoad sends broadcasts at a fixed rate and counts them, with the
// broadcasts received.
type broadcastLoad struct {
	rate  float64       // broadcasts a second
	size  int           // payload bytes
	every time.Duration // between two reports: loadReportEvery

	sent, failed, received atomic.Uint64
}

func (l *broadcastLoad) counts() loadCounts {
	return loadCounts{Sent: l.sent.Load(), Failed: l.failed.Load(), Received: l.received.Load()}
}

// receive is the member's Messages handler: it counts the broadcasts it
// is handed, so that delivery goes through the same dispatcher an
// application's handler would.
func (l *broadcastLoad) receive(msg swim.Message) {
	if msg.Kind == swim.MessageBroadcast {
		l.received.Add(1)
	}
}

// run broadcasts at l.rate until ctx is done or the member has left,
// reporting the counts every l.every and once more when it stops.
// Every broadcast has no key: each is a message of its own, which must
// reach every member, none replacing another. A broadcast that waits for
// room (the member's tree links backed up) delays the next ones: the
// ticker drops the ticks missed meanwhile, so the load never exceeds the
// rate, and the sent count says how much of it the member kept up.
func (l *broadcastLoad) run(ctx context.Context, ml *swim.Memberlist, report func(loadCounts), logger *zap.Logger) {
	defer func() { report(l.counts()) }()
	// One payload for every broadcast: the library may hold on to it
	// while the broadcast is relayed, and nothing writes to it.
	payload := make([]byte, l.size)
	tick := time.NewTicker(time.Duration(float64(time.Second) / l.rate))
	defer tick.Stop()
	reports := time.NewTicker(l.every)
	defer reports.Stop()
	loggedFailure := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-reports.C:
			report(l.counts())
			continue
		case <-tick.C:
		}
		_, err := ml.BroadcastWait(ctx, payload, "")
		switch {
		case err == nil:
			l.sent.Add(1)
		case ctx.Err() != nil || errors.Is(err, swim.ErrShutdown):
			return
		case errors.Is(err, swim.ErrLeft):
			logger.Info("this member left; the broadcast load stops")
			return
		default:
			l.failed.Add(1)
			// Once: at tens of broadcasts a second, every failure would
			// bury the log; the load lines count them all.
			if !loggedFailure {
				loggedFailure = true
				logger.Warn("broadcast of the load failed; later failures are only counted (load lines)", zap.Error(err))
			}
		}
	}
}

// maxLoadSize is the largest payload a member of cfg can broadcast in a
// cluster of members of its release: one packet with its framing, less
// what its name and label take. It asks the library, on a Machine of the
// same configuration that sends nothing, rather than redo its arithmetic.
func maxLoadSize(cfg *swim.Config) (int, error) {
	m, err := swim.NewMachine(cfg, netip.AddrPortFrom(netip.IPv4Unspecified(), 1), rand.New(rand.NewPCG(1, 2)), time.Now())
	if err != nil {
		return 0, err
	}
	fits := func(n int) (bool, error) {
		_, err := m.Broadcast(time.Now(), "", make([]byte, n+loadSeqGrowth))
		if errors.Is(err, swim.ErrMessageTooLarge) {
			return false, nil
		}
		return err == nil, err
	}
	// The payload never exceeds the packet budget; search below it for
	// the largest that fits.
	lo, hi := 0, cfg.PacketBudget // fits(lo); !fits(hi)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, fmt.Errorf("sizing a broadcast: %w", err)
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}
