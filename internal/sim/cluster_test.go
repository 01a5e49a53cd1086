package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// busyScenario exercises every path of the simulator on 20 jittery fakes
// and returns what identifies the run.
func busyScenario(t *testing.T, seed uint64) (digest uint64, counters Counters, log Log, trace []string) {
	h := newHarness(t, Options{
		Seed:    seed,
		Latency: UniformLatency(time.Millisecond, 20*time.Millisecond),
		Loss:    0.05,
	})
	h.period = 100 * time.Millisecond
	h.jitter = true
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	h.add(names...)
	for _, name := range names {
		// Each fake picks its targets with its own random source.
		h.do(name, func(f *fake, _ time.Time) {
			for range 3 {
				f.targets = append(f.targets, h.Addr(names[f.rng.IntN(len(names))]))
			}
		})
	}
	h.Run(time.Second)
	require.NoError(t, h.Partition(names[:5], names[5:12]))
	require.NoError(t, h.BlockOneWay("n13", "n14"))
	require.NoError(t, h.Pause("n15", 700*time.Millisecond))
	h.do("n1", func(f *fake, _ time.Time) { f.stream(h.Addr("n16"), "hello", time.Second) })
	h.do("n2", func(f *fake, _ time.Time) { f.stream(h.Addr("n7"), "cut off", time.Second) })
	h.Run(time.Second)
	require.NoError(t, h.Crash("n3"))
	h.Run(500 * time.Millisecond)
	h.Heal()
	require.NoError(t, h.Restart("n3"))
	h.Run(2 * time.Second)
	return h.Digest(), h.Counters(), h.Log(), h.trace
}

func TestSameSeedReplaysExactly(t *testing.T) {
	d1, c1, l1, tr1 := busyScenario(t, 42)
	d2, c2, l2, tr2 := busyScenario(t, 42)
	require.Equal(t, tr1, tr2, "every input, in order")
	require.Equal(t, d1, d2)
	require.Equal(t, c1, c2)
	require.Equal(t, l1, l2)
	require.NotZero(t, c1.DroppedLoss)
	require.NotZero(t, c1.DroppedPartition)
	require.NotZero(t, c1.StreamsSucceeded)
	require.NotZero(t, c1.StreamTimeouts)
	require.NotEmpty(t, l1)

	d3, c3, _, tr3 := busyScenario(t, 43)
	require.NotEqual(t, d1, d3)
	require.NotEqual(t, c1, c3)
	require.NotEqual(t, tr1, tr3)
}

func TestEqualTimesAreFIFO(t *testing.T) {
	h := newHarness(t, Options{Seed: 1, Latency: ConstantLatency(3 * time.Millisecond)})
	h.add("a", "b", "c")
	h.send("a", "c", 50)
	h.send("b", "c", 50)
	h.send("a", "c", 50)
	h.Run(time.Second)

	got := h.fake("c").gotKind(kindPing)
	require.Len(t, got, 150)
	for i, r := range got {
		require.Equal(t, at(3*time.Millisecond), r.at)
		from, seq := h.Addr("a"), uint32(i+1)
		switch {
		case i >= 100:
			seq = uint32(i - 50 + 1)
		case i >= 50:
			from, seq = h.Addr("b"), uint32(i-50+1)
		}
		require.Equal(t, from, r.from, "packet %d", i)
		require.Equal(t, seq, r.seq, "packet %d", i)
	}
}

func TestTimerFiresAtNextDeadlineAndFollowsChanges(t *testing.T) {
	h := newHarness(t, Options{Seed: 2})
	h.period = time.Second
	h.add("a")
	h.Run(2500 * time.Millisecond)
	require.Equal(t, []time.Time{at(time.Second), at(2 * time.Second)}, h.fake("a").ticks)

	// Moving the deadline earlier fires the timer early...
	h.do("a", func(f *fake, now time.Time) { f.next = now.Add(100 * time.Millisecond) })
	h.Run(200 * time.Millisecond)
	require.Equal(t, at(2600*time.Millisecond), h.fake("a").ticks[2])
	// ...and moving it later does not tick at the old one.
	h.do("a", func(f *fake, now time.Time) { f.next = now.Add(time.Second) })
	h.Run(2 * time.Second)
	require.Equal(t, []time.Time{
		at(time.Second), at(2 * time.Second), at(2600 * time.Millisecond),
		at(3700 * time.Millisecond), at(4700 * time.Millisecond),
	}, h.fake("a").ticks)

	// No deadline, no timer.
	h.do("a", func(f *fake, _ time.Time) { f.period = 0 })
	before := len(h.fake("a").ticks)
	h.Run(10 * time.Second)
	require.Len(t, h.fake("a").ticks, before)
}

