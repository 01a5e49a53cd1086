// Package ratelog writes warnings about refused traffic at a bounded rate.
package ratelog

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Every is the least time between two warnings of one kind.
const Every = 10 * time.Second

// Log writes warnings about refused traffic at most once per kind
// per Every, each with the number of refusals of that kind it
// did not log since the last line: a flood of garbage must not turn into a
// flood of log lines, and an operator must still learn that it happens.
// Every refusal is also counted (swim.Stats); the log only points at
// it. Safe for concurrent use.
type Log struct {
	logger *zap.Logger
	now    func() time.Time

	mu    sync.Mutex
	kinds map[string]*kindState
}

// kindState is what the log keeps of one kind.
type kindState struct {
	last       time.Time
	suppressed uint64
}

// New returns a Log that writes to logger.
func New(logger *zap.Logger) *Log {
	return &Log{logger: logger, now: time.Now, kinds: make(map[string]*kindState)}
}

// Warn logs a refusal of the given kind, or counts it as suppressed when one
// of that kind was logged less than Every ago. kind is a short
// constant phrase ("packet with a wrong label"); fields say what was
// refused, from whom.
func (l *Log) Warn(kind string, fields ...zap.Field) {
	l.WarnEvery(kind, "refused: "+kind, fields...)
}

// WarnEvery logs msg as Warn does a refusal: at most once per kind per
// Every, with the number of lines of that kind it did not log
// since the last one.
func (l *Log) WarnEvery(kind, msg string, fields ...zap.Field) {
	now := l.now()
	l.mu.Lock()
	k := l.kinds[kind]
	if k == nil {
		k = &kindState{}
		l.kinds[kind] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < Every {
		k.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := k.suppressed
	k.last, k.suppressed = now, 0
	l.mu.Unlock()
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("not_logged_since_last", suppressed))
	}
	l.logger.Warn(msg, fields...)
}
