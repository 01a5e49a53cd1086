package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/swim-go/swim"
)

// Bounds of the waits in TestBroadcastLoad: a healthy run needs a
// fraction of each.
const (
	loadWait = 20 * time.Second
	loadPoll = 20 * time.Millisecond
)

// loadMember starts a member on 127.0.0.1 (local profile) whose Messages
// handler is load's; the test shuts it down.
func loadMember(t *testing.T, name string, load *broadcastLoad) *swim.Memberlist {
	t.Helper()
	cfg := swim.DefaultLocalConfig()
	cfg.Name = name
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Messages = swim.MessageFunc(load.receive)
	ml, err := swim.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ml.Shutdown() })
	return ml
}

// reports collects what a load reports, safe for the load's goroutine.
type reports struct {
	mu   sync.Mutex
	seen []loadCounts
}

func (r *reports) add(c loadCounts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, c)
}

func (r *reports) all() []loadCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]loadCounts(nil), r.seen...)
}

// TestBroadcastLoad runs the load of one member of two: the other receives
// its broadcasts, counts go out periodically, and the load stops, with a
// last report, when its context ends or when the member has left.
func TestBroadcastLoad(t *testing.T) {
	a := &broadcastLoad{rate: 100, size: 100, every: 50 * time.Millisecond}
	b := &broadcastLoad{rate: 100, size: 1, every: 50 * time.Millisecond}
	mla, mlb := loadMember(t, "a", a), loadMember(t, "b", b)
	_, err := mlb.Join(context.Background(), mla.LocalMember().Addr.String())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return mla.NumMembers() == 2 && mlb.NumMembers() == 2 }, loadWait, loadPoll)

	// Stopped by its context, as on SIGTERM.
	ctx, cancel := context.WithCancel(context.Background())
	var ra reports
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.run(ctx, mla, ra.add, zap.NewNop())
	}()
	require.Eventually(t, func() bool { return b.counts().Received >= 20 }, loadWait, loadPoll, "b received too few of a's broadcasts")
	require.Eventually(t, func() bool { return len(ra.all()) >= 2 }, loadWait, loadPoll, "a reported its counts too seldom")
	cancel()
	select {
	case <-done:
	case <-time.After(loadWait):
		t.Fatal("the load did not stop when its context ended")
	}
	final := ra.all()[len(ra.all())-1]
	require.Equal(t, a.counts(), final, "the last report has the final counts")
	require.NotZero(t, final.Sent)
	require.Zero(t, final.Failed)
	require.Zero(t, final.Received, "b sent nothing")

	// Stopped by the member's leave, as on SIGUSR1.
	var rb reports
	done = make(chan struct{})
	go func() {
		defer close(done)
		b.run(context.Background(), mlb, rb.add, zap.NewNop())
	}()
	require.Eventually(t, func() bool { return a.counts().Received >= 5 }, loadWait, loadPoll, "a received too few of b's broadcasts")
	lctx, lcancel := context.WithTimeout(context.Background(), loadWait)
	defer lcancel()
	require.NoError(t, mlb.Leave(lctx))
	select {
	case <-done:
	case <-time.After(loadWait):
		t.Fatal("the load did not stop once its member left")
	}
	require.Equal(t, b.counts(), rb.all()[len(rb.all())-1])
}