func TestCrashDiscardsPendingEventsAndRestartIsFresh(t *testing.T) {
	h := newHarness(t, Options{Seed: 3, Latency: ConstantLatency(10 * time.Millisecond)})
	h.periods["b"] = 300 * time.Millisecond
	h.add("a", "b")
	h.Run(100 * time.Millisecond)
	h.send("a", "b", 5)
	h.Run(5 * time.Millisecond) // in flight
	old := h.fake("b")
	require.NoError(t, h.Crash("b"))
	require.False(t, h.Node("b").Up())
	require.Nil(t, h.Node("b").Node())
	require.NoError(t, h.Crash("b"), "crashing a crashed node does nothing")
	require.ErrorIs(t, h.Do("b", func(Node, time.Time) {}), ErrNodeDown)
	require.ErrorIs(t, h.Pause("b", time.Second), ErrNodeDown)

	h.Run(time.Second)
	require.Empty(t, old.got, "in-flight packets were discarded")
	require.Empty(t, old.ticks, "its timer (due at 300ms) was discarded")
	require.Equal(t, uint64(5), h.Counters().DroppedDown)
	h.send("a", "b", 1)
	h.Run(time.Second)
	require.Equal(t, uint64(6), h.Counters().DroppedDown, "packets to a down node are dropped")

	// Restart at 2.105s with a longer period: the old generation's timers
	// must not tick the new node.
	h.periods["b"] = 700 * time.Millisecond
	h.send("a", "b", 1)
	require.NoError(t, h.Restart("b"))
	restartedAt := h.Now()
	fresh := h.fake("b")
	require.NotSame(t, old, fresh)
	require.Same(t, fresh, h.Node("b").Node())
	require.True(t, h.Node("b").Up())
	require.Equal(t, 1, h.Node("b").Restarts())
	require.Equal(t, old.addr, fresh.addr)
	require.Equal(t, restartedAt, fresh.born)
	require.Empty(t, fresh.got, "fresh state")

	h.Run(time.Second)
	require.Len(t, fresh.got, 1, "a packet sent just before the restart reaches the new node")
	require.Equal(t, []time.Time{restartedAt.Add(700 * time.Millisecond)}, fresh.ticks)
	require.Empty(t, old.got)
	require.Len(t, h.fake("a").gotKind(kindAck), 1)
	require.Equal(t, old.rng.Uint64() == fresh.rng.Uint64(), false, "each incarnation gets its own random source")
}

func TestRestartOfAnUpNodeCrashesItFirst(t *testing.T) {
	h := newHarness(t, Options{Seed: 4})
	h.period = 100 * time.Millisecond
	h.add("a")
	h.Run(150 * time.Millisecond)
	require.NoError(t, h.Restart("a"))
	h.Run(time.Second)
	require.Len(t, h.fakes["a"], 2)
	require.Len(t, h.fakes["a"][0].ticks, 1)
	require.Len(t, h.fakes["a"][1].ticks, 10)
	require.ErrorIs(t, h.Restart("zz"), ErrUnknownNode)
}

func TestPauseDelaysInputsAndTimersThenCatchesUp(t *testing.T) {
	h := newHarness(t, Options{Seed: 5, Latency: ConstantLatency(10 * time.Millisecond)})
	h.periods["a"] = 100 * time.Millisecond
	h.periods["b"] = time.Second
	h.add("a", "b")
	h.target("a", "b")
	h.Run(500 * time.Millisecond)
	require.NoError(t, h.Pause("b", 2*time.Second))
	require.True(t, h.Node("b").Paused())
	h.Run(1999 * time.Millisecond)
	b := h.fake("b")
	require.Len(t, b.got, 4, "pings arriving at 110..410ms only")
	require.Empty(t, b.ticks, "the timer due at 1s waits")
	h.Run(time.Millisecond)
	require.False(t, h.Node("b").Paused())

	// At 2.5s b processes the 20 pings of 510..2410ms, in order, then ticks
	// once, late, for the deadline it missed.
	var late []received
	for _, r := range b.got {
		if r.at.Equal(at(2500 * time.Millisecond)) {
			late = append(late, r)
		}
	}
	require.Len(t, late, 20)
	for i, r := range late {
		require.Equal(t, uint32(5+i), r.seq)
	}
	require.Equal(t, []time.Time{at(2500 * time.Millisecond)}, b.ticks)

	h.Run(time.Second)
	require.Equal(t, []time.Time{at(2500 * time.Millisecond), at(3500 * time.Millisecond)}, b.ticks,
		"the next period counts from the late tick")
	require.Len(t, h.fake("a").gotKind(kindAck), 34, "every ping was acked: 4 early, 20 late, 10 after")
	require.Zero(t, h.Counters().Dropped())
}

