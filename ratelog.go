package swim

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// refusalLogEvery is the least time between two warnings of one kind.
const refusalLogEvery = 10 * time.Second

// refusalLog writes warnings about refused traffic at most once per kind
// per refusalLogEvery, each with the number of refusals of that kind it
// did not log since the last line: a flood of garbage must not turn into a
// flood of log lines, and an operator must still learn that it happens.
// Every refusal is also counted in a Stats field; the log only points at
// it. Safe for concurrent use.
type refusalLog struct {
	logger *zap.Logger
	now    func() time.Time

	mu    sync.Mutex
	kinds map[string]*refusalKind
}

type refusalKind struct {
	last       time.Time
	suppressed uint64
}

func newRefusalLog(logger *zap.Logger) *refusalLog {
	return &refusalLog{logger: logger, now: time.Now, kinds: make(map[string]*refusalKind)}
}

// warn logs a refusal of the given kind, or counts it as suppressed when one
// of that kind was logged less than refusalLogEvery ago. kind is a short
// constant phrase ("packet with a wrong label"); fields say what was
// refused, from whom.
func (l *refusalLog) warn(kind string, fields ...zap.Field) {
	l.warnEvery(kind, "refused: "+kind, fields...)
}

// warnEvery logs msg as warn does a refusal: at most once per kind per
// refusalLogEvery, with the number of lines of that kind it did not log
// since the last one.
func (l *refusalLog) warnEvery(kind, msg string, fields ...zap.Field) {
	now := l.now()
	l.mu.Lock()
	k := l.kinds[kind]
	if k == nil {
		k = &refusalKind{}
		l.kinds[kind] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < refusalLogEvery {
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
