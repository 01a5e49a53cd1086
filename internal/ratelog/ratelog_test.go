package ratelog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestRefusalLogIsRateLimited: a flood of one kind of refusal logs one line
// per interval, carrying the count of those it did not log; another kind
// is logged on its own.
func TestRefusalLogIsRateLimited(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	l := New(zap.New(core))
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }

	for range 100 {
		l.Warn("packet with a wrong label")
	}
	l.Warn("stream from a disallowed address")
	require.Equal(t, 2, logs.Len(), "one line per kind")

	now = now.Add(Every)
	l.Warn("packet with a wrong label")
	entries := logs.TakeAll()
	require.Len(t, entries, 3)
	last := entries[2]
	require.Equal(t, "refused: packet with a wrong label", last.Message)
	require.Equal(t, uint64(99), last.ContextMap()["not_logged_since_last"])
}