func TestPauseExtendsAndCrashDropsQueuedInputs(t *testing.T) {
	h := newHarness(t, Options{Seed: 6, Latency: ConstantLatency(time.Millisecond)})
	h.add("a", "b")
	require.NoError(t, h.Pause("b", time.Second))
	require.NoError(t, h.Pause("b", 500*time.Millisecond), "a shorter pause changes nothing")
	h.Run(900 * time.Millisecond)
	require.NoError(t, h.Pause("b", time.Second), "extends to 1.9s")
	h.send("a", "b", 3)
	h.Run(999 * time.Millisecond)
	require.True(t, h.Node("b").Paused())
	require.Empty(t, h.fake("b").got)
	h.Run(50 * time.Millisecond)
	require.Len(t, h.fake("b").got, 3)
	require.Equal(t, at(1900*time.Millisecond), h.fake("b").got[0].at)

	require.NoError(t, h.Pause("b", time.Second))
	h.send("a", "b", 2)
	h.Run(100 * time.Millisecond)
	require.NoError(t, h.Crash("b"))
	require.NoError(t, h.Restart("b"))
	require.False(t, h.Node("b").Paused())
	h.Run(2 * time.Second)
	require.Empty(t, h.fake("b").got, "queued inputs died with the crashed node")
	require.Equal(t, uint64(2), h.Counters().DroppedDown)
}

func TestStreamSucceedsAfterRoundTrip(t *testing.T) {
	h := newHarness(t, Options{Seed: 7, Latency: ConstantLatency(3 * time.Millisecond)})
	h.add("a", "b")
	var id uint64
	h.do("a", func(f *fake, _ time.Time) { id = f.stream(h.Addr("b"), "state", time.Second) })
	h.Run(time.Second)

	require.Len(t, h.fake("b").served, 1)
	require.Equal(t, received{at: at(3 * time.Millisecond), from: h.Addr("a")}, h.fake("b").served[0])
	require.Equal(t, []streamResult{{at: at(6 * time.Millisecond), id: id, resp: "re:state"}}, h.fake("a").results)
	cs := h.Counters()
	require.Equal(t, uint64(1), cs.StreamsStarted)
	require.Equal(t, uint64(1), cs.StreamsSucceeded)
	require.Zero(t, cs.StreamsFailed)
	require.Zero(t, cs.HandleErrors)
	require.Empty(t, h.streams, "resolved streams are forgotten")
}

