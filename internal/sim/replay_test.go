package sim

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// TestReplayChangesNothing: an eavesdropper records every packet and
// stream request of a cluster while one member leaves, one crashes, one
// changes its metadata and one is suspected and refutes; 60 s later (the
// departed members forgotten by then) it replays all of it to every
// running member, each packet from its original source. No view changes
// and no event fires: a replayed packet holds news no newer than what every
// member knows, and tombstones keep forgotten members from coming back on
// old news. Encryption does not prevent a replay, so this is what makes
// replaying captured encrypted traffic harmless.
func TestReplayChangesNothing(t *testing.T) {
	type captured struct {
		from, to netip.AddrPort
		data     []byte
		stream   bool
	}
	var tape []captured
	recording := false
	opts := Options{Seed: 311, NodeFactory: MachineFactory(lanConfig), OnSend: func(from, to netip.AddrPort, data []byte, stream bool) {
		if recording {
			tape = append(tape, captured{from, to, bytes.Clone(data), stream})
		}
	}}
	s := newScenarioWith(t, opts, 8, true)
	s.opts.CheckInterval = 100 * time.Millisecond
	require.True(t, s.RunUntil(s.converged, 3*time.Minute), "no convergence: %v", s)
	s.opts.CheckInterval = 0

	recording = true
	require.NoError(t, s.DoMachine("m1", func(m *swim.Machine, now time.Time) { require.NoError(t, m.Leave(now)) }))
	require.NoError(t, s.Crash("m2"))
	require.NoError(t, s.DoMachine("m3", func(m *swim.Machine, now time.Time) {
		require.NoError(t, m.UpdateMeta(now, []byte("v2")))
	}))
	require.NoError(t, s.Pause("m4", 3*time.Second))
	s.Run(5 * time.Second)
	require.NoError(t, s.Crash("m1")) // shut down after its leave
	s.Run(30 * time.Second)
	recording = false
	require.Greater(t, len(tape), 100)
	require.Positive(t, len(s.Log().About("m4").Kind(swim.EventSuspect)), "m4 was suspected (and refuted)")

	s.Run(60 * time.Second)
	up := s.upNames()
	snapshot := func() map[string][]swim.Member {
		views := make(map[string][]swim.Member)
		for _, o := range up {
			views[o], _ = s.machine(o).Snapshot()
		}
		return views
	}
	before := snapshot()
	for _, o := range up {
		for _, gone := range []string{"m1", "m2"} {
			_, known := s.view(o, gone)
			require.False(t, known, "%s still remembers %s: the replay would not test forgetting", o, gone)
		}
	}
	replayedAt := s.Now()
	for _, c := range tape {
		for _, o := range up {
			require.NoError(t, s.Do(o, func(n Node, now time.Time) {
				if c.stream {
					_, _ = n.HandleStream(now, c.from, c.data)
				} else {
					_ = n.HandlePacket(now, c.from, c.data)
				}
			}))
		}
	}
	s.Run(10 * time.Second) // any check a replayed packet started is over
	require.Equal(t, before, snapshot(), "a replay changed a view")
	require.Empty(t, s.Log().Since(replayedAt), "a replay made an event")
	var stale uint64
	for _, o := range up {
		stale += s.machine(o).Stats().DeltasStale
	}
	require.Positive(t, stale, "old news of the forgotten members was recognised")
	require.True(t, slices.Equal(up, s.upNames()))
}