func TestStreamFailuresTimeOut(t *testing.T) {
	tests := []struct {
		name  string
		after bool // set up after the request left rather than before
		setup func(h *harness)
	}{
		{"peer down", false, func(h *harness) { require.NoError(t, h.Crash("b")) }},
		{"partitioned", false, func(h *harness) { require.NoError(t, h.Partition([]string{"a"}, []string{"b"})) }},
		{"request direction blocked", false, func(h *harness) { require.NoError(t, h.BlockOneWay("a", "b")) }},
		{"reply direction blocked", false, func(h *harness) { require.NoError(t, h.BlockOneWay("b", "a")) }},
		{"peer paused past the timeout", false, func(h *harness) { require.NoError(t, h.Pause("b", 5*time.Second)) }},
		{"peer crashes before the request arrives", true, func(h *harness) {
			h.Run(time.Millisecond)
			require.NoError(t, h.Crash("b"))
		}},
		{"partitioned while the request is in flight", true, func(h *harness) {
			require.NoError(t, h.Partition([]string{"a"}, []string{"b"}))
		}},
		{"unknown address", false, func(h *harness) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Seed: 8, Latency: ConstantLatency(3 * time.Millisecond)})
			h.add("a", "b")
			to := h.Addr("b")
			if tt.name == "unknown address" {
				to = netip.MustParseAddrPort("10.9.9.9:7946")
			}
			if !tt.after {
				tt.setup(h)
			}
			var id uint64
			h.do("a", func(f *fake, _ time.Time) { id = f.stream(to, "state", 2*time.Second) })
			if tt.after {
				tt.setup(h)
			}
			h.Run(10 * time.Second)

			results := h.fake("a").results
			require.Len(t, results, 1, "exactly one outcome")
			require.Equal(t, at(2*time.Second), results[0].at)
			require.Equal(t, id, results[0].id)
			require.ErrorIs(t, results[0].err, ErrStreamTimeout)
			require.Empty(t, results[0].resp)
			cs := h.Counters()
			require.Equal(t, uint64(1), cs.StreamsFailed)
			require.Equal(t, uint64(1), cs.StreamTimeouts)
			require.Zero(t, cs.HandleErrors, "errors of failed streams are expected")
			require.Empty(t, h.streams)
		})
	}
}

func TestStreamServedLateByPausedPeerStillTimesOutOnce(t *testing.T) {
	h := newHarness(t, Options{Seed: 9, Latency: ConstantLatency(3 * time.Millisecond)})
	h.add("a", "b")
	require.NoError(t, h.Pause("b", 5*time.Second))
	h.do("a", func(f *fake, _ time.Time) { f.stream(h.Addr("b"), "x", time.Second) })
	h.Run(10 * time.Second)
	require.Len(t, h.fake("b").served, 1, "b serves it when it resumes")
	require.Equal(t, at(5*time.Second), h.fake("b").served[0].at)
	require.Len(t, h.fake("a").results, 1, "the late reply is ignored")
	require.ErrorIs(t, h.fake("a").results[0].err, ErrStreamTimeout)
}

func TestStreamRefusedByPeerFailsAfterRoundTrip(t *testing.T) {
	var handleErrs []string
	h := newHarness(t, Options{
		Seed: 10, Latency: ConstantLatency(3 * time.Millisecond),
		OnHandleError: func(at time.Time, node string, err error) {
			handleErrs = append(handleErrs, fmt.Sprintf("%v %s %v", at.Sub(Epoch), node, err))
		},
	})
	h.add("a", "b")
	h.do("a", func(f *fake, _ time.Time) { f.stream(h.Addr("b"), "fail", time.Second) })
	h.Run(time.Second)
	results := h.fake("a").results
	require.Len(t, results, 1)
	require.Equal(t, at(6*time.Millisecond), results[0].at)
	require.ErrorIs(t, results[0].err, ErrStreamClosed)
	require.ErrorContains(t, results[0].err, "fake: refused")
	require.Equal(t, []string{"3ms b fake: refused"}, handleErrs)
	require.Equal(t, uint64(1), h.Counters().StreamsFailed)
	require.Zero(t, h.Counters().StreamTimeouts)
}

func TestStreamUsesDefaultTimeout(t *testing.T) {
	h := newHarness(t, Options{Seed: 11, StreamTimeout: 4 * time.Second})
	h.add("a", "b")
	require.NoError(t, h.Crash("b"))
	h.do("a", func(f *fake, _ time.Time) { f.stream(h.Addr("b"), "x", 0) })
	h.Run(time.Minute)
	require.Equal(t, at(4*time.Second), h.fake("a").results[0].at)
}

func TestStreamReplyToARestartedClientIsDiscarded(t *testing.T) {
	h := newHarness(t, Options{Seed: 12, Latency: ConstantLatency(10 * time.Millisecond)})
	h.add("a", "b")
	h.do("a", func(f *fake, _ time.Time) { f.stream(h.Addr("b"), "x", time.Second) })
	h.Run(15 * time.Millisecond)
	require.NoError(t, h.Restart("a"))
	h.Run(5 * time.Second)
	require.Len(t, h.fake("b").served, 1)
	for _, f := range h.fakes["a"] {
		require.Empty(t, f.results, "neither incarnation hears of the old stream")
	}
	require.Empty(t, h.streams)
}

func TestStreamOutcomesWaitForAPausedClient(t *testing.T) {
	h := newHarness(t, Options{Seed: 13, Latency: ConstantLatency(10 * time.Millisecond)})
	h.add("a", "b", "c")
	require.NoError(t, h.Crash("c"))
	h.do("a", func(f *fake, _ time.Time) {
		f.stream(h.Addr("b"), "ok", time.Second)
		f.stream(h.Addr("c"), "down", time.Second)
	})
	require.NoError(t, h.Pause("a", 3*time.Second))
	h.Run(5 * time.Second)
	results := h.fake("a").results
	require.Len(t, results, 2)
	require.Equal(t, at(3*time.Second), results[0].at)
	require.Equal(t, "re:ok", results[0].resp, "the reply arrived first")
	require.Equal(t, at(3*time.Second), results[1].at)
	require.ErrorIs(t, results[1].err, ErrStreamTimeout)
}

func TestRunUntilStopsWhenTheConditionHolds(t *testing.T) {
	h := newHarness(t, Options{Seed: 14, Latency: ConstantLatency(10 * time.Millisecond)})
	h.periods["a"] = 100 * time.Millisecond
	h.add("a", "b")
	h.target("a", "b")
	calls := 0
	ok := h.RunUntil(func() bool {
		calls++
		return len(h.fake("a").gotKind(kindAck)) == 3
	}, time.Minute)
	require.True(t, ok)
	require.Equal(t, at(320*time.Millisecond), h.Now(), "the clock stops at the third ack")
	require.Less(t, calls, 20, "checked once per batch of events")

	require.False(t, h.RunUntil(func() bool { return false }, time.Second))
	require.Equal(t, at(1320*time.Millisecond), h.Now())
	require.True(t, h.RunUntil(func() bool { return true }, time.Second))
	require.Equal(t, at(1320*time.Millisecond), h.Now(), "a condition already true runs nothing")

	h2 := newHarness(t, Options{Seed: 15})
	h2.add("a")
	require.False(t, h2.RunUntil(func() bool { return false }, time.Second), "an empty queue just advances")
	require.Equal(t, at(time.Second), h2.Now())
}

func TestRunUntilCheckInterval(t *testing.T) {
	h := newHarness(t, Options{Seed: 16, Latency: ConstantLatency(time.Millisecond), CheckInterval: time.Second})
	h.period = 10 * time.Millisecond
	h.add("a", "b")
	h.target("a", "b")
	calls := 0
	require.False(t, h.RunUntil(func() bool { calls++; return false }, 10*time.Second))
	require.LessOrEqual(t, calls, 12, "about once per virtual second")
}

func TestDoDrainsOutputs(t *testing.T) {
	h := newHarness(t, Options{Seed: 17, Latency: ConstantLatency(time.Millisecond)})
	h.add("a", "b")
	h.send("a", "b", 1)
	require.Equal(t, uint64(1), h.Counters().PacketsSent, "sent as soon as Do returns")
	require.ErrorIs(t, h.Do("zz", func(Node, time.Time) {}), ErrUnknownNode)
	require.ErrorIs(t, h.DoMachine("zz", func(*swim.Machine, time.Time) {}), ErrUnknownNode)
	require.Panics(t, func() { _ = h.DoMachine("a", func(*swim.Machine, time.Time) {}) })
	require.Nil(t, h.Node("a").Machine())
}

func TestLogRecordsEventsWithObserverAndTime(t *testing.T) {
	var seen []Record
	h := newHarness(t, Options{
		Seed: 18, Latency: ConstantLatency(10 * time.Millisecond),
		OnEvent: func(r Record) { seen = append(seen, r) },
	})
	h.add("a", "b", "c")
	h.send("a", "b", 2)
	h.Run(100 * time.Millisecond)
	h.send("a", "c", 1)
	h.send("c", "b", 1)
	h.Run(100 * time.Millisecond)

	log := h.Log()
	require.Len(t, log, 3, "one join per first ack")
	require.Equal(t, Log(seen), log)
	r, ok := log.First()
	require.True(t, ok)
	require.Equal(t, Record{At: at(20 * time.Millisecond), Observer: "a", Event: swim.Event{
		Kind: swim.EventJoin, Member: swim.Member{Name: h.Addr("b").String(), Addr: h.Addr("b")},
	}}, r)
	require.Len(t, log.By("a"), 2)
	require.Len(t, log.About(h.Addr("b").String()), 2)
	require.Len(t, log.Kind(swim.EventJoin), 3)
	require.Empty(t, log.Kind(swim.EventLeave))
	require.Len(t, log.State(swim.StateAlive), 3)
	require.Len(t, log.Since(at(100*time.Millisecond)), 2)
	require.Equal(t, []string{"a", "c"}, log.Observers())
	last, _ := log.By("a").Last()
	require.Equal(t, at(120*time.Millisecond), last.At)
	_, ok = log.Kind(swim.EventLeave).First()
	require.False(t, ok)
	require.Contains(t, r.String(), "20ms a: join 10.0.0.2:7946")
}

func TestDisableLogStillCallsOnEvent(t *testing.T) {
	n := 0
	h := newHarness(t, Options{Seed: 19, DisableLog: true, OnEvent: func(Record) { n++ }})
	h.add("a", "b")
	h.send("a", "b", 1)
	h.Run(time.Second)
	require.Empty(t, h.Log())
	require.Equal(t, 1, n)
}

type recordingTB struct {
	failed bool
	logs   []string
	clean  []func()
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Cleanup(f func()) { r.clean = append(r.clean, f) }
func (r *recordingTB) Failed() bool     { return r.failed }
func (r *recordingTB) Logf(format string, a ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, a...))
}

func TestLogSeedOnFailure(t *testing.T) {
	c := New(Options{Seed: 12345, NodeFactory: func(string, netip.AddrPort, *rand.Rand, time.Time) (Node, error) {
		return nil, errors.New("unused")
	}})
	c.Run(1500 * time.Millisecond)

	passed := &recordingTB{}
	c.LogSeedOnFailure(passed)
	passed.clean[0]()
	require.Empty(t, passed.logs)

	failed := &recordingTB{failed: true}
	c.LogSeedOnFailure(failed)
	failed.clean[0]()
	require.Equal(t, []string{"sim seed=12345 at +1.5s: replay with Options.Seed = 12345"}, failed.logs)
	require.Equal(t, uint64(12345), c.Seed())
}

func TestAddNodeErrors(t *testing.T) {
	h := newHarness(t, Options{Seed: 20})
	h.add("a")
	_, err := h.AddNode("a")
	require.ErrorIs(t, err, ErrDuplicateNode)

	c := New(Options{NodeFactory: func(string, netip.AddrPort, *rand.Rand, time.Time) (Node, error) {
		return nil, errors.New("no")
	}})
	_, err = c.AddNode("x")
	require.ErrorContains(t, err, "no")
	require.Empty(t, c.Nodes())
	require.Panics(t, func() { New(Options{}) })

	nodes, err := h.AddNodes("n", 3)
	require.NoError(t, err)
	require.Len(t, nodes, 3)
	require.Equal(t, "n2", nodes[2].Name())
	require.Equal(t, 3, nodes[2].Index())
	require.Same(t, nodes[2], h.NodeByAddr(nodes[2].Addr()))
	require.Nil(t, h.Node("zz"))
	require.Equal(t, netip.AddrPort{}, h.Addr("zz"))
}

func TestMachineFactoryBuildsMachines(t *testing.T) {
	shared := swim.DefaultLocalConfig()
	factory := MachineFactory(func(string) *swim.Config { return shared })
	rng := rand.New(rand.NewPCG(1, 2))
	n, err := factory("m1", addrOf(0), rng, Epoch)
	require.NoError(t, err)
	require.IsType(t, (*swim.Machine)(nil), n)
	require.NotEqual(t, "m1", shared.Name, "the shared Config is copied")

	bad := swim.DefaultLocalConfig()
	bad.ProbeInterval = 0
	_, err = MachineFactory(func(string) *swim.Config { return bad })("m2", addrOf(1), rng, Epoch)
	require.ErrorIs(t, err, swim.ErrInvalidConfig)
}

func TestRunNeverMovesTheClockBack(t *testing.T) {
	h := newHarness(t, Options{Seed: 21})
	h.Run(time.Second)
	h.Run(-time.Second)
	require.Equal(t, at(time.Second), h.Now())
	require.False(t, h.RunUntil(func() bool { return false }, -time.Second))
	require.Equal(t, at(time.Second), h.Now())
	require.Equal(t, time.Second, h.Elapsed())
	require.Zero(t, h.Pending())
}
